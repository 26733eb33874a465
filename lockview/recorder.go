package lockview

import (
	"sync"
	"time"

	"github.com/padlockgo/padlock"
)

// recentLosses is how many lost locks a Recorder keeps.
const recentLosses = 50

// Recorder is a padlock.Observer that keeps what the page shows beyond
// what a Locker and Redis can tell: the last locks lost, and the lag of
// renewals. Pass it to padlock.WithObserver (with padlock.JoinObservers
// beside other observers) and to Config.Recorder. Its memory is bounded.
type Recorder struct {
	padlock.NopObserver

	mu       sync.Mutex
	losses   []Loss // ring, newest at next-1
	next     int
	lagLast  time.Duration
	lagMax   time.Duration
	renewed  int
	failures int
}

// Loss is a lost lock as a Recorder keeps it.
type Loss struct {
	At    time.Time
	Key   string
	Cause string
	Held  time.Duration
}

// NewRecorder returns an empty Recorder.
func NewRecorder() *Recorder { return &Recorder{} }

// LockLost keeps the loss.
func (r *Recorder) LockLost(e padlock.LockLostEvent) {
	r.mu.Lock()
	defer r.mu.Unlock()
	l := Loss{At: time.Now(), Key: e.Key, Cause: e.Cause.String(), Held: e.Held}
	if len(r.losses) < recentLosses {
		r.losses = append(r.losses, l)
	} else {
		r.losses[r.next] = l
	}
	r.next = (r.next + 1) % recentLosses
}

// LeaseRenewed keeps the renewal's lag, or counts its failure.
func (r *Recorder) LeaseRenewed(e padlock.LeaseRenewedEvent) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !e.OK {
		r.failures++
		return
	}
	lag := max(e.Lag, 0)
	r.renewed++
	r.lagLast = lag
	r.lagMax = max(r.lagMax, lag)
}

// stats is a Recorder's state, newest loss first.
type stats struct {
	losses            []Loss
	lagLast, lagMax   time.Duration
	renewed, failures int
}

func (r *Recorder) stats() stats {
	r.mu.Lock()
	defer r.mu.Unlock()
	s := stats{lagLast: r.lagLast, lagMax: r.lagMax, renewed: r.renewed, failures: r.failures}
	for i := range r.losses {
		j := (r.next - 1 - i + 2*len(r.losses)) % len(r.losses)
		s.losses = append(s.losses, r.losses[j])
	}
	return s
}
