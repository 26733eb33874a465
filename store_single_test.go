package padlock_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/padlockgo/padlock"
	"github.com/redis/go-redis/v9"
)

// TestReleaseWithLostReplyReportsReleased: Redis runs a Release, but the
// connection closes before its reply arrives, and padlock sends the
// release again, which finds the token gone. Promise: a Release that
// worked does not report the lock lost: it returns neither ErrNotHeld nor
// ErrLockLost, and Err says ErrReleased.
// Regression: the copy of a Release that worked reported ErrNotHeld.
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

func TestClusterExclusionAcrossSlots(t *testing.T) {
	t.Parallel()
	c, l1 := startCluster(t)
	l2 := padlock.MustNew(t, c.Client(t)) // another process
	defer l2.Close()
	ctx := context.Background()
	keys := clusterKeys(l1, 3, 2)

	// Hold one lock per key for a moment: each node must carry some.
	var held []*padlock.Lock
	for _, nodeKeys := range keys {
		for _, k := range nodeKeys {
			lk, err := l1.Acquire(ctx, k, padlock.Options{})
			if err != nil {
				t.Fatalf("Acquire(%q): %v", k, err)
			}
			held = append(held, lk)
		}
	}
	for i, n := range c.Nodes() {
		var locks int
		for _, k := range n.Keys(t) {
			if strings.HasPrefix(k, padlock.DefaultKeyPrefix+"{") {
				locks++
			}
		}
		if locks != len(keys[i]) {
			t.Errorf("node %d holds %d lock keys, want %d: the locks should spread over all nodes", i, locks, len(keys[i]))
		}
	}
	for _, lk := range held {
		if err := lk.Release(ctx); err != nil {
			t.Fatalf("Release: %v", err)
		}
	}

	// Many owners in two processes contend for keys on every node.
	const workers, rounds = 6, 5
	var wg sync.WaitGroup
	for _, nodeKeys := range keys {
		for _, k := range nodeKeys {
			var inside atomic.Int32 // owners inside the critical section
			var lastFence atomic.Int64
			for w := range workers {
				l := l1
				if w%2 == 1 {
					l = l2
				}
				wg.Go(func() {
					for range rounds {
						lk, err := l.Acquire(ctx, k, padlock.Options{Wait: 20 * time.Second})
						if err != nil {
							t.Errorf("Acquire(%q): %v", k, err)
							return
						}
						if n := inside.Add(1); n != 1 {
							t.Errorf("key %q: %d owners at once, want 1", k, n)
						}
						if f, last := lk.Fence(), lastFence.Swap(lk.Fence()); f <= last {
							t.Errorf("key %q: fence %d after %d, want it to rise", k, f, last)
						}
						time.Sleep(time.Millisecond)
						inside.Add(-1)
						if err := lk.Release(ctx); err != nil {
							t.Errorf("Release(%q): %v", k, err)
						}
					}
				})
			}
		}
	}
	wg.Wait()
}

func TestClusterRenewalAcrossSlots(t *testing.T) {
	t.Parallel()
	c, l := startCluster(t)
	other := padlock.MustNew(t, c.Client(t))
	defer other.Close()
	ctx := context.Background()

	// Renewed every 2 s: a renewal a loaded machine runs 4 s late is
	// still in time (1 s leases were lost beside CI at load 23, and 3 s
	// ones beside two more test runs at load 40).
	const ttl = 6 * time.Second
	var held []*padlock.Lock
	for _, nodeKeys := range clusterKeys(l, 3, 3) {
		for _, k := range nodeKeys {
			lk, err := l.Acquire(ctx, k, padlock.Options{TTL: ttl})
			if err != nil {
				t.Fatalf("Acquire(%q): %v", k, err)
			}
			defer lk.Release(ctx)
			held = append(held, lk)
		}
	}
	time.Sleep(3 * ttl)
	for _, lk := range held {
		if err := lk.Err(); err != nil {
			t.Errorf("lock %q lost after %v of renewal: %v", lk.Key(), 3*ttl, err)
		}
		if d, err := lk.TTL(ctx); err != nil || d <= 0 {
			t.Errorf("TTL(%q) = %v, %v; want the lease still running", lk.Key(), d, err)
		}
		if _, err := other.Acquire(ctx, lk.Key(), padlock.Options{}); !errors.Is(err, padlock.ErrNotAcquired) {
			t.Errorf("another owner's Acquire(%q): got %v, want padlock.ErrNotAcquired", lk.Key(), err)
		}
	}
}

