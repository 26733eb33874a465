package padlock

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

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
