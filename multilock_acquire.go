package padlock

import (
	"context"
	"slices"
	"time"

	"github.com/padlockgo/padlock/internal/hashslot"
)

// The attempts and the wait of AcquireAll (multilock.go has the set it
// returns and how its keys are taken).

// multiAcquisition is one call of AcquireAll and what its attempts have
// seen.
type multiAcquisition struct {
	l      *Locker
	o      Options
	keys   []string
	ids    []*lockID // ids[i] names keys[i]'s lock
	groups [][]int   // indexes into keys, per hash slot, in slot order
	slots  slotStore // nil: take the keys one by one through l.store
	began  time.Time
	pacing     // what the attempts have seen; deadline, zero for a single attempt
	busy   int // the index of the key found busy last, -1 if none

	// The Locker's line for the key found busy, while waiting for it.
	w         *waiter
	channel   string
	liveAtTry bool

	// held is the lock on keys[heldAt] that waiting for it as a single-key
	// Acquire took (waitFor), which the next attempt's set takes over.
	held   *Lock
	heldAt int
}

// slotStore takes and releases the locks of one hash slot's keys with one
// script each; single is one.
type slotStore interface {
	// held is the token of a lock the caller holds on one of ids' keys,
	// which the set takes over, or "".
	acquireSlot(ctx context.Context, ids []*lockID, lockerID any, waiting bool, held string) (slotGrant, error)
	// bury: the rollback of a waiting attempt whose reply was lost, whose
	// token it buries (lua/claim.lua).
	releaseSlot(ctx context.Context, ids []*lockID, notify []bool, bury bool) (held []bool, err error)
}

// slotGrant is what an attempt at one slot's keys got: a fence per key, or
// the index of the busy key and its holder's remaining lease.
type slotGrant struct {
	fences    []int64
	busy      int
	holderTTL time.Duration
}

// mint gives every key of the set the identity of a new attempt, one
// token for the whole set (see mintID).
func (a *multiAcquisition) mint() {
	token := newToken()
	a.ids = make([]*lockID, len(a.keys))
	for i, k := range a.keys {
		a.ids[i] = newLockID(a.l.keys, k, token, a.o)
	}
}

// group splits the keys into the groups taken by one call each: per hash
// slot in slot order (one group off Cluster) when the store takes a slot
// at a time, else one key per group in sorted order.
func (a *multiAcquisition) group() {
	a.slots, _ = a.l.store.(slotStore)
	if a.slots == nil {
		for i := range a.keys {
			a.groups = append(a.groups, []int{i})
		}
		return
	}
	if !a.l.keys.slotted {
		all := make([]int, len(a.keys))
		for i := range all {
			all[i] = i
		}
		a.groups = [][]int{all}
		return
	}
	bySlot := map[int][]int{}
	var order []int
	for i, id := range a.ids {
		s := hashslot.Slot(id.lockKey())
		if bySlot[s] == nil {
			order = append(order, s)
		}
		bySlot[s] = append(bySlot[s], i)
	}
	slices.Sort(order)
	for _, s := range order {
		a.groups = append(a.groups, bySlot[s])
	}
}

func (a *multiAcquisition) idsOf(g []int) []*lockID {
	ids := make([]*lockID, len(g))
	for j, i := range g {
		ids[j] = a.ids[i]
	}
	return ids
}

// run is AcquireAll's loop: try the whole set; while a key is busy, wait
// for it (waitTurn) and try again.
func (a *multiAcquisition) run(ctx context.Context) (*MultiLock, error) {
	n := a.l.notifier
	defer func() {
		if a.w != nil {
			a.leave(ctx)
		}
	}()
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		if a.w != nil {
			a.liveAtTry, _ = n.live(a.w)
		}
		if m, err := a.try(ctx); m != nil || err != nil {
			return m, err
		}
		if a.waitsAsOne() {
			if err := a.waitFor(ctx, a.busy); err != nil {
				return nil, err
			}
			continue
		}
		a.line(ctx)
		if err := a.waitTurn(ctx, timer); err != nil {
			return nil, err
		}
	}
}

