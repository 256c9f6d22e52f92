package pgtest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	osexec "os/exec"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// Server is a PostgreSQL server of one test's own, made with initdb in a
// temporary directory and listening on a free loopback port, for tests
// that stop, crash or starve it: the shared server must stay up for the
// others. Its superuser is postgres, trusted without a password.
type Server struct {
	tb       testing.TB
	bin      string   // the directory of initdb and postgres
	dir      string   // the data directory
	port     int      // the port it listens on, the same across restarts
	settings []string // -c name=value, given by StartServer's caller
	cred     *syscall.Credential

	mu     sync.Mutex
	cmd    *osexec.Cmd
	exited chan struct{} // closed once cmd has exited
	logs   *logBuffer
}

// StartServer makes and starts a server of tb's own with the given
// settings ("max_connections=12"), stopped and removed when tb ends. It
// needs Debian's postgresql package (initdb and postgres under
// /usr/lib/postgresql/*/bin, or on PATH); without it tb skips, saying why,
// or fails under KERNELD_REQUIRE_POSTGRES=1. As root it runs the server as
// the postgres user, since Postgres refuses to run as root.
func StartServer(tb testing.TB, settings ...string) *Server {
	tb.Helper()
	bin, err := serverBin()
	if err != nil {
		if os.Getenv(EnvRequire) == "1" {
			tb.Fatalf("%v (%s=1 requires the Postgres tests; Debian: apt-get install postgresql)", err, EnvRequire)
		}
		tb.Skipf("skip: needs a PostgreSQL server of its own: %v (Debian: apt-get install postgresql)", err)
	}
	s := &Server{tb: tb, bin: bin, settings: settings}
	s.cred, err = serverCredential()
	if err != nil {
		tb.Fatal(err)
	}
	root, err := os.MkdirTemp("", "kerneld-pgtest-")
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = os.RemoveAll(root) })
	s.dir = filepath.Join(root, "data")
	if s.cred != nil {
		// The server's user must reach its directory; root made it 0700.
		if err := os.Chmod(root, 0o755); err != nil {
			tb.Fatal(err)
		}
		if err := os.Mkdir(s.dir, 0o700); err != nil {
			tb.Fatal(err)
		}
		if err := os.Chown(s.dir, int(s.cred.Uid), int(s.cred.Gid)); err != nil {
			tb.Fatal(err)
		}
	}
	initdb := s.command("initdb", "-D", s.dir, "-U", "postgres", "--auth=trust", "-E", "UTF8", "--no-sync", "--no-instructions")
	if out, err := initdb.CombinedOutput(); err != nil {
		tb.Fatalf("initdb: %v\n%s", err, out)
	}
	s.port = freePort(tb)
	tb.Cleanup(s.Crash)
	s.Start()
	return s
}

// URL is the server's postgres database as its superuser.
func (s *Server) URL() string {
	return "postgres://postgres@127.0.0.1:" + strconv.Itoa(s.port) + "/postgres?sslmode=disable"
}