// TestFairLostReplyQueuesOnce loses the reply of a fair waiter's first
// attempt after Redis queued it, so the waiter asks to be queued again: as
// a new attempt after a read timeout, as a copy of the same attempt after
// its connection closed. It must stay queued once: after it is served and
// lets go, the next fair waiter gets the key, instead of finding the key
// promised to a stale entry of the served waiter until that entry's
// deadline.
func TestFairLostReplyQueuesOnce(t *testing.T) {
	for _, tc := range []struct {
		name string
		lose fairLoss
	}{
		{"read timeout", loseReply},
		{"connection closed", closeConn},
	} {
		t.Run(tc.name, func(t *testing.T) { testFairLostReplyQueuesOnce(t, tc.lose) })
	}
}

func testFairLostReplyQueuesOnce(t *testing.T, loss fairLoss) {
	l, srv, rdb := newLocker(t)
	ctx := ctxFor(t)
	key := testKey(t)
	queue := "padlock:{" + key + "}:queue"
	holder := mustAcquire(t, l, ctx, key, padlock.Options{Fair: true})

	lose := &fairJoins{lose: loss}
	c1 := srv.Client(t)
	c1.AddHook(lose)
	l1 := padlock.MustNew(t, c1)
	t.Cleanup(func() { l1.Close() })
	// The first waiter's wait is long, so a stale entry of it would block
	// the second waiter for all of the second's wait.
	type result struct {
		lk  *padlock.Lock
		err error
	}
	first := make(chan result, 1)
	go func() {
		lk, err := l1.Acquire(ctx, key, padlock.Options{Fair: true, Wait: 25 * time.Second})
		first <- result{lk, err}
	}()
	// The lost attempt, then at least one more that asks to be queued.
	place := lose.awaitJoins(t, 2)
	if got := entriesOf(rdb.LRange(ctx, queue, 0, -1).Val(), place); got != 1 {
		t.Errorf("queue entries of the waiter whose reply was lost: got %d, want 1", got)
	}

	l2 := padlock.MustNew(t, srv.Client(t))
	t.Cleanup(func() { l2.Close() })
	second := make(chan result, 1)
	go func() {
		lk, err := l2.Acquire(ctx, key, padlock.Options{Fair: true, Wait: 10 * time.Second})
		second <- result{lk, err}
	}()
	waitQueueLen(t, rdb, key, 2)

	if err := holder.Release(ctx); err != nil {
		t.Fatalf("holder's Release: %v", err)
	}
	r1 := <-first
	if r1.err != nil {
		t.Fatalf("first waiter: %v", r1.err)
	}
	// A copy sent again after a closed connection is the same attempt,
	// the same grant; a new attempt is a grant of its own.
	if lose.mu.Lock(); loss == loseReply && r1.lk.Token() == lose.lostToken {
		t.Errorf("first waiter's token %s is the lost attempt's: every attempt is a grant of its own", r1.lk.Token())
	}
	lose.mu.Unlock()
	if entries := rdb.LRange(ctx, queue, 0, -1).Val(); entriesOf(entries, place) != 0 {
		t.Errorf("queue once the first waiter was served: %v, want no entry of %s", entries, place)
	}
	released := time.Now()
	if err := r1.lk.Release(ctx); err != nil {
		t.Fatalf("first waiter's Release: %v", err)
	}
	r2 := <-second
	if r2.err != nil {
		t.Fatalf("second waiter, with the key free since the first let go: got %v, want the lock", r2.err)
	}
	t.Logf("second waiter got the key %v after the first let go", time.Since(released))
	r2.lk.Release(ctx)
	if n := rdb.Exists(ctx, queue).Val(); n != 0 {
		t.Fatalf("queue key after every waiter was served: %v, want gone", rdb.LRange(ctx, queue, 0, -1).Val())
	}
}

// entriesOf counts the entries of place in a fair queue.
func entriesOf(entries []string, place string) int {
	n := 0
	for _, e := range entries {
		if queuedPlace(e) == place {
			n++
		}
	}
	return n
}

// fairLoss is what fairJoins does to the first attempt that asks to be
// queued.
type fairLoss int

const (
	loseNothing fairLoss = iota
	// loseReply lets it run on the server and then fails it, as a reply
	// lost to a read timeout would: the waiter sends a new attempt.
	loseReply
	// closeConn lets it run and then fails it as a closed connection
	// would: the store sends a copy of the same attempt again.
	closeConn
	// holdBack fails it, as a read timeout would, without sending it: the
	// test sends it later (fairJoins.late), as a copy stuck on its way
	// that runs after the attempts sent since.
	holdBack
)

