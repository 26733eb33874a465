package padlock_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/padlockgo/padlock"
	"github.com/padlockgo/padlock/internal/redistest"
	"github.com/redis/go-redis/v9"
)

func TestRedlockMutualExclusion(t *testing.T) {
	t.Parallel()
	// Each hold is a millisecond, but on a loaded machine the time from
	// a grant to its release passed rlMaxLease's 1 s (the Release then
	// found the lock lost); a 3 s lease leaves room. Fresh nodes then vote
	// after about 5 s, which awaitVotes waits for.
	const ttl = 3 * time.Second
	// A node timeout far above a loaded machine's stalls, too: a Release
	// that a healthy node answered after 250 ms once missed its quorum,
	// which says nothing of exclusion.
	opts := []padlock.RedlockOption{padlock.WithMaxLease(ttl), padlock.WithDefaults(padlock.Options{TTL: ttl}), padlock.WithNodeTimeout(2 * time.Second)}
	l1, servers := startRedlock(t, 5, opts...)
	l2 := redlockOn(t, servers, opts...)
	awaitVotes(t, l2)
	ctx := ctxFor(t)
	key := testKey(t)

	const workers, rounds = 20, 5
	var inside atomic.Int32 // owners inside the critical section
	var wg sync.WaitGroup
	for w := range workers {
		l := l1
		if w%2 == 1 {
			l = l2
		}
		wg.Go(func() {
			for range rounds {
				lk, err := l.Acquire(ctx, key, padlock.Options{Wait: 20 * time.Second})
				if err != nil {
					t.Errorf("Acquire: %v", err)
					return
				}
				if n := inside.Add(1); n != 1 {
					t.Errorf("%d owners at once, want 1", n)
				}
				time.Sleep(time.Millisecond) // widen the window
				inside.Add(-1)
				if err := lk.Release(ctx); err != nil {
					t.Errorf("Release: %v", err)
				}
			}
		})
	}
	wg.Wait()
}

func TestRedlockBusy(t *testing.T) {
	// On virtual time, on in-memory nodes that vote at once.
	inBubble(t, func(t *testing.T, b *bubble) {
		l, nodes := b.redlock(5)
		other := b.redlockOn(nodes)
		ctx := context.Background()
		key := testKey(t)

		holder := mustAcquire(t, l, ctx, key, padlock.Options{TTL: time.Second}) // the max lease of these tests
		defer holder.Release(ctx)
		if got := holder.Fence(); got != 0 {
			t.Errorf("Fence() = %d on a Redlock Locker, want 0 (no monotonic fence without consensus)", got)
		}
		_, err := other.Acquire(ctx, key, padlock.Options{})
		if !errors.Is(err, padlock.ErrNotAcquired) || errors.Is(err, padlock.ErrUnavailable) {
			t.Fatalf("Acquire of a held key: got %v, want ErrNotAcquired and not ErrUnavailable", err)
		}
		if d, ok := padlock.RetryAfter(err); !ok || d <= 300*time.Millisecond || d > time.Second {
			t.Errorf("RetryAfter = %v, %v; want the holder's remaining lease, about 1s", d, ok)
		}
		if d, err := holder.TTL(ctx); err != nil || d <= 300*time.Millisecond || d > time.Second {
			t.Errorf("TTL() = %v, %v; want about 1s", d, err)
		}
	})
}

func TestRedlockMinorityDown(t *testing.T) {
	t.Parallel()
	l, servers := startRedlock(t, 5)
	other := redlockOn(t, servers)
	awaitVotes(t, other)
	ctx := ctxFor(t)
	key := testKey(t)

	servers[0].Kill(t)
	servers[3].Kill(t)
	for i := range 3 {
		lk, err := l.Acquire(ctx, key, padlock.Options{})
		if err != nil {
			t.Fatalf("round %d: Acquire with 2 of 5 nodes down: %v", i, err)
		}
		if _, err := other.Acquire(ctx, key, padlock.Options{}); !errors.Is(err, padlock.ErrNotAcquired) {
			t.Fatalf("round %d: second owner's Acquire: got %v, want ErrNotAcquired", i, err)
		}
		extended := time.Now()
		if err := lk.Extend(ctx, 900*time.Millisecond); err != nil {
			t.Fatalf("round %d: Extend: %v", i, err)
		}
		// What is left of the 900ms lease, however long a loaded machine
		// took to ask (a fixed 800ms floor once failed under -race beside
		// CI), with 100ms for the drift margin.
		if d, err := lk.TTL(ctx); err != nil || d <= 0 || d > 900*time.Millisecond || d < 800*time.Millisecond-time.Since(extended) {
			t.Fatalf("round %d: TTL() after Extend = %v, %v; want what is left of 900ms", i, d, err)
		}
		if err := lk.Release(ctx); err != nil {
			t.Fatalf("round %d: Release: %v", i, err)
		}
	}
}

