// Package miniclock makes a miniredis keep real time.
//
// miniredis expires keys only when told that time has passed
// (FastForward): a key with a 300ms TTL still exists, its PTTL still
// 300ms, half a second later. Whoever runs one for locks (the public test
// package, the test harness's fallback, the example app) must move its
// clock on, or leases never end.
package miniclock

import (
	"time"

	"github.com/alicebob/miniredis/v2"
)

// Tick is how often a Clock moves its miniredis on. Keys expire up to one
// tick late, which no lock with a lease of 100ms or more notices.
const Tick = 10 * time.Millisecond

// Clock moves a miniredis's clock on with real time. Its goroutine runs
// until Stop.
type Clock struct {
	m    *miniredis.Miniredis
	stop chan struct{} // closed by Stop
	done chan struct{} // closed when the goroutine has ended
}

// Start starts moving m's clock on, every Tick, by the time that passed.
// The caller must call Stop. m may be closed and restarted meanwhile: its
// keys are kept, and their leases keep running.
func Start(m *miniredis.Miniredis) *Clock {
	c := &Clock{m: m, stop: make(chan struct{}), done: make(chan struct{})}
	go c.run()
	return c
}

func (c *Clock) run() {
	defer close(c.done)
	tick := time.NewTicker(Tick)
	defer tick.Stop()
	// Advance by the time that really passed (the monotonic clock), not by
	// Tick: ticks are dropped when the machine is busy.
	last := time.Now()
	for {
		select {
		case <-c.stop:
			return
		case <-tick.C:
			now := time.Now()
			c.m.FastForward(now.Sub(last))
			last = now
		}
	}
}

// Stop stops the clock and waits for its goroutine to end. It must be
// called exactly once.
func (c *Clock) Stop() {
	close(c.stop)
	<-c.done
}
