//go:build !(darwin || dragonfly || freebsd || linux || netbsd || openbsd)

package sqlite

import (
	"errors"
	"os"
)

// lockDir fails where flock(2) is missing: without the lock two processes
// could write one database, so the store refuses to open at all.
func lockDir(dir string) (*os.File, error) {
	return nil, errors.New("sqlite store: locking the data directory is not supported on this platform")
}

func unlockDir(f *os.File) error { return f.Close() }
