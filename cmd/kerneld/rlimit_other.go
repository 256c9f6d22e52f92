//go:build !linux && !darwin

package main

import "errors"

// raiseFileLimit reports that this system's descriptor limit is unknown.
func raiseFileLimit() (uint64, error) {
	return 0, errors.New("the descriptor limit is unknown on this system")
}
