package lockview

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/padlockgo/padlock"
)

// recentLosses is how many lost locks a Recorder keeps, and
// recentRefusals how many refused acquisitions.
const (
	recentLosses   = 50
	recentRefusals = 50
)

// Recorder is a padlock.Observer that keeps what the page shows beyond
// what a Locker and Redis can tell: the last locks lost, the last
// acquisitions refused because the key stayed busy (what the middlewares
// answer 409), the lag of renewals, and per namespace, the locks taken,
// refused, waited for and lost in the last minutes (see ActivityBucket).
// It sees this process's Locker only. Pass it to padlock.WithObserver
// (with padlock.JoinObservers beside other observers) and to
// Config.Recorder. Its memory is bounded.
type Recorder struct {
	padlock.NopObserver

	mu       sync.Mutex
	losses   []loss // ring, newest at next-1
	next     int
	refusals []refusal // ring, newest at nextRefusal-1
	nextRef  int
	lagLast  time.Duration
	lagMax   time.Duration
	renewed  int
	failures int
	activity map[string]*series // by namespace
}

// refusal is an Acquire that found its key busy for its whole wait, as a
// Recorder keeps it: the middlewares answer such a request 409 (or 423,
// 429 for a semaphore).
type refusal struct {
	At  time.Time
	Key string
	// Waited is how long the Acquire took before it gave up: 0 for one
	// attempt, up to Options.Wait.
	Waited time.Duration
	// Holder is who held the key then, as the last attempt saw it
	// (padlock.NotAcquiredError.Holder): the holder's Options.Owner and
	// Caller, "host=web-1 pid=4121 route=POST /orders/<id>/pay
	// caller=#3fa9c1e2d4b5"; for a semaphore, the holder whose permit
	// frees first. "" when the holder named itself in neither.
	Holder string
}

// AcquireEnd counts the acquisition in its namespace's activity, and
// keeps it when it was refused.
func (r *Recorder) AcquireEnd(_ context.Context, e padlock.AcquireEndEvent) {
	now := time.Now()
	r.mu.Lock()
	defer r.mu.Unlock()
	switch {
	case e.Outcome.Held():
		r.add(e.Key, now, func(c *counts) {
			c.acquired++
			if e.Waited {
				c.waited++
			}
		})
	case e.Outcome == padlock.OutcomeBusy:
		r.add(e.Key, now, func(c *counts) {
			c.refused++
			if e.Waited {
				c.waited++
			}
		})
		f := refusal{At: now, Key: e.Key, Waited: e.Wait}
		if na := (*padlock.NotAcquiredError)(nil); errors.As(e.Err, &na) {
			f.Holder = na.Holder
		}
		if len(r.refusals) < recentRefusals {
			r.refusals = append(r.refusals, f)
		} else {
			r.refusals[r.nextRef] = f
		}
		r.nextRef = (r.nextRef + 1) % recentRefusals
	}
}

// loss is a lost lock as a Recorder keeps it.
type loss struct {
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
	l := loss{At: time.Now(), Key: e.Key, Cause: e.Cause.String(), Held: e.Held}
	r.add(e.Key, l.At, func(c *counts) { c.lost++ })
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

// stats is a Recorder's state, newest loss and refusal first.
type stats struct {
	losses            []loss
	refusals          []refusal
	lagLast, lagMax   time.Duration
	renewed, failures int
	activity          []Activity
}

func (r *Recorder) stats(now time.Time) stats {
	r.mu.Lock()
	defer r.mu.Unlock()
	s := stats{lagLast: r.lagLast, lagMax: r.lagMax, renewed: r.renewed, failures: r.failures, activity: r.activityUntil(now)}
	for i := range r.losses {
		j := (r.next - 1 - i + 2*len(r.losses)) % len(r.losses)
		s.losses = append(s.losses, r.losses[j])
	}
	for i := range r.refusals {
		j := (r.nextRef - 1 - i + 2*len(r.refusals)) % len(r.refusals)
		s.refusals = append(s.refusals, r.refusals[j])
	}
	return s
}
