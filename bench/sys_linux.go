//go:build linux

package main

import (
	"os"
	"strings"
	"syscall"
)

// procAttr makes the kernel kill a redis-server whose benchmark process died
// without stopping it (a panic, a kill -9), so no server outlives the run.
func procAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}

// loadAverage returns the 1-minute load average, or "" if unknown: other
// work on the machine skews the numbers, and the table says how much there
// was.
func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return ""
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return ""
	}
	return f[0]
}