// Where releases grant a key to the bids of waiting Acquires (wait_bid.go),
// a key they pass among themselves is never free, so an AcquireAll that
// waited for it to be free would never be served. It waits for a busy key
// as a single-key Acquire does instead, in its Locker's line, bidding and
// taking its turn among the other Lockers, and then tries the whole set
// at once, the set taking over the lock it waited for (multi_acquire.lua):
// so it is served within the turn bound of a single-key waiter, when the
// other keys of the set are free then. If one is busy, it gives the key
// it waited for back at once (its release grants it on, or hands it on in
// its Locker, as any release does) and waits for that one: it never holds
// keys while it waits for others.

// waitsAsOne reports whether a, whose last attempt found a key busy,
// waits for it as a single-key Acquire does (see above).
func (a *multiAcquisition) waitsAsOne() bool {
	return a.busy >= 0 && a.slots != nil && a.l.bids && !a.deadline.IsZero()
}

// waitFor waits, until a's deadline, for keys[i] as a waiting single-key
// Acquire does, and keeps the lock it takes for a's next attempt. It
// returns the error that ends a's wait.
func (a *multiAcquisition) waitFor(ctx context.Context, i int) error {
	wait := time.Until(a.deadline)
	if wait <= 0 {
		return a.failure(ctx)
	}
	o := a.o
	o.Wait = wait
	lk, err := a.l.acquire(ctx, a.keys[i], o, time.Now(), nil)
	if err != nil {
		return err
	}
	a.held, a.heldAt = lk, i
	return nil
}

// handOver retires the lock a waited for, which the set took over in
// Redis: it is no longer renewed nor released on its own.
func (a *multiAcquisition) handOver() {
	if a.held == nil {
		return
	}
	a.l.watchdog.remove(a.held.lease)
	a.held.finish(ErrReleased)
	a.held = nil
}

// giveBack releases the lock a waited for, when the set's attempt did not
// take it over.
func (a *multiAcquisition) giveBack(ctx context.Context) {
	if a.held == nil {
		return
	}
	rctx, cancel := cleanupContext(ctx)
	defer cancel()
	_ = a.held.Release(rctx)
	a.held = nil
}

// try makes one attempt at the whole set. It returns the MultiLock when
// every key was taken, an error when AcquireAll must end without it, and
// neither when it may wait and try again. An attempt that stops part way
// gives back the keys it took.
func (a *multiAcquisition) try(ctx context.Context) (*MultiLock, error) {
	a.tries++
	if slices.ContainsFunc(a.ids, (*lockID).wasClaimed) {
		// Every attempt at the set is a grant of its own: whatever an
		// earlier one still has on its way (a call delayed, a rollback run
		// late) names a token nobody holds.
		a.mint()
	}
	waiting := !a.deadline.IsZero()
	fences := make([]int64, len(a.keys))
	sent := make([]time.Time, len(a.groups))
	answered := make([]time.Time, len(a.groups))
	for gi, g := range a.groups {
		sent[gi] = time.Now()
		sg, err := a.acquireGroup(ctx, g, waiting)
		answered[gi] = time.Now()
		// The set is held until the earliest trust of its keys, the first
		// group's: a reply after it is late for the whole set, though
		// within its own call's lease (as in acquisition.try).
		if err == nil && sg.fences != nil && !answered[gi].Before(sent[0].Add(a.o.TTL-a.l.cfg.margin(a.o.TTL))) {
			err = errLateGrant
		}
		if err == nil && sg.fences != nil && slices.Contains(g, a.heldAt) {
			a.handOver() // the set holds it now, under its own token
		}
		switch {
		case err != nil:
			a.rollback(ctx, a.groups[:gi])
			if err == errLateGrant || maybeSent(err) {
				// The failed call may have taken its keys; a copy of
				// it may come later still, which a waiting attempt's
				// rollback buries.
				a.rollbackLost(ctx, a.groups[gi], waiting && a.slots != nil)
			}
			a.giveBack(ctx)
			a.lastErr = err
			if unanswered(err) {
				if a.failed == 0 {
					a.failedAt = sent[gi]
				}
				a.failed++
			}
			return nil, a.next(ctx)
		case sg.fences == nil:
			a.rollback(ctx, a.groups[:gi])
			a.giveBack(ctx)
			a.answered++
			a.busy, a.holderTTL, a.seenAt = g[sg.busy], sg.holderTTL, time.Now()
			a.lastErr, a.failed = nil, 0
			return nil, a.next(ctx)
		}
		for j, i := range g {
			fences[i] = sg.fences[j]
		}
	}
	return a.hold(ctx, fences, sent, answered)
}

