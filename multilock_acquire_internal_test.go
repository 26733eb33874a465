package padlock

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/padlockgo/padlock/internal/hashslot"
	"github.com/padlockgo/padlock/internal/redistest"
	"github.com/redis/go-redis/v9"
)

// On Cluster, keys that share a hash slot are taken by one script: one
// group, all or none. It runs beside other tests: its Cluster is its
// own, and nothing in it is timed.
func TestAcquireAllClusterSameSlotOneCall(t *testing.T) {
	t.Parallel()
	_, l := startCluster(t)
	ctx := ctxFor(t)
	// Two keys whose locks hash to one slot, and one elsewhere.
	bySlot := map[int]string{}
	var same []string
	for n := 0; same == nil; n++ {
		k := fmt.Sprintf("acct:%d", n)
		s := hashslot.Slot(l.keys.lock(k))
		if other, ok := bySlot[s]; ok {
			same = []string{other, k}
		}
		bySlot[s] = k
	}
	third := "acct:other"
	m, err := l.AcquireAll(ctx, []string{same[1], third, same[0]}, Options{})
	if err != nil {
		t.Fatalf("AcquireAll: %v", err)
	}
	defer m.Release(ctx)
	if len(m.groups) != 2 {
		t.Fatalf("groups = %v, want 2 (the shared slot's keys together)", m.groups)
	}
	for _, g := range m.groups {
		if len(g) == 2 && (m.keys[g[0]] != same[0] && m.keys[g[0]] != same[1] || m.keys[g[1]] != same[0] && m.keys[g[1]] != same[1]) {
			t.Errorf("group of two holds %q and %q, want %q", m.keys[g[0]], m.keys[g[1]], same)
		}
	}
	if f0, f1 := m.Fence(same[0]), m.Fence(same[1]); f0 <= 0 || f1 <= 0 || f0 == f1 {
		t.Errorf("fences of the same-slot keys = %d, %d; want distinct and positive", f0, f1)
	}
}

// Every attempt of AcquireAll at the set is a grant of its own (mintID):
// a rollback of an earlier attempt that Redis runs late, after a later
// attempt took the keys, names a token nobody holds and changes nothing.
// Each test below holds the rollback back with a go-redis hook and sends
// it once the set is taken, as a network that delayed it would.

// acquireAllAround runs AcquireAll, then sends the commands hooks held
// back: a rollback of an earlier attempt that Redis runs late, after the
// set was taken.
func acquireAllAround(t *testing.T, l *Locker, keys []string, o Options, hooks []*holdScript, send func(i int, late []any)) *MultiLock {
	t.Helper()
	m, err := l.AcquireAll(context.Background(), keys, o)
	if err != nil {
		t.Fatalf("AcquireAll: %v", err)
	}
	t.Cleanup(func() { _ = m.Release(context.Background()) })
	for i, h := range hooks {
		late := h.late()
		if late == nil {
			t.Fatalf("no rollback was held back by hook %d: the first attempt did not take the first key, or found nothing busy", i)
		}
		send(i, late)
	}
	return m
}

// TestAcquireAllLateRollbackLeavesTheSetOnCluster: on Cluster, an
// AcquireAll takes the first slot's key, finds the second slot's busy and
// rolls the first back, and that rollback's reply is lost (Redis runs it
// later). The next attempt takes both keys; when the late rollback lands it
// must leave them to the set. It runs in a bubble, on a Cluster in
// memory.
// Regression: a kept token let the late rollback delete a key: two holders.
func TestAcquireAllLateRollbackLeavesTheSetOnCluster(t *testing.T) {
	inBubble(t, func(t *testing.T, b *bubble) {
		cluster := b.cluster(3)
		hook := &holdScript{s: multiSharded.release}
		client := cluster()
		client.AddHook(hook)
		l := b.locker(client)
		other := b.locker(cluster())
		raw := cluster()
		ctx := ctxFor(t)

		// Two keys in two slots; first is taken first (the lower slot).
		prefix := testKey(t)
		var first, second string
		for i := 0; first == "" || second == ""; i++ {
			k := prefix + ":" + string(rune('a'+i%26)) + string(rune('a'+i/26))
			if first == "" {
				first = k
				continue
			}
			if hashslot.Slot(l.keys.lock(k)) != hashslot.Slot(l.keys.lock(first)) {
				second = k
			}
		}
		if hashslot.Slot(l.keys.lock(first)) > hashslot.Slot(l.keys.lock(second)) {
			first, second = second, first
		}

		// Another owner holds the second key for a short lease.
		if err := raw.Set(ctx, l.keys.lock(second), "another|0", 300*time.Millisecond).Err(); err != nil {
			t.Fatalf("SET: %v", err)
		}
		hook.arm()
		// The first attempt's lease on the first key (2 s) holds the next
		// attempts back until it ends: the rollback never ran.
		m := acquireAllAround(t, l, []string{second, first}, Options{TTL: 2 * time.Second, Wait: 20 * time.Second, NoRenew: true}, []*holdScript{hook}, func(_ int, late []any) {
			if err := raw.Do(ctx, late...).Err(); err != nil {
				t.Fatalf("the late rollback: %v", err)
			}
		})

		i, _ := slices.BinarySearch(m.keys, first)
		if v, err := raw.Get(ctx, l.keys.lock(first)).Result(); err != nil || tokenOf(v) != m.members[i].Token() {
			t.Errorf("after the late rollback of an earlier attempt, %s holds %q (%v), want the set's token %q", first, v, err, m.members[i].Token())
		}
		if lk, err := other.Acquire(ctx, first, Options{}); err == nil {
			_ = lk.Release(ctx)
			t.Errorf("another Locker took %s while the set holds it (Err() = %v)", first, m.Err())
		} else if !errors.Is(err, ErrNotAcquired) {
			t.Errorf("another Locker's Acquire: %v, want ErrNotAcquired", err)
		}
		if err := m.Err(); err != nil {
			t.Errorf("Err() = %v, want nil", err)
		}
	})
}

