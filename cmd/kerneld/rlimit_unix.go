//go:build linux || darwin

package main

import "syscall"

// raiseFileLimit raises the soft limit on open files to the hard limit
// and returns the limit in force. Every connection takes a descriptor, so
// the soft limit (often 1024) is what would stop kerneld first. (Go does
// the same at start on most systems; doing it here says what it gave.)
func raiseFileLimit() (uint64, error) {
	var l syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &l); err != nil {
		return 0, err
	}
	if l.Cur < l.Max {
		raised := l
		raised.Cur = l.Max
		if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &raised); err != nil {
			return l.Cur, err // darwin caps it lower; the old limit still holds
		}
		l = raised
	}
	return l.Cur, nil
}
