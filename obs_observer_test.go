package padlock_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/padlockgo/padlock"
	"github.com/padlockgo/padlock/internal/redistest"
)

// recorder is an Observer that keeps every event.
type recorder struct {
	mu     sync.Mutex
	events []any
}

type ctxMark struct{}

func (r *recorder) add(e any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = append(r.events, e)
}

func (r *recorder) AcquireStart(ctx context.Context, e padlock.AcquireStartEvent) context.Context {
	r.add(e)
	return context.WithValue(ctx, ctxMark{}, e.Key)
}

func (r *recorder) AcquireAttempt(ctx context.Context, e padlock.AcquireAttemptEvent) {
	if ctx.Value(ctxMark{}) != e.Key {
		e.Key = "ctx not from AcquireStart"
	}
	r.add(e)
}

func (r *recorder) AcquireEnd(ctx context.Context, e padlock.AcquireEndEvent) {
	if ctx.Value(ctxMark{}) != e.Key {
		e.Key = "ctx not from AcquireStart"
	}
	r.add(e)
}

func (r *recorder) AcquireWait(ctx context.Context, e padlock.AcquireWaitEvent) {
	if ctx.Value(ctxMark{}) != e.Key {
		e.Key = "ctx not from AcquireStart"
	}
	r.add(e)
}

func (r *recorder) LockReleased(e padlock.LockReleasedEvent)             { r.add(e) }
func (r *recorder) LeaseRenewed(e padlock.LeaseRenewedEvent)             { r.add(e) }
func (r *recorder) LockLost(e padlock.LockLostEvent)                     { r.add(e) }
func (r *recorder) NoticesUnavailable(e padlock.NoticesUnavailableEvent) { r.add(e) }
func (r *recorder) QuorumVoted(e padlock.QuorumVotedEvent)               { r.add(e) }

// all returns the events of type E so far.
func all[E any](r *recorder) []E {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []E
	for _, e := range r.events {
		if e, ok := e.(E); ok {
			out = append(out, e)
		}
	}
	return out
}

