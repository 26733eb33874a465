package padlock

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/padlockgo/padlock/internal/redistest"
	"github.com/redis/go-redis/v9"
)

// Tests that Redlock's lease changes are ordered on every node: a change
// that a majority confirmed is in force on that majority, whatever copies
// of earlier changes reach those nodes later, so the lease the client
// trusts is one a majority of nodes holds.

// nodeFault decides, by a go-redis hook on one node's client, the fate of
// the next extend command sent to that node: held back (not sent now; the
// test sends it later, as a network that delayed it would) or run with its
// reply lost. The caller sees a read timeout either way.
type nodeFault struct {
	mu   sync.Mutex
	next string  // "hold" or "lose" for the next extend; "" runs it
	held [][]any // the extends held back, to send late
}

func (f *nodeFault) set(mode string) {
	f.mu.Lock()
	f.next = mode
	f.mu.Unlock()
}

func (f *nodeFault) DialHook(next redis.DialHook) redis.DialHook { return next }

func (f *nodeFault) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if !extendCall(cmd.Args(), 0) {
			return next(ctx, cmd)
		}
		f.mu.Lock()
		mode := f.next
		f.next = ""
		if mode == "hold" {
			f.held = append(f.held, append([]any(nil), cmd.Args()...))
		}
		f.mu.Unlock()
		switch mode {
		case "hold":
			cmd.SetErr(errFaultTimeout)
			return errFaultTimeout
		case "lose":
			_ = next(ctx, cmd)
			cmd.SetErr(errFaultTimeout)
			return errFaultTimeout
		}
		return next(ctx, cmd)
	}
}

func (f *nodeFault) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// sendHeld sends the extends held back on srv now, late, and returns
// their answers (1 applied, 2 refused as older than the change in force).
func (f *nodeFault) sendHeld(t *testing.T, srv *redistest.Server) []int64 {
	t.Helper()
	f.mu.Lock()
	held := f.held
	f.held = nil
	f.mu.Unlock()
	raw := srv.Client(t)
	ctx := context.Background()
	if err := extendScript.Load(ctx, raw).Err(); err != nil {
		t.Fatalf("SCRIPT LOAD on %s: %v", srv, err)
	}
	var got []int64
	for _, args := range held {
		n, err := raw.Do(ctx, args...).Int64()
		if err != nil {
			t.Fatalf("late extend on %s: %v", srv, err)
		}
		got = append(got, n)
	}
	return got
}

// majorityHolds fails t unless at least need of servers hold key with a
// lease that lasts at least until lk's ValidUntil.
func majorityHolds(t *testing.T, servers []*redistest.Server, key string, lk *Lock, need int, when string) {
	t.Helper()
	ctx := context.Background()
	pttls := make([]time.Duration, len(servers))
	for i, s := range servers {
		ms, err := s.Client(t).PTTL(ctx, key).Result()
		if err != nil {
			t.Fatalf("PTTL on %s: %v", s, err)
		}
		pttls[i] = ms
	}
	// Asked after the nodes answered: the trusted remainder can only have
	// shrunk since.
	trusted := time.Until(lk.ValidUntil())
	holding := 0
	for _, d := range pttls {
		if d >= trusted {
			holding++
		}
	}
	if holding < need {
		t.Errorf("%s: %d of %d nodes hold the lease the client trusts (%v left), want %d; the nodes' leases: %v",
			when, holding, len(servers), trusted.Round(time.Millisecond), need, pttls)
	}
}

