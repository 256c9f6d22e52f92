//go:build darwin || dragonfly || freebsd || linux || netbsd || openbsd

package sqlite

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// lockName is the lock file Open creates next to the database.
const lockName = "kerneld.lock"

// lockDir takes the exclusive lock on dir that makes this process the
// directory's only kerneld, and writes its pid into the lock file so the
// error a second process gets can name the owner. The kernel releases a
// flock when the process dies, so a crash leaves no stale lock, only a
// stale pid that the next owner overwrites.
func lockDir(dir string) (*os.File, error) {
	f, err := os.OpenFile(filepath.Join(dir, lockName), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open lock file: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		owner := readOwner(f)
		_ = f.Close() // we hold nothing on it
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("data directory %s is in use by another kerneld (pid %s)", dir, owner)
		}
		return nil, fmt.Errorf("lock data directory %s: %w", dir, err)
	}
	if err := writeOwner(f); err != nil {
		_ = f.Close() // closing releases the lock
		return nil, err
	}
	return f, nil
}

// readOwner returns the pid written in a lock file, or "unknown".
func readOwner(f *os.File) string {
	b := make([]byte, 32)
	n, _ := f.ReadAt(b, 0)
	pid := strings.TrimSpace(string(b[:n]))
	if _, err := strconv.Atoi(pid); err != nil {
		return "unknown"
	}
	return pid
}

func writeOwner(f *os.File) error {
	if err := f.Truncate(0); err != nil {
		return fmt.Errorf("write lock file: %w", err)
	}
	if _, err := f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0); err != nil {
		return fmt.Errorf("write lock file: %w", err)
	}
	return nil
}

// unlockDir releases the lock. The file stays: removing it would let a
// process that opened it just before the removal lock a file nobody else
// can see.
func unlockDir(f *os.File) error {
	if err := f.Close(); err != nil {
		return fmt.Errorf("release lock file: %w", err)
	}
	return nil
}