func TestRedlockMajorityDownFailsFast(t *testing.T) {
	t.Parallel()
	l, servers := startRedlock(t, 5)
	ctx := ctxFor(t)
	key := testKey(t)
	held := mustAcquire(t, l, ctx, key+":held", padlock.Options{NoRenew: true})
	for _, s := range servers[:3] {
		s.Kill(t)
	}
	// Every request on the held lock says which nodes failed, and how.
	wantNodes := []padlock.NodeOutcome{padlock.NodeUnreachable, padlock.NodeUnreachable, padlock.NodeUnreachable, padlock.NodeAgreed, padlock.NodeAgreed}
	if err := held.Extend(ctx, rlMaxLease); !errors.Is(err, padlock.ErrUnavailable) {
		t.Errorf("Extend with 3 of 5 nodes down: got %v, want ErrUnavailable", err)
	} else {
		checkNodes(t, "Extend", err, "extend", servers, wantNodes)
	}
	if _, err := held.TTL(ctx); !errors.Is(err, padlock.ErrUnavailable) {
		t.Errorf("TTL with 3 of 5 nodes down: got %v, want ErrUnavailable", err)
	} else {
		checkNodes(t, "TTL", err, "ttl", servers, wantNodes)
	}
	if err := held.Release(ctx); !errors.Is(err, padlock.ErrUnavailable) {
		t.Errorf("Release with 3 of 5 nodes down: got %v, want ErrUnavailable", err)
	} else {
		checkNodes(t, "Release", err, "release", servers, wantNodes)
	}

	// One attempt asks all nodes and then undoes itself on all that may
	// hold the lock, each bounded by the node timeout; the Locker may
	// clean up once more.
	// Generous slack for loaded machines; a call the node timeout did not
	// bound would wait for the 10s socket timeout.
	budget := 3*rlNodeTimeout + time.Second
	start := time.Now()
	_, err := l.Acquire(ctx, key, padlock.Options{})
	took := time.Since(start)
	if !errors.Is(err, padlock.ErrNotAcquired) || !errors.Is(err, padlock.ErrUnavailable) {
		t.Fatalf("Acquire with 3 of 5 nodes down: got %v, want ErrNotAcquired and ErrUnavailable", err)
	}
	if !strings.Contains(err.Error(), "2 of 5 nodes agreed, 3 needed") {
		t.Errorf("error %q does not say how many nodes agreed", err)
	}
	checkNodes(t, "Acquire", err, "acquire", servers, wantNodes)
	if took > budget {
		t.Errorf("Acquire took %v, want at most %v", took, budget)
	}
	// Nothing is left behind on the nodes that granted it.
	for _, s := range servers[3:] {
		if keys := s.Keys(t); len(keys) != 0 {
			t.Errorf("node %s holds %q after the failed attempt, want nothing", s, keys)
		}
	}

	// A waiting Acquire gives up when its wait does, never hangs.
	start = time.Now()
	_, err = l.Acquire(ctx, key, padlock.Options{Wait: 300 * time.Millisecond})
	if !errors.Is(err, padlock.ErrNotAcquired) {
		t.Fatalf("waiting Acquire: got %v, want ErrNotAcquired", err)
	}
	if took := time.Since(start); took > 300*time.Millisecond+budget {
		t.Errorf("waiting Acquire took %v, want at most %v", took, 300*time.Millisecond+budget)
	}
}

