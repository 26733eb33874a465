//go:build linux

package main

import (
	"syscall"
	"time"
)

// prSetTimerSlack is prctl's PR_SET_TIMERSLACK.
const prSetTimerSlack = 29

// preciseThread asks the kernel to wake the calling thread on time: a
// thread's sleeps may otherwise be stretched by its timer slack (50 µs by
// default) so that wake-ups can be merged.
func preciseThread() {
	_, _, _ = syscall.RawSyscall(syscall.SYS_PRCTL, prSetTimerSlack, 1, 0)
}

// preciseSleep sleeps d in the kernel (nanosleep), not on the Go runtime's
// timers, which wake at best about a millisecond after a shorter sleep
// began when nothing else is running.
func preciseSleep(d time.Duration) {
	ts := syscall.NsecToTimespec(int64(d))
	for {
		var left syscall.Timespec
		if err := syscall.Nanosleep(&ts, &left); err != syscall.EINTR {
			return
		}
		ts = left
	}
}
