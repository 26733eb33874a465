package padlock_test

import (
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/padlockgo/padlock"
	"github.com/padlockgo/padlock/internal/redistest"
)

// TestInspect lists the locks in Redis, this Locker's and another's, with
// keys that need escaping.
func TestInspect(t *testing.T) {
	l, srv, _ := newLocker(t)
	other := padlock.MustNew(t, srv.Client(t))
	t.Cleanup(func() { other.Close() })
	ctx := ctxFor(t)
	key := testKey(t)
	mine := mustAcquire(t, l, ctx, key+":{mine}*", padlock.Options{})
	theirs := mustAcquire(t, other, ctx, key+`:theirs\`, padlock.Options{})
	in, err := l.Inspect(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	if in.Nodes != 1 || in.NodesUp != 1 || in.Degraded || in.Truncated {
		t.Errorf("got %+v, want one node up, not degraded or truncated", in)
	}
	if len(in.Locks) != 2 {
		t.Fatalf("got %+v, want 2 locks", in.Locks)
	}
	for i, want := range []struct {
		lk    *padlock.Lock
		local bool
	}{{theirs, false}, {mine, true}} {
		got := in.Locks[i] // by key: "t" sorts before "{"
		if got.Key != want.lk.Key() || got.Token != want.lk.Token() || got.Local != want.local || got.TTL <= 0 || got.Nodes != 1 {
			t.Errorf("got %+v, want key %q, its token, local %v, a TTL, one node", got, want.lk.Key(), want.local)
		}
	}
	// The limit truncates.
	if in, err := l.Inspect(ctx, 1); err != nil || len(in.Locks) != 1 || !in.Truncated {
		t.Errorf("limit 1: got %+v, %v; want one lock, truncated", in, err)
	}
	_ = mine.Release(ctx)
	_ = theirs.Release(ctx)
	if in, err := l.Inspect(ctx, 0); err != nil || len(in.Locks) != 0 {
		t.Errorf("after release: got %+v, %v; want no locks", in, err)
	}
}

// TestInspectRedlock counts the nodes holding each lock, and calls a
// Redlock deployment with a node down but a quorum up degraded.
func TestInspectRedlock(t *testing.T) {
	t.Parallel() // nodes of its own, waiting to vote
	l, servers := startRedlock(t, 3)
	ctx := ctxFor(t)
	lk := mustAcquire(t, l, ctx, testKey(t), padlock.Options{})
	defer lk.Release(ctx)
	in, err := l.Inspect(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(in.Locks) != 1 || in.Locks[0].Nodes != 3 || in.Need != 2 || in.Degraded || !in.Locks[0].Local {
		t.Errorf("all up: got %+v, locks %+v; want one local lock on 3 nodes, need 2, not degraded", in, in.Locks)
	}
	servers[0].Kill(t)
	in, err = l.Inspect(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	if in.NodesUp != 2 || !in.Degraded || len(in.Locks) != 1 || in.Locks[0].Nodes != 2 || len(in.Errors) != 1 {
		t.Errorf("one node down: got %+v, locks %+v; want 2 up, degraded, the lock on 2 nodes, one error", in, in.Locks)
	}
	servers[1].Kill(t)
	if _, err := l.Inspect(ctx, 0); !errors.Is(err, padlock.ErrUnavailable) {
		t.Errorf("two nodes down: got %v, want ErrUnavailable", err)
	}
}

// TestInspectCluster lists the locks of every master.
func TestInspectCluster(t *testing.T) {
	t.Parallel() // a Cluster of its own
	c := redistest.StartCluster(t, 3)
	l := padlock.MustNew(t, c.Client(t))
	t.Cleanup(func() { l.Close() })
	ctx := ctxFor(t)
	var keys []string
	for i := range 12 {
		k := fmt.Sprintf("%s:%d", testKey(t), i)
		keys = append(keys, k)
		lk := mustAcquire(t, l, ctx, k, padlock.Options{})
		defer lk.Release(ctx)
	}
	in, err := l.Inspect(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, x := range in.Locks {
		got = append(got, x.Key)
	}
	slices.Sort(keys)
	if in.Nodes != 3 || in.NodesUp != 3 || !slices.Equal(got, keys) {
		t.Errorf("got %d of %d masters, locks %q; want 3 of 3, locks %q", in.NodesUp, in.Nodes, got, keys)
	}
}