// TestAcquireAllLateRollbackLeavesTheSetOnRedlock: the same on Redlock,
// where AcquireAll takes the keys one by one in sorted order: the first
// key's rollback is held back on two of three nodes, and runs there after
// the next attempt took the set. The set's keys must stay on a majority.
// Regression: a kept token let the late rollback delete a key: two holders.
func TestAcquireAllLateRollbackLeavesTheSetOnRedlock(t *testing.T) {
	t.Parallel()
	hooks := []*holdScript{{s: plainScripts.release}, {s: plainScripts.release}}
	l, servers := redlockHooked(t, map[int]redis.Hook{0: hooks[0], 1: hooks[1]})

	ctx := ctxFor(t)
	first, second := testKey(t)+":a", testKey(t)+":b"
	for _, s := range servers {
		if err := s.Client(t).Set(ctx, l.keys.lock(second), "another|0", 300*time.Millisecond).Err(); err != nil {
			t.Fatalf("SET on %s: %v", s, err)
		}
	}
	for _, h := range hooks {
		h.arm()
	}
	m := acquireAllAround(t, l, []string{second, first}, Options{TTL: rlMaxLease, Wait: 20 * time.Second, NoRenew: true}, hooks, func(i int, late []any) {
		if err := servers[i].Client(t).Do(ctx, late...).Err(); err != nil {
			t.Fatalf("the late rollback on node %d: %v", i, err)
		}
	})
	token := m.members[0].Token()
	holding := func() int {
		on := 0
		for _, s := range servers {
			if v, err := s.Client(t).Get(ctx, l.keys.lock(first)).Result(); err == nil && tokenOf(v) == token {
				on++
			}
		}
		return on
	}
	if on := holding(); on < 2 {
		t.Errorf("after the late rollbacks of an earlier attempt, %s is held under the set's token on %d of 3 nodes: below a majority while Err() = %v", first, on, m.Err())
	}
}