// Start starts the stopped server and waits until it accepts
// connections; after a crash that includes its recovery.
func (s *Server) Start() {
	s.tb.Helper()
	args := []string{"-D", s.dir, "-p", strconv.Itoa(s.port), "-c", "listen_addresses=127.0.0.1",
		"-c", "unix_socket_directories=", "-c", "shared_buffers=16MB", "-c", "logging_collector=off"}
	for _, set := range s.settings {
		args = append(args, "-c", set)
	}
	cmd := s.command("postgres", args...)
	logs := &logBuffer{}
	cmd.Stdout, cmd.Stderr = logs, logs
	if err := cmd.Start(); err != nil {
		s.tb.Fatalf("start postgres: %v", err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	s.mu.Lock()
	s.cmd, s.exited, s.logs = cmd, exited, logs
	s.mu.Unlock()
	deadline := time.Now().Add(2 * time.Minute)
	for wait := 10 * time.Millisecond; ; wait = min(2*wait, 200*time.Millisecond) {
		if s.ping() == nil {
			return
		}
		select {
		case <-exited:
			s.tb.Fatalf("postgres exited while starting:\n%s", logs.String())
		case <-time.After(wait):
		}
		if time.Now().After(deadline) {
			s.tb.Fatalf("postgres did not accept connections within 2m:\n%s", logs.String())
		}
	}
}

// Crash stops the server as a crash would (SIGQUIT, Postgres' immediate
// shutdown: no checkpoint, recovery at the next start) and waits for it
// and its backends to be gone. A crashed server keeps every transaction
// it committed.
func (s *Server) Crash() { s.stop(syscall.SIGQUIT) }

// Stop shuts the server down cleanly (SIGINT, Postgres' fast shutdown:
// its sessions are ended, a checkpoint written).
func (s *Server) Stop() { s.stop(syscall.SIGINT) }

func (s *Server) stop(sig syscall.Signal) {
	s.mu.Lock()
	cmd, exited := s.cmd, s.exited
	s.cmd = nil
	s.mu.Unlock()
	if cmd == nil {
		return
	}
	_ = cmd.Process.Signal(sig)
	// The postmaster exits once its backends have, so the next start finds
	// the data directory free.
	select {
	case <-exited:
	case <-time.After(time.Minute):
		_ = cmd.Process.Kill()
		<-exited
	}
}

// Logs returns what the server wrote since it last started.
func (s *Server) Logs() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.logs == nil {
		return ""
	}
	return s.logs.String()
}

func (s *Server) ping() error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, s.URL())
	if err != nil {
		return err
	}
	return conn.Close(ctx)
}

// command runs one of the server's programs, as its user when that is
// not ours.
func (s *Server) command(name string, args ...string) *osexec.Cmd {
	cmd := osexec.CommandContext(context.Background(), filepath.Join(s.bin, name), args...) // it outlives any one call; Stop ends it
	if s.cred != nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: s.cred}
		cmd.Dir = "/"
	}
	return cmd
}

// serverBin finds the directory holding initdb and postgres: the newest
// of Debian's /usr/lib/postgresql/*/bin, else the one on PATH.
func serverBin() (string, error) {
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	slices.SortFunc(dirs, func(a, b string) int { return versionOf(b) - versionOf(a) })
	for _, d := range dirs {
		if executable(filepath.Join(d, "initdb")) && executable(filepath.Join(d, "postgres")) {
			return d, nil
		}
	}
	if p, err := osexec.LookPath("initdb"); err == nil {
		if p, err = filepath.EvalSymlinks(p); err == nil && executable(filepath.Join(filepath.Dir(p), "postgres")) {
			return filepath.Dir(p), nil
		}
	}
	return "", errors.New("initdb and postgres are not installed")
}

// versionOf is the major version in a path /usr/lib/postgresql/15/bin.
func versionOf(dir string) int {
	v, _ := strconv.Atoi(filepath.Base(filepath.Dir(dir)))
	return v
}

func executable(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0
}

// serverCredential is the postgres user's when we are root, nil otherwise.
func serverCredential() (*syscall.Credential, error) {
	if os.Geteuid() != 0 {
		return nil, nil
	}
	u, err := user.Lookup("postgres")
	if err != nil {
		return nil, fmt.Errorf("running as root, a server of its own needs the postgres user: %w", err)
	}
	uid, _ := strconv.ParseUint(u.Uid, 10, 32)
	gid, _ := strconv.ParseUint(u.Gid, 10, 32)
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}, nil
}

func freePort(tb testing.TB) int {
	tb.Helper()
	var lc net.ListenConfig
	l, err := lc.Listen(context.Background(), "tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	defer func() { _ = l.Close() }()
	return l.Addr().(*net.TCPAddr).Port
}

// logBuffer is the server's output, written by exec's copying goroutine
// and read by the test.
type logBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
