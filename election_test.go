package padlock_test

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/padlockgo/padlock"
	"github.com/redis/go-redis/v9"
)

// handOffElection is an election with two candidates on one Locker:
// A leads, and B waits so that A's term, when it ends, is handed on to B
// inside the Locker (the lock A took from Redis reserved a fence for B).
type handOffElection struct {
	e      *padlock.Election
	a      *padlock.Term
	b      chan campaignResult // B's Campaign's outcome, once it returns
	hook   *faultHook          // on the Locker's client
	record string              // the leader record's Redis key

	mu    sync.Mutex
	bTerm *padlock.Term
}

func (h *handOffElection) termB() *padlock.Term {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.bTerm
}

// awaitB waits for B's Campaign and returns its term.
func (h *handOffElection) awaitB(t *testing.T) *padlock.Term {
	t.Helper()
	tm := h.awaitBWithin(t, 10*time.Second)
	if tm == nil {
		t.Fatal("B never took office after A resigned")
	}
	return tm
}

// awaitBWithin waits up to d for B's Campaign and returns its term, or
// nil when it has not returned by then.
func (h *handOffElection) awaitBWithin(t *testing.T, d time.Duration) *padlock.Term {
	t.Helper()
	select {
	case rb := <-h.b:
		if rb.err != nil {
			t.Fatalf("B: Campaign: %v", rb.err)
		}
		h.mu.Lock()
		h.bTerm = rb.term
		h.mu.Unlock()
		return rb.term
	case <-time.After(d):
		return nil
	}
}

