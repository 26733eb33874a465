package padlock

import (
	"context"
	"time"
)

// holdAcquisition is one call that takes a hold (a semaphore permit, a
// read or a write hold): the mutex's acquisition, whose bookkeeping of
// attempts, failures and sleeps it shares, with the hold's own attempt
// and its own way of waiting.
//
// A waiting hold does not poll. After a busy attempt it joins its
// Locker's line for the hold's channel and sleeps until a notice wakes
// it (wakePolicy), re-checking at the earliest lease end the busy reply
// named and at least every recheck, or on o.Retry's schedule while
// notices cannot be received, as a mutex's waiter does. Unlike the
// mutex's, several of a Locker's waiters may go in at once: a semaphore
// with free permits, readers after a writer.
type holdAcquisition struct {
	acquisition
	channel string     // where the hold's notices go
	policy  wakePolicy // whom a notice wakes
	sem     *Semaphore // the semaphore a permit is of, for SetPermits
	// queues: attempts ask Redis to keep the caller queued (a fair permit,
	// a writer) for queueFor, at most refresh (0: the whole wait).
	queues  bool
	refresh time.Duration
	// named is the waiter's place in the queue, which notices name to
	// wake it: fixed for a waiter that queues in Redis, apart from its
	// grant tokens; "" for one that never is named.
	named   string
	attempt func(ctx context.Context, h *holdAcquisition, queueFor time.Duration) (grant, error)
}

// place returns the name the waiter queues under: its place, or for a
// waiter that never queues its token.
func (h *holdAcquisition) place() string {
	if h.named == "" {
		return h.id.token
	}
	return h.named
}

// run takes the hold, waiting up to o.Wait.
func (h *holdAcquisition) run(ctx context.Context) (*Lock, error) {
	if h.deadline.IsZero() {
		return h.try(ctx)
	}
	n := h.l.notifier
	_, h.liveAtTry = n.state(h.channel)
	lk, err := h.try(ctx)
	if lk == nil && err == nil {
		h.w = n.enter(ctx, h.channel, &waiter{h: h, wake: make(chan struct{}, 1)}, h.policy)
		lk, err = h.waitInLine(ctx)
		n.leave(h.channel, h.w, lk != nil)
	}
	if lk == nil && h.queues && h.tries > 0 {
		h.l.leaveQueue(ctx, h.id, h.place()) // any attempt may have queued it
	}
	return lk, err
}

// try makes one attempt, as acquisition.try does for a mutex.
func (h *holdAcquisition) try(ctx context.Context) (*Lock, error) {
	h.tries++
	h.begin() // every attempt is a grant of its own
	if !h.id.claim() {
		return nil, errTokenReused
	}
	var queueFor time.Duration
	if h.queues && !h.deadline.IsZero() {
		queueFor = max(time.Until(h.deadline), time.Millisecond)
		if h.refresh > 0 {
			queueFor = min(queueFor, h.refresh)
		}
	}
	sent := time.Now()
	g, err := h.attempt(ctx, h, queueFor)
	replied := time.Now()
	if err == nil && g.first > 0 && !replied.Before(sent.Add(h.o.TTL-h.l.cfg.margin(h.o.TTL))) {
		err = errLateGrant
	}
	switch {
	case err == nil && g.first > 0:
		lk := newLock(h.l, h.key, h.id, g.first, h.o, sent, replied)
		lk.fenceEnd = g.first // never handed on
		if !h.l.watchdog.add(lk.lease) {
			h.l.cleanup(ctx, h.id)
			return nil, ErrClosed
		}
		return lk, nil
	case err == nil:
		h.answered++
		h.lastErr, h.holderTTL, h.seenAt, h.holder = nil, g.holderTTL, time.Now(), g.holder
		h.failed = 0
	default:
		h.lastErr = err
		if unanswered(err) {
			if h.failed == 0 {
				h.failedAt = sent
			}
			h.failed++
		}
		if maybeSent(err) {
			// It may have taken the hold before its reply was lost: give
			// it back, and go on as a stranger to anything late.
			h.l.cleanup(ctx, h.id)
		}
	}
	return nil, h.next(ctx)
}

// waitInLine waits for a turn and tries again, until the hold is taken
// or the wait ends.
func (h *holdAcquisition) waitInLine(ctx context.Context) (*Lock, error) {
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		if err := h.waitTurn(ctx, timer); err != nil {
			return nil, err
		}
		h.liveAtTry, _ = h.l.notifier.live(h.w)
		if lk, err := h.try(ctx); lk != nil || err != nil {
			return lk, err
		}
	}
}

// waitTurn sleeps until a notice, a re-check or the retry schedule says
// to try again (it returns nil), or the wait ends (the error).
func (h *holdAcquisition) waitTurn(ctx context.Context, timer *time.Timer) error {
	n, w := h.l.notifier, h.w
	for {
		if ctx.Err() != nil || !time.Now().Before(h.deadline) {
			return h.failure(ctx)
		}
		live, pending := n.live(w)
		if live && !h.liveAtTry {
			// Notices began to arrive after the last attempt went out: a
			// release in between went unheard.
			return nil
		}
		sleep, open := n.parkHold(w)
		switch {
		case !open:
			return ErrClosed
		case !sleep:
			return nil // a notice came while the attempt was on its way
		}
		d := h.sleep(true, live)
		if h.refresh > 0 {
			d = min(d, h.refresh/2) // keep the place in the queue
		}
		timer.Reset(d)
		subscribed := false
		select {
		case <-w.wake:
		case <-pending:
			subscribed = true
		case <-timer.C:
		case <-ctx.Done():
		}
		n.unparkHold(w)
		switch {
		case n.isClosed():
			return ErrClosed
		case ctx.Err() != nil || !time.Now().Before(h.deadline):
			return h.failure(ctx)
		case !subscribed:
			return nil
		}
	}
}

// reentrantHold returns a new handle on the hold of one of kinds that ctx
// carries for key through l, or nil when it carries none that is still
// held.
func (l *Locker) reentrantHold(ctx context.Context, key string, kinds ...holdKind) *Lock {
	for g, _ := ctx.Value(ctxKey{}).(*guardedCtx); g != nil; g = g.next {
		r := g.lock.root()
		if r.locker != l || r.key != key || r.Err() != nil {
			continue
		}
		for _, k := range kinds {
			if r.id.kind == k {
				return &Lock{outer: r}
			}
		}
	}
	return nil
}