// hold makes the MultiLock of a successful attempt and has the watchdog
// keep every key's lease.
func (a *multiAcquisition) hold(ctx context.Context, fences []int64, sent, answered []time.Time) (*MultiLock, error) {
	l := a.l
	shared, cancel := context.WithCancelCause(context.Background())
	m := &MultiLock{locker: l, keys: a.keys, members: make([]*Lock, len(a.keys)), groups: a.groups, fallback: a.slots == nil, ctx: shared, cancel: cancel}
	for gi, g := range a.groups {
		for _, i := range g {
			lk := newLock(l, a.keys[i], a.ids[i], fences[i], a.o, sent[gi], answered[gi])
			// One context for the set: whichever key ends first, released
			// or lost, cancels it, with no goroutine to watch the keys.
			lk.ctx, lk.cancel = shared, cancel
			m.members[i] = lk
		}
	}
	for i, lk := range m.members {
		if !l.watchdog.add(lk.lease) {
			for _, added := range m.members[:i] {
				l.watchdog.remove(added.lease)
			}
			a.rollback(ctx, a.groups)
			cancel(ErrLockLost)
			return nil, ErrClosed
		}
	}
	return m, nil
}

// acquireGroup makes one call for the keys at g.
func (a *multiAcquisition) acquireGroup(ctx context.Context, g []int, waiting bool) (slotGrant, error) {
	if a.slots != nil {
		held := ""
		if a.held != nil && slices.Contains(g, a.heldAt) {
			held = a.held.id.token
		}
		return a.slots.acquireSlot(ctx, a.idsOf(g), a.l.idArg, waiting, held)
	}
	gr, err := a.l.store.acquire(ctx, a.ids[g[0]], nil)
	if err != nil || gr.first == 0 {
		return slotGrant{holderTTL: gr.holderTTL}, err
	}
	return slotGrant{fences: []int64{gr.first}}, nil
}

// rollback gives back the keys of groups: whatever of them this
// attempt's token holds.
func (a *multiAcquisition) rollback(ctx context.Context, groups [][]int) {
	if len(groups) == 0 {
		return
	}
	ctx, cancel := cleanupContext(ctx)
	defer cancel()
	for _, g := range groups {
		a.releaseAnswered(ctx, g, false)
	}
}

// rollbackLost gives back the keys of g, whose call failed after it may
// have reached Redis, and with bury buries the attempt there.
func (a *multiAcquisition) rollbackLost(ctx context.Context, g []int, bury bool) {
	ctx, cancel := cleanupContext(ctx)
	defer cancel()
	a.releaseAnswered(ctx, g, bury)
}

// releaseAnswered releases the keys of g under this attempt's tokens (and
// with bury buries them) until Redis answers (untilAnswered). A rollback
// whose reply was lost, or that never left, may not have run: the set's
// token would then hold the keys, for nobody,
// for the rest of the lease (the caller has moved on, to a new token or
// an error). Sent again it is harmless: it releases only this token.
//
// The first send is the caller's; those after it go behind the caller
// (notifier.goBehind), which returns at its deadline, each with a
// clean-up's bound of its own; a closed Locker sends once.
func (a *multiAcquisition) releaseAnswered(ctx context.Context, g []int, bury bool) {
	ids, slots := a.idsOf(g), a.slots
	send := func(ctx context.Context) error {
		_, err := a.l.releaseGroup(ctx, slots, ids, bury)
		return err
	}
	if answered(ctx, send(ctx)) {
		return
	}
	a.l.notifier.goBehind(func() {
		ctx, cancel := cleanupContext(ctx)
		defer cancel()
		untilAnswered(ctx, func() error { return send(ctx) })
	})
}