// fairJoins is a go-redis hook that watches the fair attempts that ask to
// be queued: it records the waiter's place in the queue and the first
// attempt's grant token, and counts those that ran (or, held back, were
// to run). It does to the first what lose says.
type fairJoins struct {
	lose fairLoss

	mu        sync.Mutex
	place     string
	lostToken string // the grant token of the first attempt
	joins     int
	held      []any // the first attempt's command, held back
}

func (h *fairJoins) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *fairJoins) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

func (h *fairJoins) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		// acquire_fair.lua: EVALSHA or EVAL, script, its keys (3, or 4
		// with the bids hash), then the grant token, the lease, how
		// long to stay queued (0: not queued), the place and the
		// tokens of earlier attempts.
		args := cmd.Args()
		if len(args) < 10 || (cmd.Name() != "evalsha" && cmd.Name() != "eval") {
			return next(ctx, cmd)
		}
		nkeys := fmt.Sprint(args[2])
		if nkeys != "3" && nkeys != "4" {
			return next(ctx, cmd)
		}
		argv := args[3:]
		if nkeys == "4" {
			argv = args[4:]
		}
		argv = argv[3:]
		if len(argv) < 4 || fmt.Sprint(argv[2]) == "0" {
			return next(ctx, cmd)
		}
		h.mu.Lock()
		first := h.joins == 0
		h.mu.Unlock()
		var err error
		if first && h.lose == holdBack {
			h.mu.Lock()
			h.held = append([]any(nil), args...)
			h.mu.Unlock()
		} else if err = next(ctx, cmd); err != nil {
			return err
		}
		h.mu.Lock()
		defer h.mu.Unlock()
		h.joins++
		h.place = fmt.Sprint(argv[3])
		if h.joins == 1 {
			h.lostToken = fmt.Sprint(argv[0])
		}
		if !first {
			return nil
		}
		var lostErr error
		switch h.lose {
		case loseNothing:
			return nil
		case closeConn:
			lostErr = io.EOF
		default:
			lostErr = &net.OpError{Op: "read", Net: "tcp", Err: os.ErrDeadlineExceeded}
		}
		cmd.SetErr(lostErr)
		return lostErr
	}
}

// late sends the attempt held back (holdBack) through c, and returns its
// reply.
func (h *fairJoins) late(ctx context.Context, c *redis.Client) (any, error) {
	h.mu.Lock()
	args := h.held
	h.mu.Unlock()
	return c.Do(ctx, args...).Result()
}

// awaitJoins waits until n attempts asked to be queued and ran, and
// returns the place they queued.
func (h *fairJoins) awaitJoins(t *testing.T, n int) string {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for time.Now().Before(deadline) {
		h.mu.Lock()
		joins, token := h.joins, h.place
		h.mu.Unlock()
		if joins >= n {
			return token
		}
		time.Sleep(2 * time.Millisecond)
	}
	t.Fatalf("attempts that asked to be queued: fewer than %d in 15s", n)
	return ""
}

// TestFairLeavingTakesEveryEntry checks that a fair waiter that gives up
// takes every queue entry of its token with it, even when the queue holds
// more than one (as a client that queued twice would leave it; no request
// to queue a waiter queues it twice, see TestFairLateRequestQueuesOnce).
func TestFairLeavingTakesEveryEntry(t *testing.T) {
	l, srv, rdb := newLocker(t)
	ctx := ctxFor(t)
	key := testKey(t)
	queue := "padlock:{" + key + "}:queue"
	holder := mustAcquire(t, l, ctx, key, padlock.Options{Fair: true})

	joins := &fairJoins{}
	c := srv.Client(t)
	c.AddHook(joins)
	wl := padlock.MustNew(t, c)
	t.Cleanup(func() { wl.Close() })
	wctx, giveUp := context.WithCancel(ctx)
	defer giveUp()
	done := acquireFairAndRelease(ctx, wctx, wl, key)
	token := joins.awaitJoins(t, 1)
	now, err := rdb.Time(ctx).Result()
	if err != nil {
		t.Fatal(err)
	}
	// A second entry, as the script would push it (with the queue's
	// expiry raised to cover it).
	rdb.RPush(ctx, queue, strconv.FormatInt(now.UnixMilli()+25000, 10)+":"+token)
	rdb.PExpire(ctx, queue, 26*time.Second)
	giveUp()
	if err := <-done; !errors.Is(err, padlock.ErrNotAcquired) {
		t.Fatalf("waiter: got %v, want ErrNotAcquired", err)
	}
	if entries := rdb.LRange(ctx, queue, 0, -1).Val(); len(entries) != 0 {
		t.Fatalf("queue after its only waiter left: %v, want empty", entries)
	}
	holder.Release(ctx)
}

