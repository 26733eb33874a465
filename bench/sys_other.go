//go:build !linux

package main

import "syscall"

// procAttr has nothing to add off Linux: servers are stopped at exit, but
// not if the benchmark itself is killed.
func procAttr() *syscall.SysProcAttr { return nil }

// loadAverage is not read on this platform.
func loadAverage() string { return "" }
