//go:build linux

package main

import (
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"
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

// machineCPU returns the busy and total CPU time of the whole machine so
// far, from /proc/stat, to tell how much other processes ran during a
// window. ok is false when it cannot be read.
func machineCPU() (busy, total time.Duration, ok bool) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, 0, false
	}
	line, _, _ := strings.Cut(string(b), "\n")
	f := strings.Fields(line)
	if len(f) < 5 || f[0] != "cpu" {
		return 0, 0, false
	}
	var ticks [10]int64
	for i := 1; i < len(f) && i <= len(ticks); i++ {
		ticks[i-1], _ = strconv.ParseInt(f[i], 10, 64)
	}
	// user nice system idle iowait irq softirq steal (guest time is in user)
	var all int64
	for _, t := range ticks[:8] {
		all += t
	}
	idle := ticks[3] + ticks[4]
	const tick = 10 * time.Millisecond // USER_HZ is 100 on Linux
	return time.Duration(all-idle) * tick, time.Duration(all) * tick, true
}
