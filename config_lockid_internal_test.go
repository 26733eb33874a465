package padlock

import (
	"context"
	"errors"
	"net"
	"os"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/padlockgo/padlock/internal/redistest"
	"github.com/redis/go-redis/v9"
)

// A store sends a grant-making command under an identity once: a second
// attempt under it is refused before it reaches Redis, and the first
// attempt's lock is untouched ("Every attempt sends a token no earlier
// attempt sent").
func TestStoreRefusesAnIdentitySentBefore(t *testing.T) {
	t.Parallel()
	l, _, rdb := startLocker(t)
	ctx := ctxFor(t)
	key := testKey(t)
	id := mintID(l.keys, key, Options{TTL: time.Minute})
	if g, err := l.store.acquire(ctx, id, nil); err != nil || g.first == 0 {
		t.Fatalf("first attempt: %+v, %v; want a grant", g, err)
	}
	// The holder lets go; an attempt under the same identity would take
	// the key again, and a late clean-up of the first would delete it.
	if ok, err := l.store.release(ctx, id, giveBack{}); !ok || err != nil {
		t.Fatalf("release: %v, %v", ok, err)
	}
	g, err := l.store.acquire(ctx, id, nil)
	if !errors.Is(err, errTokenReused) {
		t.Fatalf("second attempt under the same identity: %+v, %v; want errTokenReused", g, err)
	}
	if maybeSent(err) {
		t.Error("maybeSent(errTokenReused) = true: a clean-up would be sent for a command never sent")
	}
	if n, err := rdb.Exists(ctx, l.keys.lock(key)).Result(); err != nil || n != 0 {
		t.Errorf("the refused attempt reached Redis: the key exists (%d, %v)", n, err)
	}
}

// Each attempt of an acquisition gets an identity of its own: the one
// Acquire made until an attempt sends it, a new one after.
func TestEveryAttemptBeginsWithItsOwnIdentity(t *testing.T) {
	t.Parallel()
	l, _, _ := startLocker(t)
	a := &acquisition{l: l, key: "k", o: Options{TTL: time.Second}, id: mintID(l.keys, "k", Options{TTL: time.Second})}
	first := a.id
	a.begin()
	if a.id != first {
		t.Fatal("begin replaced an identity no attempt had sent")
	}
	seen := map[string]bool{}
	for range 5 {
		if !a.id.claim() {
			t.Fatal("claim of a new identity refused")
		}
		seen[a.id.token] = true
		a.begin()
		if a.id.claimed || seen[a.id.token] {
			t.Fatalf("after an attempt, begin kept a sent identity (token %s)", a.id.token)
		}
	}
}

// strandHook makes the first acquire attempt on key, and the command that
// follows it on key (the cleanup release of that attempt), fail as if
// their replies were lost, without sending them: the test sends them
// later, as a network that delivers a stalled connection's bytes after a
// new connection's would.
type strandHook struct {
	key string

	mu    sync.Mutex
	held  [][]any
	phase int
}

func (h *strandHook) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *strandHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		args := cmd.Args()
		onKey := len(args) > 3 && args[0] == "evalsha" && args[3] == h.key
		h.mu.Lock()
		strand := onKey && h.phase < 2 && (h.phase == 1 || attemptKeys(args[2]))
		if strand {
			h.phase++
			h.held = append(h.held, args)
		}
		h.mu.Unlock()
		if strand {
			err := &net.OpError{Op: "read", Net: "tcp", Err: os.ErrDeadlineExceeded}
			cmd.SetErr(err)
			return err
		}
		return next(ctx, cmd)
	}
}

// attemptKeys reports whether n, the number of keys of an EVALSHA, is an
// attempt's: the lock key and its fence counter, and the key's bids and
// lost set when the attempt leaves a bid (wait_bid.go, lua/claim.lua).
func attemptKeys(n any) bool {
	switch n {
	case 2, 3, 4, int64(2), int64(3), int64(4):
		return true
	}
	return false
}