func TestRedlockHungNodes(t *testing.T) {
	t.Parallel()
	l, servers := startRedlock(t, 5)
	ctx := ctxFor(t)
	key := testKey(t)

	servers[2].Pause(t)
	oneHung := []padlock.NodeOutcome{padlock.NodeAgreed, padlock.NodeAgreed, padlock.NodeTimeout, padlock.NodeAgreed, padlock.NodeAgreed}
	var slowest time.Duration
	for i := range 5 {
		var (
			lk   *padlock.Lock
			took time.Duration
		)
		err := untilHealthyAnswer(t, oneHung, func() (err error) {
			start := time.Now()
			lk, err = l.Acquire(ctx, key, padlock.Options{})
			took = time.Since(start)
			return err
		})
		if err != nil {
			t.Fatalf("round %d: Acquire with one node hung: %v", i, err)
		}
		slowest = max(slowest, took)
		if err := lk.Release(ctx); err != nil {
			t.Fatalf("round %d: Release: %v", i, err)
		}
	}
	// The hung node is waited for up to the node timeout, no longer: well
	// under the clients' 10 s read timeout, which it would be waited for
	// without one (the rest is room for a loaded machine).
	if budget := rlNodeTimeout + 5*time.Second; slowest > budget {
		t.Errorf("slowest Acquire with one node hung took %v, want at most %v", slowest, budget)
	}

	// With a majority hung the attempt fails just as fast, naming the hung
	// nodes as timed out; a node's timeout is not the caller's deadline.
	// The extends need the held lock's lease (rlMaxLease, not renewed) to
	// last until they are sent; a loaded machine may stall past it, which
	// says nothing of hung nodes (ErrNotHeld then: the lock is gone), so
	// that case is run again, on fresh locks, a few times.
	hung := []padlock.NodeOutcome{padlock.NodeTimeout, padlock.NodeAgreed, padlock.NodeTimeout, padlock.NodeAgreed, padlock.NodeTimeout}
	var err, shortErr error
	for try := 1; ; try++ {
		taken := time.Now()
		held := mustAcquire(t, l, ctx, fmt.Sprintf("%s:held%d", key, try), padlock.Options{NoRenew: true})
		servers[0].Pause(t)
		servers[4].Pause(t)
		err = untilHealthyAnswer(t, hung, func() error { return held.Extend(ctx, rlMaxLease) })
		// The caller's own deadline, shorter than the node timeout, is its own.
		short, cancel := context.WithTimeout(ctx, rlNodeTimeout/5)
		shortErr = held.Extend(short, rlMaxLease)
		cancel()
		expired := errors.Is(err, padlock.ErrNotHeld) || errors.Is(shortErr, padlock.ErrNotHeld)
		if !expired || try == 3 || !leaseRanOut(taken, rlMaxLease) {
			break
		}
		t.Logf("try %d: the held lock's %v lease ran out %v after it was taken, before the extends were sent (a loaded machine): %v; %v",
			try, rlMaxLease, time.Since(taken).Round(time.Millisecond), err, shortErr)
		servers[0].Resume(t)
		servers[4].Resume(t)
	}
	if !errors.Is(err, padlock.ErrUnavailable) || errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Extend with 3 of 5 nodes hung: got %v, want ErrUnavailable and not context.DeadlineExceeded", err)
	}
	checkNodes(t, "Extend", err, "extend", servers, hung)
	if !errors.Is(shortErr, padlock.ErrUnavailable) || !errors.Is(shortErr, context.DeadlineExceeded) {
		t.Errorf("Extend past the caller's deadline: got %v, want ErrUnavailable and context.DeadlineExceeded", shortErr)
	}
	var took time.Duration
	err = untilHealthyAnswer(t, hung, func() error {
		start := time.Now()
		_, err := l.Acquire(ctx, key, padlock.Options{})
		took = time.Since(start)
		return err
	})
	if !errors.Is(err, padlock.ErrNotAcquired) || !errors.Is(err, padlock.ErrUnavailable) {
		t.Fatalf("Acquire with 3 of 5 nodes hung: got %v, want ErrNotAcquired and ErrUnavailable", err)
	}
	if errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Acquire with 3 of 5 nodes hung: got %v, matching context.DeadlineExceeded though the caller's context is live", err)
	}
	checkNodes(t, "Acquire", err, "acquire", servers, hung)
	if budget := 3*rlNodeTimeout + 5*time.Second; took > budget {
		t.Errorf("Acquire with 3 of 5 nodes hung took %v, want at most %v", took, budget)
	}

	// Resumed nodes vote again at once: they did not restart. (They may
	// still grant key to the failed attempt, whose requests waited in their
	// sockets while the releases could not reach them; the lease ends that.)
	for _, s := range servers {
		s.Resume(t)
	}
	lk := mustAcquire(t, l, ctx, key+":after", padlock.Options{})
	if err := lk.Release(ctx); err != nil {
		t.Fatalf("Release after resume: %v", err)
	}
}

