package padlock_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/padlockgo/padlock"
	"github.com/padlockgo/padlock/internal/redistest"
	"github.com/redis/go-redis/v9"
)

// The contract every backend keeps, from one table: each case runs on a
// single node, a Cluster, a Sentinel-managed master, a Redlock quorum and
// a master whose writes a replica confirms (WithReplicaAck), each on real
// servers.

// backend is a running deployment with two Lockers on it, as two
// processes would have.
type backend struct {
	l, other *padlock.Locker
	// del deletes key's lock in Redis, on every node that may hold it: the
	// lock is lost behind its holder's back.
	del func(ctx context.Context, key string) error
	// fences: Lock.Fence rises from holder to holder (all but Redlock).
	fences bool
	// lease is a TTL every backend accepts (Redlock's max lease here).
	lease time.Duration
}

// delOn returns a backend's del through clients.
func delOn(l *padlock.Locker, clients ...redis.Cmdable) func(context.Context, string) error {
	return func(ctx context.Context, key string) error {
		for _, c := range clients {
			if err := c.Del(ctx, l.RedisKey(key)).Err(); err != nil {
				return err
			}
		}
		return nil
	}
}

// backends are the deployments the contract runs on, each started on
// first use and shared by the cases (they use distinct keys).
var backends = []struct {
	name  string
	start func(t *testing.T) *backend
}{
	{"single", func(t *testing.T) *backend {
		l, srv, rdb := newLocker(t)
		other := padlock.MustNew(t, srv.Client(t))
		t.Cleanup(func() { _ = other.Close() })
		return &backend{l: l, other: other, del: delOn(l, rdb), fences: true, lease: padlock.DefaultTTL}
	}},
	{"cluster", func(t *testing.T) *backend {
		c := redistest.StartCluster(t, 3)
		l, other := padlock.MustNew(t, c.Client(t)), padlock.MustNew(t, c.Client(t))
		t.Cleanup(func() { _, _ = l.Close(), other.Close() })
		return &backend{l: l, other: other, del: delOn(l, c.Client(t)), fences: true, lease: padlock.DefaultTTL}
	}},
	{"sentinel", func(t *testing.T) *backend {
		s := redistest.StartSentinel(t, 1)
		l, other := padlock.MustNew(t, s.Client(t)), padlock.MustNew(t, s.Client(t))
		t.Cleanup(func() { _, _ = l.Close(), other.Close() })
		return &backend{l: l, other: other, del: delOn(l, s.Client(t)), fences: true, lease: padlock.DefaultTTL}
	}},
	{"replica ack", func(t *testing.T) *backend {
		s := redistest.StartSentinel(t, 1)
		ack := padlock.WithReplicaAck(1, 800*time.Millisecond) // slack for a loaded machine
		l, other := padlock.MustNew(t, s.Client(t), ack), padlock.MustNew(t, s.Client(t), ack)
		t.Cleanup(func() { _, _ = l.Close(), other.Close() })
		return &backend{l: l, other: other, del: delOn(l, s.Client(t)), fences: true, lease: padlock.DefaultTTL}
	}},
	{"redlock", func(t *testing.T) *backend {
		l, servers := startRedlock(t, 3)
		other := redlockOn(t, servers)
		clients := make([]redis.Cmdable, len(servers))
		for i, s := range servers {
			clients[i] = s.Client(t)
		}
		return &backend{l: l, other: other, del: delOn(l, clients...), lease: rlMaxLease}
	}},
}

