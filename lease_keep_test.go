package padlock_test

import (
	"context"
	"errors"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/padlockgo/padlock"
	"github.com/redis/go-redis/v9"
)

func TestReleaseAfter(t *testing.T) {
	l, srv, rdb := newLocker(t)
	other := padlock.MustNew(t, srv.Client(t))
	t.Cleanup(func() { other.Close() })
	ctx := ctxFor(t)
	key := testKey(t)

	t.Run("keeps the key for d, then frees it", func(t *testing.T) {
		lk := mustAcquire(t, l, ctx, key, padlock.Options{TTL: time.Minute})
		if err := lk.ReleaseAfter(ctx, 700*time.Millisecond); err != nil {
			t.Fatalf("ReleaseAfter: %v", err)
		}
		if !errors.Is(lk.Err(), padlock.ErrReleased) {
			t.Errorf("Err() = %v, want ErrReleased", lk.Err())
		}
		if d := rdb.PTTL(ctx, l.RedisKey(key)).Val(); d <= 0 || d > 700*time.Millisecond {
			t.Errorf("PTTL = %v, want (0, 700ms]", d)
		}
		if _, err := other.Acquire(ctx, key, padlock.Options{}); !errors.Is(err, padlock.ErrNotAcquired) {
			t.Errorf("Acquire within d = %v, want ErrNotAcquired", err)
		}
		time.Sleep(900 * time.Millisecond)
		lk2 := mustAcquire(t, other, ctx, key, padlock.Options{})
		lk2.Release(ctx)
		if err := lk.ReleaseAfter(ctx, time.Second); err != nil {
			t.Errorf("second ReleaseAfter = %v, want nil", err)
		}
	})
	t.Run("owner-checked", func(t *testing.T) {
		lk := mustAcquire(t, l, ctx, key, padlock.Options{TTL: time.Minute})
		rdb.Del(ctx, l.RedisKey(key)) // lost
		lk2 := mustAcquire(t, other, ctx, key, padlock.Options{TTL: time.Minute})
		defer lk2.Release(ctx)
		if err := lk.ReleaseAfter(ctx, time.Second); !errors.Is(err, padlock.ErrNotHeld) {
			t.Errorf("ReleaseAfter of a lost lock = %v, want ErrNotHeld", err)
		}
		if d := rdb.PTTL(ctx, l.RedisKey(key)).Val(); d < 50*time.Second {
			t.Errorf("the new holder's lease = %v after a stale ReleaseAfter, want untouched (about 1m)", d)
		}
	})
}

// TestReleaseAfterIsTheLastLeaseChange: an Extend that passed its check
// that the lock is held, and sends its change only after ReleaseAfter
// returned, changes nothing: ReleaseAfter's lease is the last.
// Regression: the Extend undid ReleaseAfter's lease (explorer).
func TestReleaseAfterIsTheLastLeaseChange(t *testing.T) {
	l, _, rdb := newLocker(t)
	ctx := ctxFor(t)
	key := testKey(t)
	entered, proceed := make(chan struct{}), make(chan struct{})
	padlock.SetExtending(l, func() {
		close(entered)
		<-proceed
	})
	lk := mustAcquire(t, l, ctx, key, padlock.Options{TTL: time.Minute})
	extended := make(chan error, 1)
	go func() { extended <- lk.Extend(ctx, 50*time.Millisecond) }()
	<-entered // Extend found the lock held
	if err := lk.ReleaseAfter(ctx, 30*time.Second); err != nil {
		t.Fatalf("ReleaseAfter: %v", err)
	}
	close(proceed)
	if err := <-extended; !errors.Is(err, padlock.ErrNotHeld) {
		t.Errorf("Extend sent after ReleaseAfter returned = %v, want ErrNotHeld", err)
	}
	if d := rdb.PTTL(ctx, l.RedisKey(key)).Val(); d < 20*time.Second {
		t.Errorf("PTTL after ReleaseAfter(30s) and a racing Extend(50ms) = %v, want about 30s", d)
	}
}