func (h *strandHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// TestLostAttemptRunLateChangesNothing: an attempt of a waiting Acquire is
// lost, and so is the release that cleans up after it; the next attempt
// takes the lock. Both lost commands may still run after that (their bytes
// were on the way). The cleanup release then deletes the key the new lock
// holds, and another Locker takes it: the holder must have been told, or
// must not have been handed the lock.
// Regression: the clean-up, run late on a reused token, deleted the new lock.
func TestLostAttemptRunLateChangesNothing(t *testing.T) {
	srv := redistest.Start(t)
	rdb := srv.Client(t)
	l := mustNew(t, rdb)
	defer l.Close()
	ctx := context.Background()
	const key = "stranded"
	hook := &strandHook{key: l.RedisKey(key)}
	rdb.AddHook(hook)
	lk, err := l.Acquire(ctx, key, Options{TTL: 10 * time.Second, Wait: 5 * time.Second})
	if err != nil {
		t.Fatalf("Acquire: %v", err)
	}
	defer lk.Release(ctx)
	hook.mu.Lock()
	held := hook.held
	hook.mu.Unlock()
	if len(held) != 2 {
		t.Fatalf("stranded %d commands, want the lost attempt and its cleanup", len(held))
	}
	// The stranded bytes arrive: the attempt, then its cleanup.
	plain := srv.Client(t)
	for _, sc := range []*script{plainScripts.acquire, plainScripts.release} {
		if err := sc.Load(ctx, plain).Err(); err != nil {
			t.Fatal(err)
		}
	}
	for _, args := range held {
		if err := plain.Do(ctx, args...).Err(); err != nil {
			t.Fatalf("late %v: %v", args[0], err)
		}
	}
	other := mustNew(t, srv.Client(t))
	defer other.Close()
	theirs, err := other.Acquire(ctx, key, Options{})
	if err != nil {
		t.Logf("the key stayed held: %v", err)
		return
	}
	defer theirs.Release(ctx)
	if lk.Err() == nil {
		t.Fatalf("another Locker took the key (fence %d) while the holder's lock (fence %d) reports held until %v",
			theirs.Fence(), lk.Fence(), time.Until(lk.ValidUntil()).Round(time.Millisecond))
	}
}

// TestLostAttemptRunAfterExtendChangesNothing: a lost attempt of the
// Acquire that took the lock runs after an Extend to a longer lease.
// acquire.lua takes the lock anew for its own token, with the Acquire's
// shorter lease: the holder must not go on trusting the Extend's.
// It runs in a bubble.
// Regression: the attempt, run late on the holder's token, cut the lease.
func TestLostAttemptRunAfterExtendChangesNothing(t *testing.T) {
	inBubble(t, func(t *testing.T, b *bubble) {
		rdb := b.client()
		l := b.locker(rdb)
		ctx := context.Background()
		const key = "stranded"
		const ttl = 500 * time.Millisecond
		hook := &strandHook{key: l.RedisKey(key)}
		rdb.AddHook(hook)
		lk, err := l.Acquire(ctx, key, Options{TTL: ttl, Wait: 5 * time.Second})
		if err != nil {
			t.Fatalf("Acquire: %v", err)
		}
		defer lk.Release(ctx)
		if err := lk.Extend(ctx, 10*time.Second); err != nil {
			t.Fatalf("Extend: %v", err)
		}
		hook.mu.Lock()
		attempt := hook.held[0] // its cleanup stays lost
		hook.mu.Unlock()
		plain := b.client()
		if err := plainScripts.acquire.Load(ctx, plain).Err(); err != nil {
			t.Fatal(err)
		}
		if err := plain.Do(ctx, attempt...).Err(); err != nil {
			t.Fatalf("late attempt: %v", err)
		}
		time.Sleep(ttl + 100*time.Millisecond)
		contend(t, b.client(), key, lk, 0)
	})
}

// TestRedlockAttemptAfterBusyHasItsOwnToken: a waiting Acquire's attempt
// finds the key held on a majority and takes the free node, and its
// clean-up there is delayed. The holder lets go, and the next attempt
// takes the lock. When the delayed clean-up lands it must change nothing
// of that lock: a refused attempt is a grant of its own. Under the same
// token, the next attempt would take the node the first one holds, and
// the clean-up would delete it there behind the holder's back ("Every
// grant is its own").
// Regression: on a kept token, the late clean-up deleted the holder's node.
func TestRedlockAttemptAfterBusyHasItsOwnToken(t *testing.T) {
	t.Parallel()
	hook := &holdScript{s: plainScripts.release}
	l, servers := redlockHooked(t, map[int]redis.Hook{2: hook})

	ctx := context.Background()
	key := testKey(t)
	stored := l.keys.lock(key)
	// Another owner holds the key on nodes 0 and 1, for a short lease.
	const held = 500 * time.Millisecond
	for _, s := range servers[:2] {
		if err := s.Client(t).Set(ctx, stored, "another|0", held).Err(); err != nil {
			t.Fatalf("SET on %s: %v", s, err)
		}
	}
	hook.arm()
	lk, err := l.Acquire(ctx, key, Options{TTL: rlMaxLease, Wait: 10 * time.Second, NoRenew: true})
	if err != nil {
		t.Fatalf("Acquire: %v", err)
	}
	defer lk.Release(ctx)
	late := hook.late()
	if late == nil {
		t.Fatal("no clean-up was sent to node 2: the first attempt did not take it")
	}

	holding := func() []int {
		var on []int
		for i, s := range servers {
			if v, err := s.Client(t).Get(ctx, stored).Result(); err == nil && tokenOf(v) == lk.Token() {
				on = append(on, i)
			}
		}
		return on
	}
	before := holding()
	raw := servers[2].Client(t)
	if err := plainScripts.release.Load(ctx, raw).Err(); err != nil {
		t.Fatalf("SCRIPT LOAD on %s: %v", servers[2], err)
	}
	if err := raw.Do(ctx, late...).Err(); err != nil {
		t.Fatalf("the delayed clean-up on node 2: %v", err)
	}
	if after := holding(); !slices.Equal(after, before) {
		t.Errorf("the lock is held on nodes %v before the busy attempt's delayed clean-up, on %v after: the clean-up of another attempt changed it", before, after)
	}
	if err := lk.Err(); err != nil {
		t.Errorf("Err() = %v, want nil", err)
	}
}
