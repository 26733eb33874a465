package padlock

import (
	"context"
	_ "embed"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/padlockgo/padlock/internal/hashslot"
	"github.com/redis/go-redis/v9"
)

// Multi-key locks: all of a set of keys or none.
//
// AcquireAll sorts and dedupes the keys, so every caller takes them in the
// same order whatever order it listed them in, and never holds some keys
// while it waits for others: when a key is busy, it gives back what it took
// in that attempt, waits for that key, and tries the whole set again. No
// cycle of waiters can form, so no deadlock.
//
// The keys of one Redis hash slot (every key, off Cluster) are taken by one
// script (lua/multi_acquire.lua) that checks them all before it sets any,
// so nobody ever sees part of them taken. On Cluster, where a script may
// only touch one slot, the slots are taken one after another in slot
// order, and a busy slot rolls back the ones taken before it. Each key is
// then an ordinary lock with its own lease and fence; the one watchdog
// renews them all, and every key's lock shares one context, so the first
// key lost ends the whole set (lock.go's finish cancels it).
//
// On a store other than one deployment reached directly (Redlock, replica
// acknowledgements) the keys are taken one by one in sorted order with the
// same rollback.

var (
	//go:embed lua/multi_acquire.lua
	multiAcquireLua string
	//go:embed lua/multi_release.lua
	multiReleaseLua string

	multiPlain   = newMultiScripts(false)
	multiSharded = newMultiScripts(true)
)

type multiScripts struct{ acquire, release *script }

// newMultiScripts returns the scripts in the flavour of the deployment,
// as newPublishingScripts does: SPUBLISH on Cluster.
func newMultiScripts(sharded bool) *multiScripts {
	flavour := func(src string) *script {
		if sharded {
			src = strings.ReplaceAll(src, "redis.pcall('publish'", "redis.pcall('spublish'")
		}
		return newScript(grantLua + src)
	}
	return &multiScripts{acquire: flavour(multiAcquireLua), release: flavour(multiReleaseLua)}
}

// MultiLock holds every key of a set (see Locker.AcquireAll). Its owner
// must call Release when done; until then every key's lease is renewed in
// the background unless Options.NoRenew was set. Methods are safe for
// concurrent use.
type MultiLock struct {
	locker   *Locker
	keys     []string        // sorted, unique
	members  []*Lock         // members[i] holds keys[i]
	groups   [][]int         // indexes into keys, in the order they were taken
	fallback bool            // taken key by key (not one script per slot)
	ctx      context.Context // shared by every key's Lock
	cancel   context.CancelCauseFunc
	released atomic.Bool
}