// TestRedlockLeaseChangesOrderedPerNode: a short Extend reaches two nodes
// and is held back on its way to the third; a long Extend reaches that
// third node and one other, and is lost on the way to the last. The short
// one's late copy then reaches the third node. Unordered, it would cut
// that node's lease short, leaving a majority shorter than the lease the
// client trusts (the long one, which a majority confirmed); numbered, the
// node refuses it.
func TestRedlockLeaseChangesOrderedPerNode(t *testing.T) {
	t.Parallel()
	redistest.Require(t)
	const maxLease = 3 * time.Second
	servers := redistest.StartAged(t, 3, maxLease+2*time.Second) // the nodes vote once up for the max lease
	faults := make([]*nodeFault, len(servers))
	clients := make([]redis.UniversalClient, len(servers))
	for i, s := range servers {
		faults[i] = &nodeFault{}
		c := s.Client(t, func(o *redis.Options) {
			o.ContextTimeoutEnabled = true
			o.ReadTimeout, o.WriteTimeout = 10*time.Second, 10*time.Second
		})
		c.AddHook(faults[i])
		clients[i] = c
	}
	l, err := NewRedlock(clients, WithMaxLease(maxLease), WithNodeTimeout(time.Second), WithDefaults(Options{TTL: maxLease}))
	if err != nil {
		t.Fatalf("NewRedlock: %v", err)
	}
	t.Cleanup(func() { _ = l.Close() })
	awaitVotes(t, l)

	ctx := context.Background()
	key := testKey(t)
	lk, err := l.Acquire(ctx, key, Options{TTL: maxLease, NoRenew: true})
	if err != nil {
		t.Fatalf("Acquire: %v", err)
	}
	defer lk.Release(ctx)
	stored := l.keys.lock(key)

	// The short change: held back on its way to node 0, confirmed by 1
	// and 2.
	faults[0].set("hold")
	if err := lk.Extend(ctx, 500*time.Millisecond); err != nil {
		t.Fatalf("Extend(500ms) confirmed by nodes 1 and 2: %v", err)
	}
	// The long change: confirmed by 0 and 1, lost on the way to 2.
	faults[2].set("hold")
	if err := lk.Extend(ctx, maxLease); err != nil {
		t.Fatalf("Extend(%v) confirmed by nodes 0 and 1: %v", maxLease, err)
	}
	majorityHolds(t, servers, stored, lk, 2, "after the long Extend")

	// The short change's copy reaches node 0 late.
	if got := faults[0].sendHeld(t, servers[0]); len(got) != 1 || got[0] != 2 {
		t.Fatalf("the short Extend's late copy on node 0 answered %v, want [2] (refused: a later change is in force)", got)
	}
	majorityHolds(t, servers, stored, lk, 2, "after the short Extend's late copy")
	if left := time.Until(lk.ValidUntil()); left < maxLease/2 {
		t.Errorf("trusted lease after the long Extend: %v left, want more than %v", left, maxLease/2)
	}

	// A change no majority confirmed (held back on two nodes) no longer
	// bounds the trust once a later change is confirmed: the nodes that
	// confirmed the later one refuse it.
	faults[0].set("hold")
	faults[2].set("hold")
	if err := lk.Extend(ctx, 500*time.Millisecond); err == nil {
		t.Fatal("Extend(500ms) that only node 1 answered succeeded, want an error")
	}
	if err := lk.Extend(ctx, maxLease); err != nil {
		t.Fatalf("Extend(%v) on every node: %v", maxLease, err)
	}
	if left := time.Until(lk.ValidUntil()); left < maxLease/2 {
		t.Errorf("trusted lease after a lost short Extend and a confirmed long one: %v left, want more than %v (the lost one was refused wherever the long one ran)", left, maxLease/2)
	}
	for _, i := range []int{0, 2} {
		// Node 2 also still has the first long Extend's copy: refused too.
		got := faults[i].sendHeld(t, servers[i])
		if len(got) == 0 || slices.ContainsFunc(got, func(n int64) bool { return n != 2 }) {
			t.Errorf("the late copies on node %d answered %v, want every one 2 (refused)", i, got)
		}
	}
	majorityHolds(t, servers, stored, lk, 2, "after the lost short Extend's late copies")
	if err := lk.Err(); err != nil {
		t.Errorf("Err() = %v, want nil", err)
	}
	if err := lk.Release(ctx); err != nil && !errors.Is(err, ErrNotHeld) {
		t.Errorf("Release: %v", err)
	}
}
