package main

import (
	"bytes"
	"context"
	"debug/buildinfo"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// build is one kerneld binary under test.
type build struct {
	label  string // its column in the table
	binary string
	env    []string // more environment for its servers, e.g. the OTLP endpoint of -tracing
}

// goVersion returns the Go release the binary was built with.
func (b build) goVersion() string {
	info, err := buildinfo.ReadFile(b.binary)
	if err != nil {
		return "unknown Go"
	}
	return info.GoVersion
}

// currentBuild describes the binary given with -kerneld, labelled with the
// state of the working tree it presumably came from.
func currentBuild(ctx context.Context, binary string) (build, error) {
	if _, err := os.Stat(binary); err != nil {
		return build{}, fmt.Errorf("kerneld binary: %w (make loadtest builds it)", err)
	}
	label := binary
	if desc, err := git(ctx, "", "describe", "--always", "--dirty"); err == nil {
		label += " (" + desc + ")"
	}
	return build{label: label, binary: binary}, nil
}

// buildAt builds kerneld as of the git ref ref into dir. It checks the ref
// out in a detached worktree of the repository it runs in, builds there as
// `make build` does, and removes the worktree.
func buildAt(ctx context.Context, ref, dir string, log io.Writer) (build, error) {
	root, err := git(ctx, "", "rev-parse", "--show-toplevel")
	if err != nil {
		return build{}, fmt.Errorf("-base needs a git checkout: %w", err)
	}
	sha, err := git(ctx, root, "rev-parse", "--short", ref+"^{commit}")
	if err != nil {
		return build{}, fmt.Errorf("-base %s: %w", ref, err)
	}
	src := filepath.Join(dir, "base-src")
	if _, err := git(ctx, root, "worktree", "add", "--detach", src, sha); err != nil {
		return build{}, err
	}
	out := filepath.Join(dir, "kerneld-base")
	args := unpinned([]string{"go", "build", "-trimpath", "-o", out, "./cmd/kerneld"})
	cmd := exec.CommandContext(ctx, args[0], args[1:]...)
	cmd.Dir = src
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	cmd.Stdout, cmd.Stderr = log, log
	_, _ = fmt.Fprintf(log, "building kerneld at %s (%s)\n", ref, sha) // progress only
	err = cmd.Run()
	_, rmErr := git(context.WithoutCancel(ctx), root, "worktree", "remove", "--force", src)
	if err != nil {
		return build{}, errors.Join(fmt.Errorf("build kerneld at %s: %w", ref, err), rmErr)
	}
	return build{label: ref + " (" + sha + ")", binary: out}, rmErr
}

// unpinned prefixes args with taskset so that a command started by a load
// generator pinned to one CPU may use them all again: compiling on one
// core is slow.
func unpinned(args []string) []string {
	online, err := os.ReadFile("/sys/devices/system/cpu/online")
	if _, lookErr := exec.LookPath("taskset"); err != nil || lookErr != nil {
		return args
	}
	return append([]string{"taskset", "-c", strings.TrimSpace(string(online))}, args...)
}

// git runs git in dir (the current directory when empty) and returns its
// trimmed output.
func git(ctx context.Context, dir string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, "git", args...)
	cmd.Dir = dir
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("git %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return strings.TrimSpace(string(out)), nil
}