// TestCloseWakesAcquireAllBetweenFailedAttempts: an AcquireAll whose
// attempt got no answer waits out o.Retry's backoff outside every line;
// Close must end it at once with ErrClosed, as it ends every waiter, not
// when the backoff is over.
func TestCloseWakesAcquireAllBetweenFailedAttempts(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	hook := &holdScript{s: multiPlain.acquire}
	client := srv.Client(t)
	client.AddHook(hook)
	l := mustNew(t, client)
	t.Cleanup(func() { _ = l.Close() })
	hook.arm()

	done := make(chan error, 1)
	go func() {
		_, err := l.AcquireAll(context.Background(), []string{testKey(t) + ":a", testKey(t) + ":b"}, Options{Wait: time.Hour, Retry: LinearBackoff(time.Hour)})
		done <- err
	}()
	// The attempt failed, and AcquireAll sleeps out its backoff.
	for !sleepingIn("(*multiAcquisition).waitTurn") {
		time.Sleep(time.Millisecond)
	}
	_ = l.Close()
	select {
	case err := <-done:
		if !errors.Is(err, ErrClosed) {
			t.Errorf("AcquireAll after Close: %v, want ErrClosed", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("AcquireAll still waits 30 s after Close: it waits out its hour of backoff")
	}
}

// sleepingIn reports whether a goroutine is blocked in a select inside fn.
func sleepingIn(fn string) bool {
	buf := make([]byte, 1<<20)
	buf = buf[:runtime.Stack(buf, true)]
	for _, g := range strings.Split(string(buf), "\n\n") {
		if strings.Contains(g, "[select") && strings.Contains(g, fn) {
			return true
		}
	}
	return false
}

// A set's release grants each key a waiter asked for to the bid of the
// Locker next in turn, as a single key's release does: the waiters of a
// key that sets take too keep their turns (a waiter waits at most one
// turn of each other process). (A set's release once deleted its keys,
// and the waiters it woke raced for them.)
func TestSetReleaseGrantsTheKey(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	gate := &gateHook{open: make(chan struct{})}
	ac := srv.Client(t)
	ac.AddHook(gate)
	a := mustNew(t, ac)
	defer a.Close()
	b := mustNew(t, srv.Client(t))
	defer b.Close()
	rdb := srv.Client(t)
	ctx := ctxFor(t)
	key := testKey(t)
	set, err := b.AcquireAll(ctx, []string{key, key + ":other"}, Options{TTL: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan *Lock, 1)
	go func() {
		lk, err := a.Acquire(ctx, key, Options{TTL: time.Minute, Wait: 30 * time.Second})
		if err != nil {
			t.Errorf("a's waiter: %v", err)
		}
		got <- lk
	}()
	waitParked(t, a, key, 1)
	bids := a.keys.lock(key) + ":bids"
	var bid string
	for deadline := time.Now().Add(10 * time.Second); bid == "" && time.Now().Before(deadline); time.Sleep(2 * time.Millisecond) {
		bid, _ = rdb.HGet(ctx, bids, a.id).Result()
	}
	if bid == "" {
		t.Fatal("a's waiter placed no bid")
	}
	token := bid[strings.LastIndexByte(bid, ' ')+1:]
	// a's claim waits at the gate, so that Redis shows what the release
	// did.
	gate.armed.Store(true)
	if err := set.Release(ctx); err != nil {
		t.Fatal(err)
	}
	v, err := rdb.Get(ctx, a.keys.lock(key)).Result()
	if err != nil || !strings.HasPrefix(v, token+"|") {
		t.Errorf("after the set's release the key holds %q (%v); want the grant to a's bid, %s", v, err, token)
	}
	close(gate.open)
	if lk := <-got; lk != nil {
		_ = lk.Release(ctx)
	}
}

// gateHook holds every command of its client, once armed, until open is
// closed.
type gateHook struct {
	armed atomic.Bool
	open  chan struct{}
}

func (h *gateHook) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *gateHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if h.armed.Load() {
			<-h.open
		}
		return next(ctx, cmd)
	}
}

func (h *gateHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		if h.armed.Load() {
			<-h.open
		}
		return next(ctx, cmds)
	}
}

// TestSetRollbackSentAgainWhenUnanswered: a waiting AcquireAll's attempt
// takes its keys and its reply is lost, the rollback that follows never
// reaches Redis, and the wait ends there (no later attempt of the set
// takes its own keys over). The rollback is sent again until Redis
// answers it, so the keys do not stay held, for nobody, under the lost
// attempt's token for the rest of its lease. (Sent once, they stayed
// held for the lease.)
func TestSetRollbackSentAgainWhenUnanswered(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	client := srv.Client(t)
	drop := &holdScript{s: multiPlain.release}
	lose := &loseAcquireReply{sha: multiPlain.acquire.Hash(), fn: drop.arm}
	client.AddHook(lose)
	client.AddHook(drop)
	l := mustNew(t, client)
	t.Cleanup(func() { _ = l.Close() })
	rdb := srv.Client(t)
	ctx := ctxFor(t)
	keys := []string{testKey(t) + ":a", testKey(t) + ":b"}
	// Loaded, so that the attempt lost runs as EVALSHA.
	for _, s := range []*script{multiPlain.acquire, multiPlain.release} {
		if err := rdb.ScriptLoad(ctx, s.src).Err(); err != nil {
			t.Fatal(err)
		}
	}

	lose.armed.Store(true)
	// A wait that the retry's hour of backoff outlasts: one attempt.
	m, acqErr := l.AcquireAll(ctx, keys, Options{TTL: time.Minute, Wait: 200 * time.Millisecond, Retry: LinearBackoff(time.Hour)})
	if acqErr == nil {
		m.Release(ctx)
		t.Fatal("AcquireAll got the keys from an attempt whose reply was lost; want an error")
	}
	if lose.armed.Load() || drop.late() == nil {
		t.Fatalf("the attempt's reply lost: %v, its rollback held back: %v; want both (the test lost neither)", !lose.armed.Load(), drop.late() != nil)
	}
	// Sent again behind the AcquireAll, which returned at its wait's end,
	// within a clean-up's bound.
	deadline := time.Now().Add(cleanupTimeout + time.Second)
	for _, k := range keys {
		for {
			v, err := rdb.Get(ctx, l.RedisKey(k)).Result()
			if err == redis.Nil {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s holds %q (%v, PTTL %v) %v after the AcquireAll returned %v; want it free: the rollback sent again", k, v, err, rdb.PTTL(ctx, l.RedisKey(k)).Val(), cleanupTimeout+time.Second, acqErr)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
}