// TestReleaseAfterOutlastsRenewalInFlight: a renewal of a lock with a
// short lease is on its way when ReleaseAfter(3s) runs, and lands after
// it. Promise: the key stays locked for 3s after ReleaseAfter, for
// everyone (a renewal in flight does not cut it to the lock's lease), and
// is free after that.
// Regression: the renewal in flight cut ReleaseAfter's lease to the lock's.
func TestReleaseAfterOutlastsRenewalInFlight(t *testing.T) {
	mutex := func(ctx context.Context, l *padlock.Locker, key string, o padlock.Options) (*padlock.Lock, error) {
		return l.Acquire(ctx, key, o)
	}
	permit := func(ctx context.Context, l *padlock.Locker, key string, o padlock.Options) (*padlock.Lock, error) {
		sem, err := l.Semaphore(1)
		if err != nil {
			return nil, err
		}
		return sem.Acquire(ctx, key, o)
	}
	t.Run("lock", func(t *testing.T) {
		releaseAfterOutlastsRenewal(t, mutex, func(l *padlock.Locker, key string) string { return l.RedisKey(key) })
	})
	// A permit's lease lives in a sorted set, its change numbers beside
	// it (lua/hold_extend.lua).
	t.Run("permit", func(t *testing.T) {
		releaseAfterOutlastsRenewal(t, permit, func(l *padlock.Locker, key string) string { return l.RedisKey(key) + ":sem" })
	})
}

func releaseAfterOutlastsRenewal(t *testing.T,
	take func(ctx context.Context, l *padlock.Locker, key string, o padlock.Options) (*padlock.Lock, error),
	watch func(l *padlock.Locker, key string) string) {
	// On virtual time: the renewal is held back by a hook, not by the
	// machine's load, and every deadline below is exact.
	inBubble(t, func(t *testing.T, b *bubble) {
		releaseAfterOutlastsRenewalIn(t, b, take, watch)
	})
}

func releaseAfterOutlastsRenewalIn(t *testing.T, b *bubble,
	take func(ctx context.Context, l *padlock.Locker, key string, o padlock.Options) (*padlock.Lock, error),
	watch func(l *padlock.Locker, key string) string) {
	l, rdb := b.locker()
	hook := hookOn(rdb)
	rivals, _ := b.locker()
	ctx := context.Background()
	key := "k"
	const (
		ttl  = 900 * time.Millisecond
		keep = 3 * time.Second
	)
	lk, err := take(ctx, l, key, padlock.Options{TTL: ttl})
	if err != nil {
		t.Fatal(err)
	}
	defer lk.Release(ctx)
	// Loads the lease script, so the renewal needs no second round.
	if err := lk.Extend(ctx, ttl); err != nil {
		t.Fatalf("Extend: %v", err)
	}

	lockKey := watch(l, key)
	entered, resume, sent := make(chan struct{}), make(chan struct{}), make(chan struct{})
	release := sync.OnceFunc(func() { close(resume) })
	defer release()
	var once atomic.Bool
	hook.onPipeline(func(ctx context.Context, cmds []redis.Cmder, next redis.ProcessPipelineHook) error {
		if !slices.ContainsFunc(cmds, func(c redis.Cmder) bool { return firstKey(c) == lockKey }) || !once.CompareAndSwap(false, true) {
			return next(ctx, cmds)
		}
		close(entered)
		// Held until ReleaseAfter has returned; or, should ReleaseAfter
		// wait for it, until the renewal's own deadline.
		select {
		case <-resume:
		case <-ctx.Done():
		}
		// The renewal was on the wire already: it arrives whatever the
		// client's deadline says by now.
		err := next(context.WithoutCancel(ctx), cmds)
		close(sent)
		return err
	})
	awaitSignal(t, entered, "a renewal going out")

	began := time.Now()
	if err := lk.ReleaseAfter(ctx, keep); err != nil {
		t.Fatalf("ReleaseAfter: %v", err)
	}
	release()
	awaitSignal(t, sent, "the held renewal landing")

	time.Sleep(time.Until(began.Add(keep * 2 / 3)))
	other, err := take(ctx, rivals, key, padlock.Options{})
	if err == nil {
		defer other.Release(ctx)
		if at := time.Since(began); at < keep-100*time.Millisecond {
			t.Fatalf("another Locker took the key %v after ReleaseAfter(%v): the renewal in flight cut the kept lease to the lock's %v",
				at.Round(time.Millisecond), keep, ttl)
		}
		t.Fatalf("another Locker took the key %v after ReleaseAfter(%v)", time.Since(began).Round(time.Millisecond), keep)
	}
	if !errors.Is(err, padlock.ErrNotAcquired) {
		t.Fatalf("Acquire %v after ReleaseAfter(%v): %v, want ErrNotAcquired", time.Since(began).Round(time.Millisecond), keep, err)
	}

	other, err = take(ctx, rivals, key, padlock.Options{Wait: 10 * time.Second})
	if err != nil {
		t.Fatalf("Acquire after the kept %v: %v", keep, err)
	}
	defer other.Release(ctx)
	if at := time.Since(began); at < keep-100*time.Millisecond {
		t.Fatalf("another Locker took the key %v after ReleaseAfter(%v)", at.Round(time.Millisecond), keep)
	}
}
