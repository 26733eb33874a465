package redistest

import (
	"time"

	"github.com/alicebob/miniredis/v2"
)

// clockTick is how often the fallback's clock is advanced. Keys expire up
// to one tick late; a lock test with a lease of 100 ms or more won't notice.
const clockTick = 10 * time.Millisecond

// miniServer is the fallback: a miniredis whose clock follows real time.
// miniredis only expires keys when told time has passed (FastForward), so
// without the ticker a lease would never end.
type miniServer struct {
	m    *miniredis.Miniredis
	stop chan struct{} // closed to stop the clock goroutine
	done chan struct{} // closed when it has stopped
}

// startMini starts a miniredis on addr ("127.0.0.1:0" for any port) and the
// goroutine that drives its clock; close stops both.
func startMini(addr string) (*miniServer, error) {
	m := miniredis.NewMiniRedis()
	if err := m.StartAddr(addr); err != nil {
		return nil, err
	}
	ms := &miniServer{m: m, stop: make(chan struct{}), done: make(chan struct{})}
	go ms.driveClock()
	return ms, nil
}

func (ms *miniServer) driveClock() {
	defer close(ms.done)
	tick := time.NewTicker(clockTick)
	defer tick.Stop()
	// Advance by the time that really passed (monotonic clock), not by
	// clockTick: ticks are dropped when the machine is busy.
	last := time.Now()
	for {
		select {
		case <-ms.stop:
			return
		case <-tick.C:
			now := time.Now()
			ms.m.FastForward(now.Sub(last))
			last = now
		}
	}
}

// close stops the clock, waits for its goroutine, and closes the server.
// It must be called exactly once.
func (ms *miniServer) close() {
	close(ms.stop)
	<-ms.done
	ms.m.Close()
}
