//go:build !linux

package main

import (
	"syscall"
	"time"
)

// procAttr has nothing to add off Linux: servers are stopped at exit, but
// not if the benchmark itself is killed.
func procAttr() *syscall.SysProcAttr { return nil }

// loadAverage is not read on this platform.
func loadAverage() string { return "" }

// machineCPU is not read on this platform.
func machineCPU() (busy, total time.Duration, ok bool) { return 0, 0, false }
