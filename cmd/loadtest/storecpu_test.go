package main

import (
	"context"
	"net"
	"os"
	"testing"
	"time"
)

// The store server is found by the port it listens on: here, this test's
// own process, whose CPU time then only grows.
func TestFindStoreServer(t *testing.T) {
	if _, err := os.Stat("/proc/net/tcp"); err != nil {
		t.Skip("no /proc/net/tcp: the store server's CPU is measured on Linux only")
	}
	ln, err := new(net.ListenConfig).Listen(context.Background(), "tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = ln.Close() }()
	srv, err := findStoreServer(ln.Addr().String())
	if err != nil {
		t.Fatalf("findStoreServer: %v", err)
	}
	if srv.pid != os.Getpid() {
		t.Fatalf("pid = %d, want this process, %d", srv.pid, os.Getpid())
	}
	before, err := srv.cpuTime()
	if err != nil {
		t.Fatal(err)
	}
	// Spin until the CPU time has grown by a clock tick, or give up.
	deadline := time.Now().Add(10 * time.Second)
	after := before
	for after <= before && time.Now().Before(deadline) {
		if after, err = srv.cpuTime(); err != nil {
			t.Fatal(err)
		}
	}
	if after <= before {
		t.Errorf("cpuTime = %v, and still %v after 10 s of spinning; want it to grow", before, after)
	}
}

func TestFindStoreServer_NoListener(t *testing.T) {
	ln, err := new(net.ListenConfig).Listen(context.Background(), "tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	_ = ln.Close() // now nothing listens there
	if _, err := findStoreServer(addr); err == nil {
		t.Errorf("findStoreServer(%s) found a server where none listens", addr)
	}
}