// await waits until the events of type E satisfy ok, and returns them.
func await[E any](t *testing.T, r *recorder, what string, ok func([]E) bool) []E {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		got := all[E](r)
		if ok(got) {
			return got
		}
		if time.Now().After(deadline) {
			t.Fatalf("no %s within 20s; got %+v", what, got)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestObserverAcquireOutcomes checks the outcome AcquireEnd reports for
// each way an Acquire ends, and that each lock it reports held ends with
// exactly one LockReleased.
func TestObserverAcquireOutcomes(t *testing.T) {
	rec := &recorder{}
	l, srv, _ := newLocker(t, padlock.WithObserver(rec))
	ctx := ctxFor(t)
	key := testKey(t)

	// Acquired, then busy for a second Acquire, reentrant through the
	// lock's context; released.
	lk := mustAcquire(t, l, ctx, key, padlock.Options{})
	if _, err := l.Acquire(ctx, key, padlock.Options{}); !errors.Is(err, padlock.ErrNotAcquired) {
		t.Fatalf("second Acquire: got %v, want ErrNotAcquired", err)
	}
	inner := mustAcquire(t, l, lk.Context(ctx), key, padlock.Options{})
	if err := inner.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if err := lk.Release(ctx); err != nil {
		t.Fatal(err)
	}

	// Handed off: two waiters of the same Locker queue behind a holder;
	// the first takes the lock from Redis with a fence to spare and hands
	// it to the second as it lets go.
	holder := mustAcquire(t, l, ctx, key, padlock.Options{})
	got := make(chan *padlock.Lock, 2)
	for i := range 2 {
		go func() {
			lk, _ := l.Acquire(ctx, key, padlock.Options{Wait: 20 * time.Second})
			if i == 0 && lk != nil {
				_ = lk.Release(ctx)
				lk = nil
			}
			got <- lk
		}()
		await(t, rec, "busy attempt of the waiter", func(a []padlock.AcquireAttemptEvent) bool { return len(a) >= 2+i })
	}
	time.Sleep(100 * time.Millisecond) // let the waiters park
	if err := holder.Release(ctx); err != nil {
		t.Fatal(err)
	}
	next := <-got
	if next == nil {
		next = <-got
	}
	if next == nil {
		t.Fatal("second waiter got no lock")
	}
	if err := next.Release(ctx); err != nil {
		t.Fatal(err)
	}

	// Cancelled: a waiter whose context ends, once it waits. (Not on a
	// timer: on a loaded machine a 100 ms context once ended during the
	// first attempt, before the Acquire waited.)
	holder = mustAcquire(t, l, ctx, key, padlock.Options{})
	cctx, cancel := context.WithCancel(ctx)
	cancelled := make(chan error, 1)
	go func() {
		_, err := l.Acquire(cctx, key, padlock.Options{Wait: 20 * time.Second})
		cancelled <- err
	}()
	padlock.WaitForWaiters(t, l, key, 1)
	cancel()
	if err := <-cancelled; !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled Acquire: got %v, want context.Canceled", err)
	}
	if err := holder.Release(ctx); err != nil {
		t.Fatal(err)
	}

	// Invalid and, with Redis gone, unavailable.
	if _, err := l.Acquire(ctx, "", padlock.Options{}); !errors.Is(err, padlock.ErrInvalid) {
		t.Fatalf("empty key: got %v, want ErrInvalid", err)
	}
	srv.Kill(t)
	if _, err := l.Acquire(ctx, key, padlock.Options{}); !errors.Is(err, padlock.ErrUnavailable) {
		t.Fatalf("Acquire on a killed server: got %v, want ErrUnavailable", err)
	}
	l.Close()
	if _, err := l.Acquire(ctx, key, padlock.Options{}); !errors.Is(err, padlock.ErrClosed) {
		t.Fatalf("Acquire after Close: got %v, want ErrClosed", err)
	}

	var outcomes []string
	for _, e := range all[padlock.AcquireEndEvent](rec) {
		outcomes = append(outcomes, e.Outcome.String())
		if e.Key != key && e.Key != "" {
			t.Errorf("AcquireEnd key %q: got another context than AcquireStart returned", e.Key)
		}
		if e.Outcome.Held() != (e.Err == nil && e.Outcome != padlock.OutcomeReentrant) {
			t.Errorf("%v: Err %v", e.Outcome, e.Err)
		}
		if e.Outcome.Held() && e.Fence <= 0 {
			t.Errorf("%v: got fence %d, want > 0", e.Outcome, e.Fence)
		}
	}
	want := []string{"acquired", "busy", "reentrant", "acquired", "acquired", "handed_off", "acquired", "cancelled", "invalid", "unavailable", "closed"}
	if !slices.Equal(outcomes, want) {
		t.Errorf("got outcomes %q, want %q", outcomes, want)
	}
	if n := len(all[padlock.AcquireStartEvent](rec)); n != len(want) {
		t.Errorf("got %d AcquireStart, want %d", n, len(want))
	}
	if w := all[padlock.AcquireWaitEvent](rec); len(w) != 3 {
		t.Errorf("got %d AcquireWait, want 3 (two waiters for the hand-off, one cancelled)", len(w))
	}
	waited := 0
	for _, e := range all[padlock.AcquireEndEvent](rec) {
		if e.Waited {
			waited++
		}
	}
	if waited != 3 {
		t.Errorf("got %d AcquireEnd with Waited, want 3", waited)
	}
	rel := all[padlock.LockReleasedEvent](rec)
	var handed []bool
	for _, e := range rel {
		handed = append(handed, e.HandedOn)
		if e.Held <= 0 || e.Fence <= 0 {
			t.Errorf("LockReleased %+v: want Held and Fence > 0", e)
		}
	}
	// acquired; the holder, the first waiter, the second; the cancelled
	// waiter's holder. The lock is handed on once in between: by the
	// holder, or (when the waiters had not parked by its release, as on a
	// loaded machine) by the first waiter, never by the last one.
	if len(handed) != 5 || handed[0] || handed[3] || handed[4] || handed[1] == handed[2] {
		t.Errorf("got LockReleased HandedOn %v, want one hand-off, by the holder or the first waiter: [false true false false false] or [false false true false false]", handed)
	}
	if lost := all[padlock.LockLostEvent](rec); len(lost) != 0 {
		t.Errorf("got LockLost %+v, want none", lost)
	}
	busy := all[padlock.AcquireAttemptEvent](rec)[0]
	if busy.Attempt != 1 || busy.HolderTTL <= 0 || busy.Err != nil {
		t.Errorf("busy attempt: got %+v, want Attempt 1, HolderTTL > 0, no Err", busy)
	}
}

// TestObserverRenewalAndLoss checks renewal events, and the cause of each
// way a lock is lost: Redis stops answering (a paused server), the token
// is gone, the Locker is closed.
func TestObserverRenewalAndLoss(t *testing.T) {
	t.Parallel() // a server of its own; it waits out a lease
	rec := &recorder{}
	l, srv, rdb := newLocker(t, padlock.WithObserver(rec))
	ctx := ctxFor(t)
	key := testKey(t)
	// Renewed every 667ms: a watchdog that a loaded machine wakes late
	// still renews it before its trust ends (with 600ms it once did not,
	// beside CI at load 20, and no renewal was seen).
	o := padlock.Options{TTL: 2 * time.Second}

	// Renewed while held.
	lk := mustAcquire(t, l, ctx, key+":paused", o)
	await(t, rec, "confirmed renewal", func(e []padlock.LeaseRenewedEvent) bool { return len(e) > 0 && e[len(e)-1].OK })
	ok := all[padlock.LeaseRenewedEvent](rec)[0]
	if ok.Key != key+":paused" || ok.Renewals != 1 || ok.RoundTrip <= 0 || ok.Err != nil {
		t.Errorf("first renewal: got %+v, want the key, Renewals 1, a round trip, no error", ok)
	}

	// Paused: renewals fail, then the lock is lost when its trust ends.
	srv.Pause(t)
	lost := await(t, rec, "lost lock", func(e []padlock.LockLostEvent) bool { return len(e) > 0 })
	await(t, rec, "failed renewal", func(e []padlock.LeaseRenewedEvent) bool { return !e[len(e)-1].OK })
	srv.Resume(t)
	if lost[0].Key != key+":paused" || lost[0].Cause != padlock.LostExpired || lost[0].Held <= 0 {
		t.Errorf("lost under a paused server: got %+v, want cause %v", lost[0], padlock.LostExpired)
	}
	failed := slices.DeleteFunc(all[padlock.LeaseRenewedEvent](rec), func(e padlock.LeaseRenewedEvent) bool { return e.OK })
	if len(failed) == 0 || failed[0].Err == nil {
		t.Errorf("got failed renewals %+v, want at least one with an error", failed)
	}
	<-lk.Done()
	if err := lk.Release(ctx); err != nil && !errors.Is(err, padlock.ErrNotHeld) {
		t.Fatal(err)
	}

	// Token gone: the key deleted behind the holder's back.
	lk = mustAcquire(t, l, ctx, key+":deleted", o)
	if err := rdb.Del(ctx, l.RedisKey(key+":deleted")).Err(); err != nil {
		t.Fatal(err)
	}
	<-lk.Done()
	_ = lk.Release(ctx)

	// Closed while held.
	mustAcquire(t, l, ctx, key+":closed", padlock.Options{})
	l.Close()

	var causes []string
	for _, e := range all[padlock.LockLostEvent](rec) {
		causes = append(causes, e.Key[len(key):]+"="+e.Cause.String())
	}
	want := []string{":paused=lease_expired", ":deleted=token_gone", ":closed=locker_closed"}
	if !slices.Equal(causes, want) {
		t.Errorf("got losses %q, want %q", causes, want)
	}
	if rel := all[padlock.LockReleasedEvent](rec); len(rel) != 0 {
		t.Errorf("got LockReleased %+v for lost locks, want none", rel)
	}
}

// TestObserverNoticesUnavailable checks that a waiter that cannot get
// release notices (its user may not subscribe) says it polls, once.
func TestObserverNoticesUnavailable(t *testing.T) {
	rules := readmeACL(t)
	srv := redistest.Start(t)
	user := aclUser(t, srv, rules[aclEvery]) // no pub/sub commands
	rec := &recorder{}
	l := padlock.MustNew(t, user, padlock.WithObserver(rec))
	t.Cleanup(func() { l.Close() })
	ctx := ctxFor(t)
	key := testKey(t)

	holder := mustAcquire(t, l, ctx, key, padlock.Options{})
	done := make(chan error, 1)
	go func() {
		lk, err := l.Acquire(ctx, key, padlock.Options{Wait: 30 * time.Second, Retry: padlock.LinearBackoff(20 * time.Millisecond)})
		if err == nil {
			err = lk.Release(ctx)
		}
		done <- err
	}()
	await(t, rec, "NoticesUnavailable", func(e []padlock.NoticesUnavailableEvent) bool { return len(e) > 0 })
	if err := holder.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatalf("waiter: %v", err)
	}
	e := all[padlock.NoticesUnavailableEvent](rec)
	if len(e) != 1 || e[0].Key != key || e[0].Err == nil {
		t.Errorf("got %+v, want one event for %q with a reason", e, key)
	}
}