// takeOffice waits for B to take office after A's term ended (resigned
// is the Resign that ends it), with a command of A's term stalled: it
// then lets the stalled command go, after B took office (late is true).
// An engine that orders A's Resign after the stalled command never lets
// B in while it stalls: then the command goes first, and B takes office
// after (late is false).
func (h *handOffElection) takeOffice(t *testing.T, resigned <-chan error, release func()) (termB *padlock.Term, late bool) {
	t.Helper()
	termB = h.awaitBWithin(t, 3*time.Second)
	release()
	late = termB != nil
	if !late {
		t.Logf("B did not take office while A's command stalled")
		termB = h.awaitB(t)
	}
	select {
	case err := <-resigned:
		if err != nil {
			t.Fatalf("A: Resign: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("A's Resign never returned")
	}
	return termB, late
}

type campaignResult struct {
	term *padlock.Term
	err  error
}

func electionHandOff(t *testing.T) *handOffElection {
	t.Helper()
	l, srv, rdb := newLocker(t)
	h := &handOffElection{hook: hookOn(rdb), b: make(chan campaignResult, 1)}
	// B stays asleep in line until it is handed the lock or notified, so
	// that it is there to be handed the lock when A resigns.
	padlock.SetNoticeRecheck(l, 10*time.Minute)
	other := padlock.MustNew(t, srv.Client(t))
	t.Cleanup(func() { _ = other.Close() })
	ctx := ctxFor(t)
	name := testKey(t)
	h.record = l.RedisKey(name) + ":leader"
	o := padlock.Options{TTL: 20 * time.Second}
	h.e = l.Election(name, o)

	// A holder in another process keeps both candidates waiting, so the
	// lock A takes when it lets go reserves a fence for B.
	holder := mustAcquire(t, other, ctx, name, o)
	a := make(chan campaignResult, 1)
	go func() { tm, err := h.e.Campaign(ctx, "A"); a <- campaignResult{tm, err} }()
	padlock.WaitForWaiters(t, l, name, 1)
	go func() { tm, err := h.e.Campaign(ctx, "B"); h.b <- campaignResult{tm, err} }()
	padlock.WaitForWaiters(t, l, name, 2)
	if err := holder.Release(ctx); err != nil {
		t.Fatalf("holder: Release: %v", err)
	}
	ra := <-a
	if ra.err != nil {
		t.Fatalf("A: Campaign: %v", ra.err)
	}
	h.a = ra.term
	t.Cleanup(func() {
		_ = h.a.Resign(context.Background())
		if h.termB() == nil {
			h.awaitB(t)
		}
		_ = h.termB().Resign(context.Background())
	})
	return h
}

// stall returns a fault that holds back the first command for which
// match holds, before it is sent: entered is closed when it is held, and
// it is sent (as the stalled send resuming) when release is called.
// release is called when t ends, at the latest.
func stall(t *testing.T, match func(redis.Cmder) bool) (f procFault, entered chan struct{}, release func()) {
	entered, resume := make(chan struct{}), make(chan struct{})
	release = sync.OnceFunc(func() { close(resume) })
	t.Cleanup(release)
	var once atomic.Bool
	f = func(ctx context.Context, cmd redis.Cmder, next redis.ProcessHook) error {
		if match(cmd) && once.CompareAndSwap(false, true) {
			close(entered)
			<-resume
		}
		return next(ctx, cmd)
	}
	return f, entered, release
}

// TestElectionResignedTermCannotProclaim: A leads; its Proclaim passes its
// checks and stalls before its command is sent; A resigns and B takes
// office (the lock handed on inside the Locker). Then A's Proclaim goes
// out. Promise: it returns an error, and Leader reports B's value and B's
// fence, never A's nor a lower fence.
// Regression: the stalled Proclaim wrote A's value over B's leader record.
func TestElectionResignedTermCannotProclaim(t *testing.T) {
	h := electionHandOff(t)
	ctx := ctxFor(t)
	f, entered, release := stall(t, func(cmd redis.Cmder) bool {
		return slices.Contains(scriptKeys(cmd), h.record) && hasArg(cmd, "A2")
	})
	h.hook.onProcess(f)
	proclaimed := make(chan error, 1)
	go func() { proclaimed <- h.a.Proclaim(ctx, "A2") }()
	awaitSignal(t, entered, "A's Proclaim reaching the client")

	resigned := make(chan error, 1)
	go func() { resigned <- h.a.Resign(ctx) }()
	termB, late := h.takeOffice(t, resigned, release)
	var perr error
	select {
	case perr = <-proclaimed:
	case <-time.After(10 * time.Second):
		t.Fatal("A's Proclaim never returned")
	}

	want := padlock.Leader{Value: "B", Fence: termB.Fence()}
	ld, err := h.e.Leader(ctx)
	if err != nil || ld != want {
		t.Errorf("Leader() = %+v, %v after A's stalled Proclaim; want B's term %+v (A's fence was %d)", ld, err, want, h.a.Fence())
	}
	if perr == nil && late {
		t.Errorf("A's Proclaim, sent after A resigned, returned nil; want an error (ErrNotHeld)")
	}
	if err := termB.Err(); err != nil {
		t.Errorf("B's term after A's stalled Proclaim: Err = %v, want nil (in office)", err)
	}
}

// TestElectionLateResignKeepsSuccessorRecord: two Resigns of A's term at
// once; the first stalls before its command is sent, the second resigns
// and B takes office (handed on inside the Locker); then the first one's
// command goes out. Promise: B's record stays: Leader reports B's value
// and fence.
// Regression: the stalled Resign deleted B's leader record.
func TestElectionLateResignKeepsSuccessorRecord(t *testing.T) {
	h := electionHandOff(t)
	ctx := ctxFor(t)
	f, entered, release := stall(t, func(cmd redis.Cmder) bool { return slices.Contains(scriptKeys(cmd), h.record) })
	h.hook.onProcess(f)
	first := make(chan error, 1)
	go func() { first <- h.a.Resign(ctx) }()
	awaitSignal(t, entered, "A's first Resign reaching the client")

	second := make(chan error, 1)
	go func() { second <- h.a.Resign(ctx) }()
	termB, _ := h.takeOffice(t, second, release)
	select {
	case err := <-first:
		t.Logf("A's stalled Resign returned %v", err)
	case <-time.After(10 * time.Second):
		t.Fatal("A's stalled Resign never returned")
	}

	want := padlock.Leader{Value: "B", Fence: termB.Fence()}
	if ld, err := h.e.Leader(ctx); err != nil || ld != want {
		t.Errorf("Leader() = %+v, %v after A's stalled Resign went out; want B's term %+v", ld, err, want)
	}
	if err := termB.Err(); err != nil {
		t.Errorf("B's term after A's stalled Resign: Err = %v, want nil (in office)", err)
	}
}