// releaseGroup releases the locks of ids, one slot's keys with one call
// (or one key, through the Locker's store), and reports which were held.
// A notice goes out for every key that a waiter marked or that a waiter
// of this Locker waits for.
func (l *Locker) releaseGroup(ctx context.Context, slots slotStore, ids []*lockID, bury bool) ([]bool, error) {
	notify := make([]bool, len(ids))
	for i, id := range ids {
		notify[i], _ = l.notifier.state(id.lockKey())
	}
	if slots != nil {
		return slots.releaseSlot(ctx, ids, notify, bury)
	}
	ok, err := l.store.release(ctx, ids[0], giveBack{notify: notify[0]})
	return []bool{ok}, err
}

// next is acquisition.next for AcquireAll.
func (a *multiAcquisition) next(ctx context.Context) error {
	if !a.mayRetry(ctx, a.o.Retry) {
		return a.failure(ctx)
	}
	return nil
}

// failure is the error of an AcquireAll that did not get the keys: it
// names the key found busy last.
func (a *multiAcquisition) failure(ctx context.Context) error {
	key := a.keys[0]
	if a.busy >= 0 {
		key = a.keys[a.busy]
	}
	return a.notAcquired(ctx, key)
}

// leave takes the acquisition out of its line, and withdraws the bids
// that waiters passed to it when nobody is left to claim them
// (notifier.leave).
func (a *multiAcquisition) leave(ctx context.Context) {
	if orphans := a.l.notifier.leave(a.channel, a.w, false); len(orphans) > 0 {
		a.l.withdraw(ctx, orphans)
	}
}

// line puts the acquisition in the Locker's line for the key found busy,
// so that its release notice wakes it, leaving the line of a key found
// busy before.
func (a *multiAcquisition) line(ctx context.Context) {
	if a.busy < 0 {
		return
	}
	n := a.l.notifier
	channel := a.ids[a.busy].lockKey()
	if a.w != nil && a.channel == channel {
		return
	}
	if a.w != nil {
		a.leave(ctx)
	}
	// The notifier wakes waiters through what it knows of their Acquire;
	// a MultiLock waiter never parks, so no lock is handed to it, and no
	// release bids for it.
	stub := &acquisition{l: a.l, key: a.keys[a.busy], o: a.o, id: a.ids[a.busy], began: a.began}
	a.w, a.channel = n.join(ctx, channel, stub, false), channel
	a.liveAtTry = false
}

// waitTurn sleeps until the next attempt is due: a release notice for the
// key found busy, its holder's lease end, the retry strategy's backoff
// when notices are not known to arrive, at least every noticeRecheck
// when they are. It returns the error that ends the wait.
func (a *multiAcquisition) waitTurn(ctx context.Context, timer *time.Timer) error {
	n := a.l.notifier
	for {
		switch {
		case n.isClosed():
			return ErrClosed
		case ctx.Err() != nil || !time.Now().Before(a.deadline):
			return a.failure(ctx)
		}
		var (
			live    bool
			pending <-chan struct{}
			wake    chan struct{}
		)
		// Close wakes the acquisition even outside every line (after
		// attempts that got no answer, it waits out o.Retry's backoff).
		closed := n.done
		if a.w != nil {
			live, pending = n.live(a.w)
			wake = a.w.wake
			if live && !a.liveAtTry {
				// The last attempt went out before notices arrived: a
				// release in between would go unnoticed.
				return nil
			}
		}
		// Only the direct path marks the busy key for a notice.
		live = live && a.slots != nil && a.busy >= 0
		d := time.Until(a.deadline)
		if a.holderTTL > 0 {
			d = min(d, max(a.holderTTL-time.Since(a.seenAt), time.Millisecond))
		}
		if live {
			d = min(d, a.l.recheck)
		} else {
			d = min(d, max(time.Until(a.retryAt), 0))
		}
		timer.Reset(d)
		select {
		case <-wake:
		case <-closed:
		case <-timer.C:
		case <-ctx.Done():
		case <-pending:
			continue
		}
		switch {
		case n.isClosed():
			return ErrClosed
		case ctx.Err() != nil || !time.Now().Before(a.deadline):
			return a.failure(ctx)
		}
		return nil
	}
}