// AcquireAll takes the locks on every one of keys, or on none of them,
// waiting up to o.Wait for holders to let go. Duplicates are ignored, and
// the order of keys does not matter: AcquireAll takes them in one fixed
// order and never holds some while it waits for others, so callers that
// list the same keys in different orders cannot deadlock. Each key gets
// its own fence (MultiLock.Fence).
//
// The keys that share a Redis hash slot (on a single node or Sentinel
// deployment: all of them) are taken by one script, atomically. On
// Cluster the slots are taken one after another in slot order; when a
// slot's keys are busy, the slots taken before it are released again
// before AcquireAll waits, so a failed attempt leaves no key behind.
// (A lock's hash tag is its whole key, so on Cluster distinct keys share a
// slot only by chance: count one round trip per key there.)
//
// Errors are Acquire's: a *NotAcquiredError (matching ErrNotAcquired)
// naming the key that stayed busy, ErrUnavailable, ErrInvalid for an empty
// set, an empty key or Options.Fair (AcquireAll has no fair mode; a Fair
// default from WithDefaults is ignored), ErrClosed. Waiting is Acquire's
// too: a waiting AcquireAll sleeps until a release notice for the key that
// was busy arrives, or that holder's lease ends (re-checking at least
// every second), and o.Retry paces the attempts and may end the wait.
//
// A MultiLock is not reentrant: when ctx carries a lock of this Locker on
// one of the keys (see Lock.Context), AcquireAll returns an ErrInvalid
// error at once rather than wait for itself. The context from
// MultiLock.Context, though, makes Acquire of any one of its keys
// reentrant.
func (l *Locker) AcquireAll(ctx context.Context, keys []string, o Options) (*MultiLock, error) {
	began := time.Now()
	if len(keys) == 0 {
		return nil, invalid("keys", "must not be empty")
	}
	if slices.Contains(keys, "") {
		return nil, invalid("keys", "must not contain an empty key")
	}
	if err := o.Validate(); err != nil {
		return nil, err
	}
	if o.Fair {
		return nil, invalid("Options.Fair", "AcquireAll has no fair mode")
	}
	for _, k := range keys {
		if l.holds(ctx, k) {
			return nil, invalid("keys", "the context already holds %q through this Locker, and AcquireAll is not reentrant", k)
		}
	}
	if l.watchdog.isClosed() {
		return nil, ErrClosed
	}
	o = o.withDefaults(l.defaults)
	o.Fair = false
	if err := l.cfg.checkLease("Options.TTL", o.TTL); err != nil {
		return nil, err
	}
	a := &multiAcquisition{l: l, o: o, began: began, busy: -1}
	a.keys = slices.Clone(keys)
	slices.Sort(a.keys)
	a.keys = slices.Compact(a.keys)
	a.mint()
	a.group()
	if o.Wait > 0 {
		a.deadline = began.Add(o.Wait)
	}
	return a.run(ctx)
}

// holds reports whether ctx carries a held lock on key from l.
func (l *Locker) holds(ctx context.Context, key string) bool {
	g, _ := ctx.Value(ctxKey{}).(*guardedCtx)
	for ; g != nil; g = g.next {
		if r := g.lock.root(); r.locker == l && r.key == key && r.Err() == nil {
			return true
		}
	}
	return false
}

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
	releaseSlot(ctx context.Context, ids []*lockID, notify []bool) (held []bool, err error)
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
			n.leave(a.channel, a.w, false)
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
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
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
			undo := gi
			if err == errLateGrant || maybeSent(err) {
				undo = gi + 1 // the failed call may have taken its keys
			}
			a.rollback(ctx, a.groups[:undo])
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

// rollback gives back the keys of groups, best-effort: whatever of them
// this attempt's token holds.
func (a *multiAcquisition) rollback(ctx context.Context, groups [][]int) {
	if len(groups) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
	defer cancel()
	for _, g := range groups {
		_, _ = a.l.releaseGroup(ctx, a.slots, a.idsOf(g))
	}
}

