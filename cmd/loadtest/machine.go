package main

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
)

// machine describes where the numbers were measured.
type machine struct {
	cpu    string // model name
	cpus   int    // online
	memory int64  // bytes
	kernel string
}

func readMachine() machine {
	m := machine{cpu: "unknown CPU", cpus: runtime.NumCPU(), kernel: "unknown"}
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		if v, ok := procField(b, "model name"); ok {
			m.cpu = v
		}
	}
	if b, err := os.ReadFile("/sys/devices/system/cpu/online"); err == nil {
		if n := cpuCount(strings.TrimSpace(string(b))); n > 0 {
			m.cpus = n
		}
	}
	if b, err := os.ReadFile("/proc/meminfo"); err == nil {
		if v, ok := procField(b, "MemTotal"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSuffix(v, " kB"), 10, 64)
			m.memory = kb << 10
		}
	}
	if b, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		m.kernel = strings.TrimSpace(string(b))
	}
	return m
}

func (m machine) String() string {
	return fmt.Sprintf("%s, %d CPUs, %.1f GiB RAM, Linux %s", m.cpu, m.cpus, float64(m.memory)/(1<<30), m.kernel)
}

// procField returns the value of the first "name: value" line of a /proc
// file, trimmed.
func procField(b []byte, name string) (string, bool) {
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if ok && strings.TrimSpace(k) == name {
			return strings.TrimSpace(v), true
		}
	}
	return "", false
}

// cpuCount counts the CPUs of a Linux CPU list such as "0-3,8".
func cpuCount(list string) int {
	n := 0
	for _, part := range strings.Split(list, ",") {
		lo, hi, isRange := strings.Cut(part, "-")
		a, err := strconv.Atoi(lo)
		if err != nil {
			return 0
		}
		b := a
		if isRange {
			if b, err = strconv.Atoi(hi); err != nil || b < a {
				return 0
			}
		}
		n += b - a + 1
	}
	return n
}

// affinity returns the CPUs this process may run on, as a CPU list.
func affinity() string {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return "unknown"
	}
	v, ok := procField(b, "Cpus_allowed_list")
	if !ok {
		return "unknown"
	}
	return v
}

// loadAverage returns the one-minute load average.
func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	first, _, _ := strings.Cut(string(b), " ")
	return first
}
