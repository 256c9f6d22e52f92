//go:build !unix

package mcp

import (
	"os/exec"
	"time"
)

// setProcessGroup does nothing where there are no process groups: only the
// command itself is stopped.
func setProcessGroup(*exec.Cmd) {}

// killGroup does nothing where there are no process groups.
func killGroup(int, time.Duration) {}

// terminateGroup does nothing where there are no process groups.
func terminateGroup(int) {}