// TestObserverQuorumVotes checks that a Redlock Locker reports each
// node's vote, a down node included.
func TestObserverQuorumVotes(t *testing.T) {
	t.Parallel() // nodes of its own, waiting to vote
	rec := &recorder{}
	l, servers := startRedlock(t, 3, padlock.WithObserver(rec))
	ctx := ctxFor(t)
	servers[2].Kill(t)
	lk := mustAcquire(t, l, ctx, testKey(t), padlock.Options{})
	if err := lk.Release(ctx); err != nil {
		t.Fatal(err)
	}
	votes := all[padlock.QuorumVotedEvent](rec)
	var ops []string
	for _, v := range votes {
		ops = append(ops, v.Op)
	}
	// The last acquire is the test's: startRedlock took locks of its own.
	last := -1
	for i, op := range ops {
		if op == "acquire" {
			last = i
		}
	}
	acq := votes[last]
	var outcomes []string
	for _, n := range acq.Nodes {
		outcomes = append(outcomes, fmt.Sprint(n.Outcome))
	}
	if acq.Need != 2 || acq.Agreed != 2 || len(acq.Nodes) != 3 || acq.Nodes[2].Outcome == padlock.NodeAgreed {
		t.Errorf("acquire votes: got need %d, agreed %d, nodes %s; want 2, 2 and the killed node not agreeing", acq.Need, acq.Agreed, strings.Join(outcomes, ","))
	}
	if !slices.Contains(ops, "release") {
		t.Errorf("got votes on %q, want release among them", ops)
	}
}
