package redistest

import (
	"github.com/alicebob/miniredis/v2"

	"github.com/padlockgo/padlock/internal/miniclock"
)

// miniServer is the fallback: a miniredis whose clock follows real time.
// Without that, keys never expire and a lease would never end.
type miniServer struct {
	m     *miniredis.Miniredis
	clock *miniclock.Clock
}

// startMini starts a miniredis on addr ("127.0.0.1:0" for any port) and the
// goroutine that drives its clock; close stops both.
func startMini(addr string) (*miniServer, error) {
	m := miniredis.NewMiniRedis()
	if err := m.StartAddr(addr); err != nil {
		return nil, err
	}
	return &miniServer{m: m, clock: miniclock.Start(m)}, nil
}

// close stops the clock, waits for its goroutine, and closes the server.
// It must be called exactly once.
func (ms *miniServer) close() {
	ms.clock.Stop()
	ms.m.Close()
}
