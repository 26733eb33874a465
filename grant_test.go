package padlock_test

import (
	"context"
	"errors"
	"io"
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

// TestElectionStalledProclaimOfResignedTerm: A leads; its Proclaim passes
// its checks and stalls before its command is sent; A resigns and B takes
// office (the lock handed on inside the Locker). Then A's Proclaim goes
// out. Promise: it returns an error, and Leader reports B's value and B's
// fence, never A's nor a lower fence.
func TestElectionStalledProclaimOfResignedTerm(t *testing.T) {
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

// TestReleaseAfterOutlastsRenewalInFlight: a renewal of a lock with a
// short lease is on its way when ReleaseAfter(3s) runs, and lands after
// it. Promise: the key stays locked for 3s after ReleaseAfter, for
// everyone (a renewal in flight does not cut it to the lock's lease), and
// is free after that.
func TestReleaseAfterOutlastsRenewalInFlight(t *testing.T) {
	mutex := func(ctx context.Context, l *padlock.Locker, key string, o padlock.Options) (*padlock.Lock, error) {
		return l.Acquire(ctx, key, o)
	}
	permit := func(ctx context.Context, l *padlock.Locker, key string, o padlock.Options) (*padlock.Lock, error) {
		sem, err := l.Semaphore(1)
		if err != nil {
			return nil, err
		}
		return sem.Acquire(ctx, key, o)
	}
	t.Run("lock", func(t *testing.T) {
		releaseAfterOutlastsRenewal(t, mutex, func(l *padlock.Locker, key string) string { return l.RedisKey(key) })
	})
	// A permit's lease lives in a sorted set, its change numbers beside
	// it (lua/hold_extend.lua).
	t.Run("permit", func(t *testing.T) {
		releaseAfterOutlastsRenewal(t, permit, func(l *padlock.Locker, key string) string { return l.RedisKey(key) + ":sem" })
	})
}

func releaseAfterOutlastsRenewal(t *testing.T,
	take func(ctx context.Context, l *padlock.Locker, key string, o padlock.Options) (*padlock.Lock, error),
	watch func(l *padlock.Locker, key string) string) {
	// On virtual time: the renewal is held back by a hook, not by the
	// machine's load, and every deadline below is exact.
	inBubble(t, func(t *testing.T, b *bubble) {
		releaseAfterOutlastsRenewalIn(t, b, take, watch)
	})
}

func releaseAfterOutlastsRenewalIn(t *testing.T, b *bubble,
	take func(ctx context.Context, l *padlock.Locker, key string, o padlock.Options) (*padlock.Lock, error),
	watch func(l *padlock.Locker, key string) string) {
	l, rdb := b.locker()
	hook := hookOn(rdb)
	rivals, _ := b.locker()
	ctx := context.Background()
	key := "k"
	const (
		ttl  = 900 * time.Millisecond
		keep = 3 * time.Second
	)
	lk, err := take(ctx, l, key, padlock.Options{TTL: ttl})
	if err != nil {
		t.Fatal(err)
	}
	defer lk.Release(ctx)
	// Loads the lease script, so the renewal needs no second round.
	if err := lk.Extend(ctx, ttl); err != nil {
		t.Fatalf("Extend: %v", err)
	}

	lockKey := watch(l, key)
	entered, resume, sent := make(chan struct{}), make(chan struct{}), make(chan struct{})
	release := sync.OnceFunc(func() { close(resume) })
	defer release()
	var once atomic.Bool
	hook.onPipeline(func(ctx context.Context, cmds []redis.Cmder, next redis.ProcessPipelineHook) error {
		if !slices.ContainsFunc(cmds, func(c redis.Cmder) bool { return firstKey(c) == lockKey }) || !once.CompareAndSwap(false, true) {
			return next(ctx, cmds)
		}
		close(entered)
		// Held until ReleaseAfter has returned; or, should ReleaseAfter
		// wait for it, until the renewal's own deadline.
		select {
		case <-resume:
		case <-ctx.Done():
		}
		// The renewal was on the wire already: it arrives whatever the
		// client's deadline says by now.
		err := next(context.WithoutCancel(ctx), cmds)
		close(sent)
		return err
	})
	awaitSignal(t, entered, "a renewal going out")

	began := time.Now()
	if err := lk.ReleaseAfter(ctx, keep); err != nil {
		t.Fatalf("ReleaseAfter: %v", err)
	}
	release()
	awaitSignal(t, sent, "the held renewal landing")

	time.Sleep(time.Until(began.Add(keep * 2 / 3)))
	other, err := take(ctx, rivals, key, padlock.Options{})
	if err == nil {
		defer other.Release(ctx)
		if at := time.Since(began); at < keep-100*time.Millisecond {
			t.Fatalf("another Locker took the key %v after ReleaseAfter(%v): the renewal in flight cut the kept lease to the lock's %v",
				at.Round(time.Millisecond), keep, ttl)
		}
		t.Fatalf("another Locker took the key %v after ReleaseAfter(%v)", time.Since(began).Round(time.Millisecond), keep)
	}
	if !errors.Is(err, padlock.ErrNotAcquired) {
		t.Fatalf("Acquire %v after ReleaseAfter(%v): %v, want ErrNotAcquired", time.Since(began).Round(time.Millisecond), keep, err)
	}

	other, err = take(ctx, rivals, key, padlock.Options{Wait: 10 * time.Second})
	if err != nil {
		t.Fatalf("Acquire after the kept %v: %v", keep, err)
	}
	defer other.Release(ctx)
	if at := time.Since(began); at < keep-100*time.Millisecond {
		t.Fatalf("another Locker took the key %v after ReleaseAfter(%v)", at.Round(time.Millisecond), keep)
	}
}

// renewalStaller is an Observer that stalls the watchdog at the first
// renewal of one key it is told of, until released: a renewal goroutine
// descheduled in the middle of applying a batch's answers.
type renewalStaller struct {
	padlock.NopObserver
	key              string
	once             atomic.Bool
	entered, release chan struct{}
}

func (o *renewalStaller) LeaseRenewed(e padlock.LeaseRenewedEvent) {
	if e.Key == o.key && e.OK && o.once.CompareAndSwap(false, true) {
		close(o.entered)
		<-o.release
	}
}

// TestLostLockIsNotRenewed: a renewal of lock A is confirmed by Redis, but
// its answer is applied only after A's trusted lease ran out and A
// reported itself lost. Promise: once Err has reported the lock lost, the
// key is renewed no more: it expires at the latest one lease after the
// last renewal sent before the loss, rather than staying locked until
// Release.
//
// A's renewal rides in one batch with B's, which comes first; the
// Observer stalls on B's answer (standing for the watchdog's goroutine
// being held up) until A's trust has run out.
func TestLostLockIsNotRenewed(t *testing.T) {
	key := "lost-lock"
	obs := &renewalStaller{key: key + ":b", entered: make(chan struct{}), release: make(chan struct{})}
	l, srv, _ := newLocker(t, padlock.WithObserver(obs))
	raw := srv.Client(t)
	ctx := ctxFor(t)
	const ttl = 2 * time.Second
	o := padlock.Options{TTL: ttl}
	releaseObs := sync.OnceFunc(func() { close(obs.release) })
	defer releaseObs()

	// Loads the lease script, so the batch needs no second round.
	warm := mustAcquire(t, l, ctx, key+":warm", o)
	if err := warm.Extend(ctx, ttl); err != nil {
		t.Fatalf("Extend: %v", err)
	}
	if err := warm.Release(ctx); err != nil {
		t.Fatalf("Release: %v", err)
	}

	b := mustAcquire(t, l, ctx, obs.key, o)
	defer b.Release(ctx)
	a := mustAcquire(t, l, ctx, key, o)
	defer a.Release(ctx)
	awaitSignal(t, obs.entered, "the first renewal batch")

	deadline := time.Now().Add(3 * ttl)
	for a.Err() == nil && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	if a.Err() == nil {
		releaseObs()
		t.Skip("scenario not staged: A's renewal was applied before its trust ran out")
	}
	lostAt := time.Now()
	if !errors.Is(a.Err(), padlock.ErrLockLost) {
		t.Fatalf("A: Err = %v, want ErrLockLost", a.Err())
	}
	releaseObs()

	// The last renewal sent before the loss went out before lostAt; its
	// lease ends before lostAt + ttl. A second of slack for a busy
	// machine.
	lockKey := l.RedisKey(key)
	for end := lostAt.Add(ttl + time.Second); ; time.Sleep(20 * time.Millisecond) {
		n, err := raw.Exists(ctx, lockKey).Result()
		if err != nil {
			t.Fatalf("EXISTS: %v", err)
		}
		if n == 0 {
			break
		}
		if time.Now().After(end) {
			pttl := raw.PTTL(ctx, lockKey).Val()
			t.Fatalf("the key is still held %v after A reported the lock lost (Err %v), with %v of lease left: it is still being renewed",
				time.Since(lostAt).Round(time.Millisecond), a.Err(), pttl)
		}
	}
}

// TestReleaseWithLostReplyReportsReleased: Redis runs a Release, but the
// connection closes before its reply arrives, and padlock sends the
// release again, which finds the token gone. Promise: a Release that
// worked does not report the lock lost: it returns neither ErrNotHeld nor
// ErrLockLost, and Err says ErrReleased.
func TestReleaseWithLostReplyReportsReleased(t *testing.T) {
	l, srv, rdb := newLocker(t)
	hook := hookOn(rdb)
	raw := srv.Client(t)
	ctx := ctxFor(t)
	key := testKey(t)
	// Loads the release script, so that Release sends one EVALSHA.
	if err := mustAcquire(t, l, ctx, key+":warm", padlock.Options{}).Release(ctx); err != nil {
		t.Fatalf("warming up: Release: %v", err)
	}
	lk := mustAcquire(t, l, ctx, key, padlock.Options{TTL: 20 * time.Second})
	lockKey := l.RedisKey(key)
	var n atomic.Int32
	hook.onProcess(func(ctx context.Context, cmd redis.Cmder, next redis.ProcessHook) error {
		if firstKey(cmd) != lockKey || n.Add(1) != 1 {
			return next(ctx, cmd)
		}
		if err := next(ctx, cmd); err != nil {
			return err
		}
		cmd.SetErr(io.EOF) // the connection closed after the server ran it
		return io.EOF
	})
	err := lk.Release(ctx)
	if n.Load() == 0 {
		t.Fatal("scenario not staged: Release sent no command on the lock key")
	}
	if exists := raw.Exists(ctx, lockKey).Val(); exists != 0 {
		t.Fatalf("the key is still there after Release (%v)", err)
	}
	if errors.Is(err, padlock.ErrNotHeld) || errors.Is(err, padlock.ErrLockLost) {
		t.Errorf("Release that Redis ran, its reply lost on a closed connection: %v (ErrNotHeld %v, ErrLockLost %v); want nil, or at most an ErrUnavailable error",
			err, errors.Is(err, padlock.ErrNotHeld), errors.Is(err, padlock.ErrLockLost))
	}
	if got := lk.Err(); got != padlock.ErrReleased {
		t.Errorf("Err after a Release that worked = %v, want ErrReleased", got)
	}
}