// releaseGroup releases the locks of ids, one slot's keys with one call
// (or one key, through the Locker's store), and reports which were held.
// A notice goes out for every key that a waiter marked or that a waiter
// of this Locker waits for.
func (l *Locker) releaseGroup(ctx context.Context, slots slotStore, ids []*lockID) ([]bool, error) {
	notify := make([]bool, len(ids))
	for i, id := range ids {
		notify[i], _ = l.notifier.state(id.lockKey())
	}
	if slots != nil {
		return slots.releaseSlot(ctx, ids, notify)
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
		n.leave(a.channel, a.w, false)
	}
	// The notifier wakes waiters through what it knows of their Acquire;
	// a MultiLock waiter never parks, so no lock is handed to it.
	stub := &acquisition{l: a.l, key: a.keys[a.busy], o: a.o, id: a.ids[a.busy], began: a.began}
	a.w, a.channel = n.join(ctx, channel, stub), channel
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

// Keys returns the keys the MultiLock holds, sorted, without duplicates.
func (m *MultiLock) Keys() []string { return slices.Clone(m.keys) }

// Fences returns the fence of each key, in the order of Keys: each is
// strictly greater than the fence of every earlier holder of that key on
// the same Redis deployment (see Lock.Fence). Keys taken together get
// distinct fences. On a Redlock Locker they are 0.
func (m *MultiLock) Fences() []int64 {
	f := make([]int64, len(m.members))
	for i, lk := range m.members {
		f[i] = lk.Fence()
	}
	return f
}

// Fence returns the fence of key, or 0 when the MultiLock does not hold
// key.
func (m *MultiLock) Fence(key string) int64 {
	if i, ok := slices.BinarySearch(m.keys, key); ok {
		return m.members[i].Fence()
	}
	return 0
}

// Done returns a channel that is closed when the set is released, or
// as soon as any one of its keys is lost; Err then says which.
func (m *MultiLock) Done() <-chan struct{} { return m.ctx.Done() }

// Err returns nil while every key is held, ErrLockLost once any one of
// them was lost (even before Done closes, as Lock.Err), and ErrReleased
// after Release.
func (m *MultiLock) Err() error {
	for _, lk := range m.members {
		_ = lk.Err() // ends the set if that key's trusted lease ran out
	}
	if m.ctx.Err() == nil {
		return nil
	}
	return context.Cause(m.ctx)
}

// Context returns a copy of parent that is cancelled as soon as the set is
// released or any of its keys is lost (context.Cause says which). It
// carries a lock on each key: Acquire of one of them through the same
// Locker with this context returns a reentrant handle at once.
func (m *MultiLock) Context(parent context.Context) context.Context {
	ctx := parent
	for _, lk := range m.members {
		ctx = lk.Context(ctx)
	}
	return ctx
}

// ValidUntil returns the moment until which every key is surely held (the
// earliest of their Lock.ValidUntil), or zero once any was lost or the set
// released.
func (m *MultiLock) ValidUntil() time.Time {
	var v time.Time
	for _, lk := range m.members {
		u := lk.ValidUntil()
		if u.IsZero() {
			return time.Time{}
		}
		if v.IsZero() || u.Before(v) {
			v = u
		}
	}
	return v
}

// Extend resets every key's lease to ttl from now and makes ttl the lease
// later renewals keep, one round trip per key. It returns ErrNotHeld when
// any key was lost (the set is then lost: release it), and an
// ErrUnavailable error when Redis did not answer, as Lock.Extend.
func (m *MultiLock) Extend(ctx context.Context, ttl time.Duration) error {
	if ttl < time.Millisecond {
		return invalid("ttl", "must be at least 1ms, got %v", ttl)
	}
	if m.Err() != nil {
		return ErrNotHeld
	}
	if err := m.locker.cfg.checkLease("ttl", ttl); err != nil {
		return err
	}
	for _, lk := range m.members {
		if err := m.locker.resetLease(ctx, lk, ttl, true); err != nil {
			return err
		}
	}
	return nil
}

// Release lets every key go, one round trip per hash slot (one in all off
// Cluster). It returns ErrNotHeld when some key was no longer held (the
// others are released all the same), and an ErrUnavailable error when
// Redis could not be reached; either way no key is renewed any more.
// Release is safe on a nil MultiLock and when called twice (later calls
// return nil). Release the set even after Done closed: the keys not lost
// stay locked until then.
func (m *MultiLock) Release(ctx context.Context) error {
	if m == nil || m.released.Swap(true) {
		return nil
	}
	l := m.locker
	for _, lk := range m.members {
		l.watchdog.remove(lk.lease)
	}
	var slots slotStore
	if !m.fallback {
		slots, _ = l.store.(slotStore)
	}
	var failed error
	lost := false
	for _, g := range m.groups {
		ids := make([]*lockID, len(g))
		for j, i := range g {
			ids[j] = m.members[i].id
		}
		held, err := l.releaseGroup(ctx, slots, ids)
		if err != nil {
			if failed == nil {
				failed = unavailable("release", err)
			}
			continue
		}
		for j, i := range g {
			if !held[j] {
				m.members[i].finish(ErrLockLost)
				lost = true
			}
		}
	}
	for _, lk := range m.members {
		lk.finish(ErrReleased) // no-op for a key already lost
	}
	m.cancel(ErrReleased) // no-op: a key's finish cancelled it
	switch {
	case failed != nil:
		return failed
	case lost:
		return ErrNotHeld
	}
	return nil
}

// String names the MultiLock's keys, for logs.
func (m *MultiLock) String() string {
	return fmt.Sprintf("padlock.MultiLock(%q)", m.keys)
}

func (s single) multiScripts() *multiScripts {
	if s.scripts == shardedScripts {
		return multiSharded
	}
	return multiPlain
}

// acquireSlot runs multi_acquire.lua on ids, whose keys share one slot.
func (s single) acquireSlot(ctx context.Context, ids []*lockID, lockerID any, waiting bool, held string) (slotGrant, error) {
	keys, args, err := slotAttempt(ids, lockerID, waiting, held)
	if err != nil {
		return slotGrant{}, err
	}
	return slotGrantOf(ids, s.multiScripts().acquire.run(ctx, s.client, s.retries, keys, args...))
}

// slotAttempt returns the keys and arguments of multi_acquire.lua for
// ids, claiming each (see mintID), with held the token of a lock the set
// takes over, if not "".
func slotAttempt(ids []*lockID, lockerID any, waiting bool, held string) ([]string, []any, error) {
	keys := make([]string, len(ids)+1)
	for i, id := range ids {
		if !id.claim() {
			return nil, nil, errTokenReused
		}
		keys[i] = id.lockKey()
	}
	keys[len(ids)] = ids[0].keys[1] // the slot's fence counter
	mark := "0"
	if waiting {
		mark = "1"
	}
	args := []any{ids[0].token, ids[0].argv[1], lockerID, mark}
	if held != "" {
		args = append(args, held)
	}
	return keys, args, nil
}

// slotGrantOf reads multi_acquire.lua's reply for ids.
func slotGrantOf(ids []*lockID, cmd *redis.Cmd) (slotGrant, error) {
	reply, err := cmd.Slice()
	if err != nil {
		return slotGrant{}, err
	}
	nums := make([]int64, len(reply))
	for i, r := range reply {
		v, ok := r.(int64)
		if !ok {
			return slotGrant{}, fmt.Errorf("padlock: unexpected multi-key acquire reply %v", reply)
		}
		nums[i] = v
	}
	switch {
	case len(nums) == 2 && nums[0] < 0 && nums[1] >= 1 && int(nums[1]) <= len(ids):
		return slotGrant{busy: int(nums[1]) - 1, holderTTL: time.Duration(-1-nums[0]) * time.Millisecond}, nil
	case len(nums) == len(ids) && nums[0] > 0:
		return slotGrant{fences: nums}, nil
	}
	return slotGrant{}, fmt.Errorf("padlock: unexpected multi-key acquire reply %v", reply)
}

// releaseSlot runs multi_release.lua on ids, whose keys share one slot.
func (s single) releaseSlot(ctx context.Context, ids []*lockID, notify []bool) ([]bool, error) {
	keys := make([]string, len(ids))
	flags := make([]byte, len(ids))
	for i, id := range ids {
		keys[i] = id.lockKey()
		flags[i] = '0'
		if notify[i] {
			flags[i] = '1'
		}
	}
	reply, err := s.multiScripts().release.run(ctx, s.client, s.retries, keys, ids[0].token, string(flags)).Int64Slice()
	if err != nil {
		return nil, err
	}
	if len(reply) != len(ids) {
		return nil, fmt.Errorf("padlock: unexpected multi-key release reply %v", reply)
	}
	held := make([]bool, len(ids))
	for i, r := range reply {
		held[i] = r == 1
	}
	return held, nil
}
