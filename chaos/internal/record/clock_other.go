//go:build !linux

package record

import "time"

// Now is the suite's clock. Off Linux it is the wall clock
// (CLOCK_REALTIME), which compares across processes as long as nothing
// steps it during a run.
func Now() int64 { return time.Now().UnixNano() }
