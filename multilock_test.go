package padlock_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/padlockgo/padlock"
	"github.com/padlockgo/padlock/internal/hashslot"
	"github.com/padlockgo/padlock/internal/redistest"
	"github.com/redis/go-redis/v9"
)

// TestAcquireAllRenewsAndExtendsEveryKey: the watchdog renews every key
// of a set, held past several leases, no key expiring, and Extend resets
// them all (on virtual time: a renewal late on a loaded machine is not
// what this checks).
func TestAcquireAllRenewsAndExtendsEveryKey(t *testing.T) {
	inBubble(t, func(t *testing.T, b *bubble) {
		l, rdb := b.locker()
		ctx := context.Background()
		keys := []string{"acct:1", "acct:2", "acct:3", "acct:4"}
		m, err := l.AcquireAll(ctx, keys, padlock.Options{TTL: 300 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		defer m.Release(ctx)
		time.Sleep(time.Second)
		if m.Err() != nil {
			t.Fatalf("Err() = %v after three leases, want nil (renewed)", m.Err())
		}
		for _, k := range keys {
			if n := rdb.Exists(ctx, l.RedisKey(k)).Val(); n != 1 {
				t.Fatalf("key %q not held after three leases", k)
			}
		}
		if err := m.Extend(ctx, time.Minute); err != nil {
			t.Fatalf("Extend: %v", err)
		}
		for _, k := range keys {
			if d := rdb.PTTL(ctx, l.RedisKey(k)).Val(); d < 50*time.Second {
				t.Errorf("PTTL(%q) = %v after Extend(1m), want about a minute", k, d)
			}
		}
	})
}

// On Redlock the keys are taken one by one in sorted order, with the same
// rollback; fences are 0.
func TestAcquireAllRedlock(t *testing.T) {
	// On virtual time, on in-memory nodes that vote at once.
	inBubble(t, func(t *testing.T, b *bubble) {
		l, nodes := b.redlock(3)
		other := b.redlockOn(nodes)
		ctx := context.Background()
		m, err := l.AcquireAll(ctx, []string{"rl:b", "rl:a"}, padlock.Options{})
		if err != nil {
			t.Fatalf("AcquireAll: %v", err)
		}
		if f := m.Fences(); f[0] != 0 || f[1] != 0 {
			t.Errorf("Fences() = %v on Redlock, want zeros", f)
		}
		if _, err := other.Acquire(ctx, "rl:b", padlock.Options{}); !errors.Is(err, padlock.ErrNotAcquired) {
			t.Errorf("Acquire of a held key = %v, want ErrNotAcquired", err)
		}
		if err := m.Release(ctx); err != nil {
			t.Fatalf("Release: %v", err)
		}
		holder := mustAcquire(t, other, ctx, "rl:c", padlock.Options{})
		defer holder.Release(ctx)
		if _, err := l.AcquireAll(ctx, []string{"rl:a", "rl:c"}, padlock.Options{Wait: 200 * time.Millisecond}); !errors.Is(err, padlock.ErrNotAcquired) {
			t.Fatalf("AcquireAll with rl:c held = %v, want ErrNotAcquired", err)
		}
		// The rollback gave rl:a back.
		lk := mustAcquire(t, other, ctx, "rl:a", padlock.Options{})
		lk.Release(ctx)
	})
}

// slowKeysHook makes the first script call that names a given key first
// slow: its reply comes late after the server ran it (reply), or it
// reaches the server late (send).
type slowKeysHook struct {
	reply, send map[string]time.Duration // by Redis key
	mu          sync.Mutex
	done        map[string]bool
}

func (h *slowKeysHook) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *slowKeysHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

func (h *slowKeysHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		args := cmd.Args()
		if len(args) < 4 || cmd.Name() != "evalsha" && cmd.Name() != "eval" {
			return next(ctx, cmd)
		}
		key := fmt.Sprint(args[3])
		h.mu.Lock()
		first := !h.done[key]
		h.done[key] = true
		h.mu.Unlock()
		if !first {
			return next(ctx, cmd)
		}
		time.Sleep(h.send[key])
		err := next(ctx, cmd)
		time.Sleep(h.reply[key])
		return err
	}
}

// TestLateSetIsNotALock takes, with AcquireAll, two keys on two Cluster
// masters (one script each, in slot order): the first's reply comes 1s
// late, the second's command reaches its master 1.3s late. Each reply
// came within its own call's trusted lease (2s less the margin), but the
// second came after the first key's trust had run out: the set must not
// be returned (it would be lost at once), and its keys must be free.
// Regression: AcquireAll returned a set already lost (Cluster explorer).
func TestLateSetIsNotALock(t *testing.T) {
	t.Parallel()
	c := redistest.StartCluster(t, 3)
	cc := c.Client(t)
	l := padlock.MustNew(t, cc)
	t.Cleanup(func() { l.Close() })
	byNode := padlock.ClusterKeys(l, 3, 1)
	keys := []string{byNode[0][0], byNode[1][0]}
	slices.SortFunc(keys, func(a, b string) int { return hashslot.Slot(l.RedisKey(a)) - hashslot.Slot(l.RedisKey(b)) })
	cc.AddHook(&slowKeysHook{
		reply: map[string]time.Duration{l.RedisKey(keys[0]): time.Second},
		send:  map[string]time.Duration{l.RedisKey(keys[1]): 1300 * time.Millisecond},
		done:  map[string]bool{},
	})
	ctx := padlock.CtxFor(t)
	m, err := l.AcquireAll(ctx, keys, padlock.Options{TTL: 2 * time.Second})
	if err == nil {
		lost := m.Err()
		_ = m.Release(ctx)
		if lost != nil {
			t.Fatalf("AcquireAll(%v) returned a set already lost: Err %v", keys, lost)
		}
		return // the replies came sooner than asked: nothing late
	}
	if !errors.Is(err, padlock.ErrUnavailable) {
		t.Fatalf("AcquireAll whose first key's trust ran out before the last key's reply: got %v; want ErrUnavailable", err)
	}
	other := padlock.MustNew(t, c.Client(t))
	t.Cleanup(func() { other.Close() })
	// Free keys are taken at once; a grant a loaded machine answered
	// after its 1 s lease (errLateGrant) was a grant too, and mustAcquire
	// asks again.
	for _, k := range keys {
		lk := padlock.MustAcquire(t, other, ctx, k, padlock.Options{TTL: time.Second})
		_ = lk.Release(ctx)
	}
}
