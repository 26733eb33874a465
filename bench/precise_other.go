//go:build !linux

package main

import "time"

// preciseThread has nothing to set off Linux.
func preciseThread() {}

// preciseSleep is time.Sleep off Linux: the delays are as precise as the
// runtime's timers, which the network rows' PING check shows.
func preciseSleep(d time.Duration) { time.Sleep(d) }