// untilHealthyAnswer calls call, which fails with some nodes hung, until
// every node that want says answers (NodeAgreed) did, at most 3 times: on
// a loaded machine a healthy node may miss the node timeout too, which
// says nothing of the hung ones. It returns the last call's error.
func untilHealthyAnswer(t *testing.T, want []padlock.NodeOutcome, call func() error) error {
	t.Helper()
	var err error
	for try := 1; ; try++ {
		err = call()
		var qe *padlock.QuorumError
		if !errors.As(err, &qe) || len(qe.Nodes) != len(want) || try == 3 {
			return err
		}
		slow := false
		for i, r := range qe.Nodes {
			slow = slow || (want[i] == padlock.NodeAgreed && r.Outcome == padlock.NodeTimeout)
		}
		if !slow {
			return err
		}
		t.Logf("try %d: a healthy node missed the node timeout (a loaded machine): %v", try, err)
	}
}

// TestRedlockValidity shows that a majority that answers only after the
// lease's validity is not a lock, and that the attempt is undone on every
// node, the late ones included.
func TestRedlockValidity(t *testing.T) {
	t.Parallel()
	l, servers := startRedlock(t, 3)
	ctx := ctxFor(t)
	key := testKey(t)

	// Every attempt waits the node timeout for the hung node, longer than
	// a 50ms lease minus its drift allowance lasts.
	servers[1].Pause(t)
	_, err := l.Acquire(ctx, key, padlock.Options{TTL: 50 * time.Millisecond})
	if !errors.Is(err, padlock.ErrNotAcquired) || !strings.Contains(err.Error(), "but after") {
		t.Fatalf("Acquire whose majority came too late: got %v, want ErrNotAcquired saying it came too late", err)
	}
	for _, s := range []*redistest.Server{servers[0], servers[2]} {
		if keys := s.Keys(t); len(keys) != 0 {
			t.Errorf("node %s holds %q after the late attempt, want nothing", s, keys)
		}
	}
	// The hung node got the request too; once it wakes up, the release
	// that followed (or the 50ms lease) frees it. (Polled: a loaded
	// machine may run the resumed node's queued requests late.)
	servers[1].Resume(t)
	var keys []string
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if keys = servers[1].Keys(t); len(keys) == 0 {
			break
		}
	}
	if len(keys) != 0 {
		t.Errorf("hung node holds %q 5s after it resumed, want nothing: the 50ms lease or the release frees it", keys)
	}
}

func TestRedlockRenewal(t *testing.T) {
	t.Parallel()
	// Each renewal waits the node timeout for the hung node, so the lease
	// must be well above it: 3 s, renewed each second, leaves the renewals
	// 2 s less the node timeout to get through, room for a loaded machine
	// (with rlMaxLease's 1 s, a stall of 400 ms lost the lock). Fresh
	// nodes then vote after about 5 s, which awaitVotes waits for.
	const ttl = 3 * time.Second
	l, servers := startRedlock(t, 5, padlock.WithMaxLease(ttl), padlock.WithDefaults(padlock.Options{TTL: ttl}))
	ctx := ctxFor(t)
	key := testKey(t)

	lk := mustAcquire(t, l, ctx, key, padlock.Options{TTL: ttl})
	defer lk.Release(ctx)
	servers[1].Kill(t)
	servers[4].Pause(t)
	time.Sleep(2 * ttl)
	if err := lk.Err(); err != nil {
		t.Fatalf("lock with 3 of 5 nodes up was lost: %v", err)
	}
	// TTL asks every node within the node timeout, which a loaded machine
	// may make a healthy node miss: asked again then (untilHealthyAnswer).
	up := []padlock.NodeOutcome{padlock.NodeAgreed, padlock.NodeUnreachable, padlock.NodeAgreed, padlock.NodeAgreed, padlock.NodeTimeout}
	var d time.Duration
	err := untilHealthyAnswer(t, up, func() (err error) {
		d, err = lk.TTL(ctx)
		return err
	})
	if err != nil || d <= 0 {
		t.Fatalf("TTL() after %v of renewals = %v, %v; want the lease still held", 2*ttl, d, err)
	}

	// Losing the majority fires the lost signal, before the lease ends:
	// the trust, which the signal follows, never reaches past the lease
	// of a renewal sent before the majority was lost. (The trust is what
	// is checked, not when the signal came: a loaded machine runs the
	// timer that fires it late, as it would run the holder's work.)
	servers[0].Kill(t)
	lost := time.Now()
	var trusted time.Time
	for deadline := lost.Add(3 * ttl); ; time.Sleep(5 * time.Millisecond) {
		if u := lk.ValidUntil(); u.After(trusted) {
			trusted = u
		}
		if lk.Err() != nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("Done did not close after the majority was lost")
		}
	}
	<-lk.Done()
	if !errors.Is(lk.Err(), padlock.ErrLockLost) {
		t.Fatalf("Err() = %v, want ErrLockLost", lk.Err())
	}
	if !trusted.Before(lost.Add(ttl)) {
		t.Errorf("trusted until %v after the majority was lost, want before the %v lease could end", trusted.Sub(lost), ttl)
	}
}