// TestFairLateRequestQueuesOnce has a fair waiter's first request to be
// queued, whose reply was lost, run late: after the next one queued the
// waiter. The late one must not queue it again, so the waiter, once served
// (which takes only the head of the queue: lua/queue_head.lua's serveHead)
// or gone, leaves no entry behind to hold the key for nobody. Served by a
// release in another Locker (its next attempt takes the key), or handed
// the lock within its own Locker (lua/handover_fair.lua).
func TestFairLateRequestQueuesOnce(t *testing.T) {
	for _, tc := range []struct {
		name   string
		served bool // the holder lets go; else the waiter's ctx ends
		local  bool // the holder is of the waiter's Locker: a hand-off
	}{
		{"served", true, false},
		{"handed on", true, true},
		{"gives up", false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l, srv, rdb := newLocker(t)
			ctx := ctxFor(t)
			key := testKey(t)
			queue := "padlock:{" + key + "}:queue"

			joins := &fairJoins{lose: holdBack}
			c := srv.Client(t)
			c.AddHook(joins)
			ends := &acquireEnds{}
			wl := padlock.MustNew(t, c, padlock.WithObserver(ends))
			t.Cleanup(func() { wl.Close() })
			hl := l
			if tc.local {
				hl = wl
			}
			holder := mustAcquire(t, hl, ctx, key, padlock.Options{Fair: true})
			wctx, giveUp := context.WithCancel(ctx)
			defer giveUp()
			done := acquireFairAndRelease(ctx, wctx, wl, key)
			// The held-back request, then the one sent after it.
			place := joins.awaitJoins(t, 2)
			waitQueueLen(t, rdb, key, 1)
			// The first, late: the key is still held.
			if v, err := joins.late(ctx, rdb); err != nil {
				t.Fatalf("the late request: %v", err)
			} else if n, ok := v.(int64); !ok || n >= 0 {
				t.Fatalf("the late request: got %v, want the key busy", v)
			}
			if got := entriesOf(rdb.LRange(ctx, queue, 0, -1).Val(), place); got != 1 {
				t.Fatalf("entries of the waiter once the late request ran: got %d, want 1", got)
			}
			if tc.served {
				if tc.local {
					// A Release hands the lock on only to a waiter asleep
					// in the line, which a loaded machine may not have put
					// to sleep yet.
					padlock.WaitParked(t, wl, key, 1)
				}
				if err := holder.Release(ctx); err != nil {
					t.Fatalf("holder's Release: %v", err)
				}
				if err := <-done; err != nil {
					t.Fatalf("waiter: got %v, want the lock", err)
				}
				if got := ends.last(); tc.local && got != padlock.OutcomeHandedOff {
					t.Fatalf("waiter's outcome: %v, want the lock handed on within its Locker", got)
				}
			} else {
				giveUp()
				if err := <-done; !errors.Is(err, padlock.ErrNotAcquired) {
					t.Fatalf("waiter: got %v, want ErrNotAcquired", err)
				}
			}
			if entries := rdb.LRange(ctx, queue, 0, -1).Val(); len(entries) != 0 {
				t.Fatalf("queue after its only waiter left: %v, want empty", entries)
			}
			holder.Release(ctx)
		})
	}
}

// acquireEnds is an Observer that keeps the outcome of the last Acquire
// that ended.
type acquireEnds struct {
	padlock.NopObserver
	mu      sync.Mutex
	outcome padlock.AcquireOutcome
}

func (o *acquireEnds) AcquireEnd(_ context.Context, e padlock.AcquireEndEvent) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.outcome = e.Outcome
}

func (o *acquireEnds) last() padlock.AcquireOutcome {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.outcome
}

// acquireFairAndRelease waits on l for key in fair mode (up to 20s, or
// until wctx ends), lets it go under ctx once it holds it, and sends how
// that went on the channel it returns.
func acquireFairAndRelease(ctx, wctx context.Context, l *padlock.Locker, key string) <-chan error {
	done := make(chan error, 1)
	go func() {
		lk, err := l.Acquire(wctx, key, padlock.Options{Fair: true, Wait: 20 * time.Second})
		if err == nil {
			err = lk.Release(ctx)
		}
		done <- err
	}()
	return done
}