// contractCases are the contract, each run on every backend.
var contractCases = []struct {
	name string
	run  func(t *testing.T, b *backend, key string)
}{
	{"acquire and release", func(t *testing.T, b *backend, key string) {
		ctx := ctxFor(t)
		lk := mustAcquire(t, b.l, ctx, key, padlock.Options{})
		if lk.Key() != key || lk.Token() == "" || lk.Err() != nil {
			t.Fatalf("held lock: key %q, token %q, Err %v; want %q, a token, nil", lk.Key(), lk.Token(), lk.Err(), key)
		}
		if err := lk.Release(ctx); err != nil {
			t.Fatalf("Release: got %v, want nil", err)
		}
		select {
		case <-lk.Done():
		default:
			t.Fatal("Done open after Release")
		}
		if err := lk.Err(); err != padlock.ErrReleased {
			t.Fatalf("Err after Release: got %v, want ErrReleased", err)
		}
		mustAcquire(t, b.other, ctx, key, padlock.Options{}).Release(ctx)
	}},
	{"busy", func(t *testing.T, b *backend, key string) {
		ctx := ctxFor(t)
		lk := mustAcquire(t, b.l, ctx, key, padlock.Options{})
		defer lk.Release(ctx)
		got, err := b.other.Acquire(ctx, key, padlock.Options{})
		if got != nil || !errors.Is(err, padlock.ErrNotAcquired) {
			t.Fatalf("Acquire of a held key: got %v, %v; want ErrNotAcquired", got, err)
		}
		if d, ok := padlock.RetryAfter(err); !ok || d <= 0 || d > b.lease {
			t.Fatalf("RetryAfter: got %v, %v; want the holder's lease, in (0, %v]", d, ok, b.lease)
		}
	}},
	{"wait for release", func(t *testing.T, b *backend, key string) {
		ctx := ctxFor(t)
		lk := mustAcquire(t, b.l, ctx, key, padlock.Options{})
		got := make(chan error, 1)
		go func() {
			next, err := b.other.Acquire(ctx, key, padlock.Options{Wait: 20 * time.Second})
			if err == nil {
				err = next.Release(ctx)
			}
			got <- err
		}()
		time.Sleep(50 * time.Millisecond) // most likely waiting by now; either order must work
		if err := lk.Release(ctx); err != nil {
			t.Fatal(err)
		}
		if err := <-got; err != nil {
			t.Fatalf("waiter: got %v, want the lock once the holder released it", err)
		}
	}},
	{"extend and TTL", func(t *testing.T, b *backend, key string) {
		ctx := ctxFor(t)
		lk := mustAcquire(t, b.l, ctx, key, padlock.Options{TTL: b.lease / 2, NoRenew: true})
		defer lk.Release(ctx)
		if err := lk.Extend(ctx, b.lease); err != nil {
			t.Fatalf("Extend: got %v, want nil", err)
		}
		d, err := lk.TTL(ctx)
		if err != nil || d <= b.lease/2 || d > b.lease {
			t.Fatalf("TTL after Extend(%v): got %v, %v; want in (%v, %v]", b.lease, d, err, b.lease/2, b.lease)
		}
		if got := lk.Lease(); got != b.lease {
			t.Fatalf("Lease after Extend: got %v, want %v", got, b.lease)
		}
	}},
	{"fence", func(t *testing.T, b *backend, key string) {
		ctx := ctxFor(t)
		var prev int64
		for i, l := range []*padlock.Locker{b.l, b.other, b.l} {
			lk := mustAcquire(t, l, ctx, key, padlock.Options{})
			f := lk.Fence()
			if err := lk.Release(ctx); err != nil {
				t.Fatal(err)
			}
			switch {
			case !b.fences && f != 0:
				t.Fatalf("holder %d: fence %d, want 0 (no fences on this backend)", i, f)
			case b.fences && f <= prev:
				t.Fatalf("holder %d: fence %d after %d, want a higher one", i, f, prev)
			}
			prev = f
		}
	}},
	{"lost", func(t *testing.T, b *backend, key string) {
		ctx := ctxFor(t)
		lk := mustAcquire(t, b.l, ctx, key, padlock.Options{})
		defer lk.Release(ctx)
		guarded := lk.Context(ctx)
		if err := b.del(ctx, key); err != nil {
			t.Fatal(err)
		}
		err := lk.Extend(ctx, b.lease)
		if !errors.Is(err, padlock.ErrNotHeld) || !errors.Is(err, padlock.ErrLockLost) {
			t.Fatalf("Extend of a lost lock: got %v, want ErrNotHeld and ErrLockLost", err)
		}
		select {
		case <-lk.Done():
		default:
			t.Fatal("Done open after Extend found the lock lost")
		}
		if cause := context.Cause(guarded); cause != padlock.ErrLockLost {
			t.Fatalf("guarded context's cause: got %v, want ErrLockLost", cause)
		}
		if err := lk.Release(ctx); !errors.Is(err, padlock.ErrNotHeld) || !errors.Is(err, padlock.ErrLockLost) {
			t.Fatalf("Release of a lost lock: got %v, want ErrNotHeld and ErrLockLost", err)
		}
		mustAcquire(t, b.other, ctx, key, padlock.Options{}).Release(ctx)
	}},
	{"reentrant through ctx", func(t *testing.T, b *backend, key string) {
		ctx := ctxFor(t)
		outer := mustAcquire(t, b.l, ctx, key, padlock.Options{})
		defer outer.Release(ctx)
		inner := mustAcquire(t, b.l, outer.Context(ctx), key, padlock.Options{})
		if inner.Token() != outer.Token() || inner.Fence() != outer.Fence() {
			t.Fatalf("reentrant handle: token %q fence %d, want the outer lock's %q and %d", inner.Token(), inner.Fence(), outer.Token(), outer.Fence())
		}
		if err := inner.Release(ctx); err != nil {
			t.Fatal(err)
		}
		if _, err := b.other.Acquire(ctx, key, padlock.Options{}); !errors.Is(err, padlock.ErrNotAcquired) {
			t.Fatalf("after the inner handle's Release: got %v, want the outer still holding (ErrNotAcquired)", err)
		}
		if err := outer.Release(ctx); err != nil {
			t.Fatal(err)
		}
		mustAcquire(t, b.other, ctx, key, padlock.Options{}).Release(ctx)
	}},
}

func TestContract(t *testing.T) {
	t.Parallel() // its backends are servers of its own
	for _, be := range backends {
		t.Run(be.name, func(t *testing.T) {
			// Each backend is servers of its own; most of the time is
			// starting them (a Cluster, a Redlock node's first vote).
			t.Parallel()
			redistest.Require(t)
			b := be.start(t)
			for _, tc := range contractCases {
				t.Run(tc.name, func(t *testing.T) { tc.run(t, b, testKey(t)) })
			}
		})
	}
}
