package padlock

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/padlockgo/padlock/internal/redistest"
	"github.com/redis/go-redis/v9"
)

// holdRelease holds back, by a go-redis hook on one node's client, the
// first release command sent while it is armed: not sent now (the test
// sends it later, as a network that delayed it would); the caller sees a
// read timeout.
type holdRelease struct {
	mu    sync.Mutex
	armed bool
	held  []any
}

func (h *holdRelease) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *holdRelease) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		args := cmd.Args()
		release := len(args) > 1 && (args[0] == "evalsha" && args[1] == plainScripts.release.Hash() || args[0] == "eval" && args[1] == plainScripts.release.src)
		h.mu.Lock()
		hold := release && h.armed
		if hold {
			h.armed, h.held = false, append([]any(nil), args...)
		}
		h.mu.Unlock()
		if hold {
			cmd.SetErr(errFaultTimeout)
			return errFaultTimeout
		}
		return next(ctx, cmd)
	}
}

func (h *holdRelease) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// TestRedlockAttemptAfterBusyHasItsOwnToken: a waiting Acquire's attempt
// finds the key held on a majority and takes the free node, and its
// clean-up there is delayed. The holder lets go, and the next attempt
// takes the lock. When the delayed clean-up lands it must change nothing
// of that lock: a refused attempt is a grant of its own. Under the same
// token, the next attempt would take the node the first one holds, and
// the clean-up would delete it there behind the holder's back ("Every
// grant is its own").
func TestRedlockAttemptAfterBusyHasItsOwnToken(t *testing.T) {
	t.Parallel()
	redistest.Require(t)
	servers := redistest.StartN(t, 3)
	time.Sleep(rlNodesVote)
	hook := &holdRelease{}
	clients := make([]redis.UniversalClient, len(servers))
	for i, s := range servers {
		c := s.Client(t, func(o *redis.Options) {
			o.ContextTimeoutEnabled = true
			o.ReadTimeout, o.WriteTimeout = 10*time.Second, 10*time.Second
		})
		if i == 2 {
			c.AddHook(hook)
		}
		clients[i] = c
	}
	l, err := NewRedlock(clients, WithMaxLease(rlMaxLease), WithNodeTimeout(rlNodeTimeout), WithDefaults(Options{TTL: rlMaxLease}))
	if err != nil {
		t.Fatalf("NewRedlock: %v", err)
	}
	t.Cleanup(func() { _ = l.Close() })
	awaitVotes(t, l)

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
	hook.mu.Lock()
	hook.armed = true
	hook.mu.Unlock()
	lk, err := l.Acquire(ctx, key, Options{TTL: rlMaxLease, Wait: 10 * time.Second, NoRenew: true})
	if err != nil {
		t.Fatalf("Acquire: %v", err)
	}
	defer lk.Release(ctx)
	hook.mu.Lock()
	late := hook.held
	hook.mu.Unlock()
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
