package main

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// A store kept in a server of its own (Redis, PostgreSQL) does part of
// kerneld's work in that server's processes, so the CPU a workload costs
// is kerneld's plus theirs. The tool finds them by the address the store
// URL names: the process listening there, with its children (PostgreSQL
// serves each connection from one). It can only when the server runs on
// this machine and the tool may read its descriptors; otherwise the rows
// that count it are left empty and a note says why. The server's CPU is
// all of it, whoever asked: a server other programs use at the same time
// adds their work.

// storeServer is the process tree of a store's server.
type storeServer struct {
	addr string
	pid  int // the process listening on addr
}

// findStoreServer returns the server listening on addr, a host:port on
// this machine.
func findStoreServer(addr string) (*storeServer, error) {
	_, portText, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, err
	}
	port, err := strconv.ParseUint(portText, 10, 16)
	if err != nil {
		return nil, fmt.Errorf("port %q: %w", portText, err)
	}
	inodes := listeningSockets(uint16(port))
	if len(inodes) == 0 {
		return nil, fmt.Errorf("nothing on this machine listens on port %d", port)
	}
	pid, err := socketOwner(inodes)
	if err != nil {
		return nil, fmt.Errorf("the process listening on port %d: %w", port, err)
	}
	return &storeServer{addr: addr, pid: pid}, nil
}

// listeningSockets returns the inodes of the TCP sockets listening on
// port, from /proc/net/tcp and tcp6.
func listeningSockets(port uint16) map[string]bool {
	inodes := make(map[string]bool)
	want := fmt.Sprintf(":%04X", port)
	for _, table := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
		b, err := os.ReadFile(table)
		if err != nil {
			continue
		}
		sc := bufio.NewScanner(bytes.NewReader(b))
		sc.Scan() // the header
		for sc.Scan() {
			// sl local_address rem_address st tx_queue:rx_queue tr:tm->when retrnsmt uid timeout inode
			f := strings.Fields(sc.Text())
			if len(f) >= 10 && strings.HasSuffix(f[1], want) && f[3] == "0A" { // 0A: LISTEN
				inodes[f[9]] = true
			}
		}
	}
	return inodes
}

// socketOwner returns the process holding one of the sockets inodes.
func socketOwner(inodes map[string]bool) (int, error) {
	fds, err := filepath.Glob("/proc/[0-9]*/fd/*")
	if err != nil {
		return 0, err
	}
	for _, fd := range fds {
		link, err := os.Readlink(fd)
		if err != nil || !strings.HasPrefix(link, "socket:[") {
			continue
		}
		if inodes[strings.TrimSuffix(strings.TrimPrefix(link, "socket:["), "]")] {
			return strconv.Atoi(strings.Split(fd, "/")[2])
		}
	}
	return 0, errors.New("no process of those this user may inspect holds its socket")
}

// cpuTime returns the CPU time the server's processes have used so far:
// the listening process, its descendants, and those that have exited and
// been waited for.
func (s *storeServer) cpuTime() (time.Duration, error) {
	stats, err := allStats()
	if err != nil {
		return 0, err
	}
	root, ok := stats[s.pid]
	if !ok {
		return 0, fmt.Errorf("the store server (pid %d) has exited", s.pid)
	}
	sum := root.own + root.waited
	for pid, st := range stats {
		if pid != s.pid && descends(stats, pid, s.pid) {
			sum += st.own + st.waited
		}
	}
	return sum, nil
}

// procStat is what cpuTime needs of /proc/PID/stat.
type procStat struct {
	ppid   int
	own    time.Duration // utime + stime
	waited time.Duration // cutime + cstime: children that exited and were waited for
}

// allStats reads the stat of every process.
func allStats() (map[int]procStat, error) {
	paths, err := filepath.Glob("/proc/[0-9]*/stat")
	if err != nil {
		return nil, err
	}
	stats := make(map[int]procStat, len(paths))
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			continue // it has exited
		}
		pid, _ := strconv.Atoi(strings.Split(p, "/")[2])
		if st, err := parseProcStat(b); err == nil {
			stats[pid] = st
		}
	}
	return stats, nil
}

// descends reports whether pid is a descendant of root.
func descends(stats map[int]procStat, pid, root int) bool {
	for range 64 { // deeper than any process tree, and no cycle can hold it
		st, ok := stats[pid]
		if !ok || st.ppid <= 1 {
			return false
		}
		if st.ppid == root {
			return true
		}
		pid = st.ppid
	}
	return false
}

// parseProcStat reads the parent and the CPU times from the text of
// /proc/PID/stat; fields are counted after the command name's closing
// parenthesis, since the name may hold spaces.
func parseProcStat(b []byte) (procStat, error) {
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return procStat{}, errors.New("/proc stat: no command name")
	}
	f := strings.Fields(string(b[i+1:])) // f[0] is field 3, the state
	if len(f) < 15 {
		return procStat{}, errors.New("/proc stat: too few fields")
	}
	var n [5]int64
	for j, field := range []int{1, 11, 12, 13, 14} { // ppid, utime, stime, cutime, cstime
		v, err := strconv.ParseInt(f[field], 10, 64)
		if err != nil {
			return procStat{}, fmt.Errorf("/proc stat: %w", err)
		}
		n[j] = v
	}
	return procStat{ppid: int(n[0]), own: time.Duration(n[1]+n[2]) * clockTick,
		waited: time.Duration(n[3]+n[4]) * clockTick}, nil
}