// TestRedlockEveryMajority: for every set of nodes on which someone else
// holds the key, a Redlock Acquire succeeds exactly when the free nodes are
// a majority; it then holds the key on every free node, and either way it
// leaves the other owner's nodes alone and, when it fails, none of its own
// behind.
// A check of the peers' own suites (bsm/redislock, go-redsync/redsync).
func TestRedlockEveryMajority(t *testing.T) {
	for _, n := range []int{3, 5} {
		t.Run(fmt.Sprintf("%d nodes", n), func(t *testing.T) {
			// On virtual time, on in-memory nodes that vote at once.
			inBubble(t, func(t *testing.T, b *bubble) {
				l, nodes := b.redlock(n)
				ctx := context.Background()
				rdbs := make([]*redis.Client, n)
				for i, s := range nodes {
					rdbs[i] = b.clientOf(s)
				}
				need := n/2 + 1
				for mask := range 1 << n {
					key := fmt.Sprintf("%s:%d", testKey(t), mask)
					lockKey := "padlock:{" + key + "}"
					free := 0
					for i, rdb := range rdbs {
						if mask&(1<<i) == 0 {
							free++
							continue
						}
						if err := rdb.Set(ctx, lockKey, "someone-else", time.Minute).Err(); err != nil {
							t.Fatal(err)
						}
					}
					lk, err := l.Acquire(ctx, key, padlock.Options{NoRenew: true})
					if (err == nil) != (free >= need) {
						t.Fatalf("mask %0*b: %d of %d nodes free, Acquire: %v", n, mask, free, n, err)
					}
					if err != nil && !errors.Is(err, padlock.ErrNotAcquired) {
						t.Fatalf("mask %0*b: %v, want ErrNotAcquired", n, mask, err)
					}
					for i, rdb := range rdbs {
						v, _ := rdb.Get(ctx, lockKey).Result()
						switch {
						case mask&(1<<i) != 0 && v != "someone-else":
							t.Fatalf("mask %0*b: node %d holds %q, want the other owner's value untouched", n, mask, i, v)
						case mask&(1<<i) == 0 && err == nil && padlock.StoredToken(v) != lk.Token():
							t.Fatalf("mask %0*b: node %d holds %q, want the lock's token", n, mask, i, v)
						case mask&(1<<i) == 0 && err != nil && v != "":
							t.Fatalf("mask %0*b: failed Acquire left %q on node %d", n, mask, v, i)
						}
					}
					if lk != nil {
						lk.Release(ctx)
					}
				}
			})
		})
	}
}

// TestRedlockExtendReachesEveryNode: Extend resets the lease on every node.
// A check of the peers' own suites (bsm/redislock, go-redsync/redsync).
func TestRedlockExtendReachesEveryNode(t *testing.T) {
	// On virtual time, on in-memory nodes that vote at once.
	inBubble(t, func(t *testing.T, b *bubble) {
		l, servers := b.redlock(3)
		ctx := context.Background()
		key := testKey(t)
		lk := mustAcquire(t, l, ctx, key, padlock.Options{TTL: time.Second, NoRenew: true})
		defer lk.Release(ctx)
		time.Sleep(300 * time.Millisecond)
		// A loaded machine may stall past every node's timeout at once: an
		// Extend that reached no node is tried again (it changes nothing then).
		err := lk.Extend(ctx, time.Second)
		for try := 0; try < 3 && errors.Is(err, padlock.ErrUnavailable); try++ {
			err = lk.Extend(ctx, time.Second)
		}
		if err != nil {
			t.Fatal(err)
		}
		for i, s := range servers {
			ttl, err := b.clientOf(s).PTTL(ctx, "padlock:{"+key+"}").Result()
			if err != nil || ttl <= 800*time.Millisecond {
				t.Fatalf("node %d after Extend(1s): PTTL %v, %v; want the lease reset (above 800ms)", i, ttl, err)
			}
		}
	})
}
