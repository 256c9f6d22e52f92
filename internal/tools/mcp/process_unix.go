//go:build unix

package mcp

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"time"
)

// pollInterval is how often killGroup checks whether the group has gone.
const pollInterval = 10 * time.Millisecond

// setProcessGroup makes cmd the leader of a new process group, so that
// killGroup reaches its children and theirs.
func setProcessGroup(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
}

// terminateGroup sends SIGTERM to process group pgid.
func terminateGroup(pgid int) {
	_ = syscall.Kill(-pgid, syscall.SIGTERM) // ESRCH: the group has gone
}

// killGroup ends every process left in process group pgid: SIGTERM, then
// SIGKILL for whatever is still running after grace. The group's leader
// has been reaped by then (by the SDK's session Close); the others are not
// our children, so their parents (or init) reap them.
func killGroup(pgid int, grace time.Duration) {
	if !groupAlive(pgid) {
		return
	}
	terminateGroup(pgid)
	if waitGroupGone(pgid, grace) {
		return
	}
	_ = syscall.Kill(-pgid, syscall.SIGKILL)
	waitGroupGone(pgid, grace)
}

// waitGroupGone polls until no live process is left in group pgid or
// timeout passes, and reports whether the group is gone.
func waitGroupGone(pgid int, timeout time.Duration) bool {
	deadline := time.Now().Add(timeout)
	for groupAlive(pgid) {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(pollInterval)
	}
	return true
}

// groupAlive reports whether process group pgid has a member that is not a
// zombie. Zombies count as gone: they run nothing, and an orphan's zombie
// lasts until init reaps it, which some container inits never do. Where
// there is no /proc, any member counts.
func groupAlive(pgid int) bool {
	if err := syscall.Kill(-pgid, 0); errors.Is(err, syscall.ESRCH) {
		return false
	}
	stats, err := filepath.Glob("/proc/[0-9]*/stat")
	if err != nil || len(stats) == 0 {
		return true
	}
	for _, path := range stats {
		if st, pg, ok := procStat(path); ok && pg == pgid && st != 'Z' {
			return true
		}
	}
	return false
}

// procStat reads a process's state and process group from its
// /proc/PID/stat, whose fields after the parenthesized command name are
// "state ppid pgrp ...".
func procStat(path string) (state byte, pgrp int, ok bool) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, 0, false
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, 0, false
	}
	f := bytes.Fields(b[i+1:])
	if len(f) < 3 || len(f[0]) != 1 {
		return 0, 0, false
	}
	pgrp, err = strconv.Atoi(string(f[2]))
	return f[0][0], pgrp, err == nil
}
