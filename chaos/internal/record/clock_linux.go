package record

import (
	"syscall"
	"unsafe"
)

// clockMonotonic is CLOCK_MONOTONIC: one clock for every process of the
// machine, which no NTP step moves and settimeofday cannot touch.
const clockMonotonic = 1

// Now is the suite's clock: CLOCK_MONOTONIC in nanoseconds, comparable
// across the processes of one machine. (Go's own monotonic reading counts
// from each process's start, so it does not compare across processes.)
func Now() int64 {
	var ts syscall.Timespec
	if _, _, errno := syscall.Syscall(syscall.SYS_CLOCK_GETTIME, clockMonotonic, uintptr(unsafe.Pointer(&ts)), 0); errno != 0 {
		panic("record: clock_gettime(CLOCK_MONOTONIC): " + errno.Error()) // cannot fail on Linux
	}
	return ts.Nano()
}
