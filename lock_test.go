package padlock_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/padlockgo/padlock"
)

func TestNonOwnerCannotReleaseOrExtend(t *testing.T) {
	l, _, rdb := newLocker(t)
	ctx := ctxFor(t)
	key := testKey(t)

	stale := mustAcquire(t, l, ctx, key, padlock.Options{TTL: 50 * time.Millisecond, NoRenew: true})
	time.Sleep(100 * time.Millisecond) // stale's lease runs out
	owner := mustAcquire(t, l, ctx, key, padlock.Options{TTL: 10 * time.Second})
	defer owner.Release(ctx)

	if err := stale.Extend(ctx, time.Minute); !errors.Is(err, padlock.ErrNotHeld) {
		t.Fatalf("stale Extend: got %v, want ErrNotHeld", err)
	}
	if _, err := stale.TTL(ctx); !errors.Is(err, padlock.ErrNotHeld) {
		t.Fatalf("stale TTL: got %v, want ErrNotHeld", err)
	}
	if err := stale.Release(ctx); !errors.Is(err, padlock.ErrNotHeld) {
		t.Fatalf("stale Release: got %v, want ErrNotHeld", err)
	}
	// The owner's lock is untouched: same token, same lease.
	keys, err := rdb.Keys(ctx, "padlock:{*").Result()
	if err != nil || len(keys) != 1 {
		t.Fatalf("lock keys = %v, %v; want exactly one", keys, err)
	}
	if v := rdb.Get(ctx, keys[0]).Val(); padlock.StoredToken(v) != owner.Token() {
		t.Fatalf("lock value = %q, want the owner's token %q", v, owner.Token())
	}
	if d, err := owner.TTL(ctx); err != nil || d < 9*time.Second {
		t.Fatalf("owner TTL = %v, %v; want about 10s", d, err)
	}

	// A token overwritten behind the owner's back is not the owner's either.
	if err := rdb.Set(ctx, keys[0], "someone-else", time.Minute).Err(); err != nil {
		t.Fatal(err)
	}
	if err := owner.Extend(ctx, time.Minute); !errors.Is(err, padlock.ErrNotHeld) {
		t.Fatalf("Extend after takeover: got %v, want ErrNotHeld", err)
	}
	if err := owner.Release(ctx); !errors.Is(err, padlock.ErrNotHeld) {
		t.Fatalf("Release after takeover: got %v, want ErrNotHeld", err)
	}
	if v := rdb.Get(ctx, keys[0]).Val(); v != "someone-else" {
		t.Fatalf("lock value after rejected release = %q, want it unchanged", v)
	}
}

func TestReleaseNilAndTwice(t *testing.T) {
	l, _, _ := newLocker(t)
	ctx := ctxFor(t)
	var nilLock *padlock.Lock
	if err := nilLock.Release(ctx); err != nil {
		t.Fatalf("nil Release: %v", err)
	}
	lk := mustAcquire(t, l, ctx, testKey(t), padlock.Options{})
	if err := lk.Release(ctx); err != nil {
		t.Fatalf("first Release: %v", err)
	}
	if err := lk.Release(ctx); err != nil {
		t.Fatalf("second Release: got %v, want nil", err)
	}
	select {
	case <-lk.Done():
	default:
		t.Fatal("Done not closed after Release")
	}
	if !errors.Is(lk.Err(), padlock.ErrReleased) {
		t.Fatalf("Err after Release = %v, want ErrReleased", lk.Err())
	}
	// The key is free again.
	again := mustAcquire(t, l, ctx, testKey(t), padlock.Options{})
	again.Release(ctx)
}

func TestExtendAndTTL(t *testing.T) {
	l, _, _ := newLocker(t)
	ctx := ctxFor(t)
	lk := mustAcquire(t, l, ctx, testKey(t), padlock.Options{TTL: time.Second, NoRenew: true})
	defer lk.Release(ctx)
	if err := lk.Extend(ctx, time.Hour); err != nil {
		t.Fatalf("Extend: %v", err)
	}
	d, err := lk.TTL(ctx)
	if err != nil || d < 59*time.Minute || d > time.Hour {
		t.Fatalf("TTL after Extend(1h) = %v, %v; want about 1h", d, err)
	}
	if err := lk.Extend(ctx, 0); !errors.Is(err, padlock.ErrInvalid) {
		t.Fatalf("Extend(0): got %v, want ErrInvalid", err)
	}
}

func TestFenceMonotonic(t *testing.T) {
	l, srv, _ := newLocker(t)
	ctx := ctxFor(t)
	key := testKey(t)

	var last int64
	check := func(step string, lk *padlock.Lock) {
		t.Helper()
		if lk.Fence() <= last {
			t.Fatalf("%s: fence %d, want > %d", step, lk.Fence(), last)
		}
		last = lk.Fence()
	}
	for i := range 5 {
		lk := mustAcquire(t, l, ctx, key, padlock.Options{})
		check(fmt.Sprintf("release cycle %d", i), lk)
		lk.Release(ctx)
	}
	for i := range 3 {
		lk := mustAcquire(t, l, ctx, key, padlock.Options{TTL: 30 * time.Millisecond, NoRenew: true})
		check(fmt.Sprintf("expiry cycle %d", i), lk)
		time.Sleep(60 * time.Millisecond) // let it expire, unreleased
	}
	// Other keys in the same or other slots never lower this key's fences.
	for i := range 20 {
		lk := mustAcquire(t, l, ctx, fmt.Sprintf("%s:other:%d", key, i), padlock.Options{})
		lk.Release(ctx)
	}
	lk := mustAcquire(t, l, ctx, key, padlock.Options{})
	check("after other keys", lk)
	lk.Release(ctx)

	// A restart without persistence loses the counters; the clock floor
	// keeps fences rising.
	if srv.Real() {
		srv.Restart(t)
		lk := mustAcquire(t, l, ctx, key, padlock.Options{})
		check("after restart without persistence", lk)
		lk.Release(ctx)
	}
}

// TestLockAccessors: Lease and ValidUntil answer without a round trip and
// follow Extend.
func TestLockAccessors(t *testing.T) {
	l, _, _ := newLocker(t)
	ctx := ctxFor(t)
	before := time.Now()
	lk := mustAcquire(t, l, ctx, testKey(t), padlock.Options{TTL: 10 * time.Second})
	if got := lk.Lease(); got != 10*time.Second {
		t.Fatalf("Lease %v, want 10s", got)
	}
	if v := lk.ValidUntil(); v.Before(before.Add(9*time.Second)) || v.After(time.Now().Add(10*time.Second)) {
		t.Fatalf("ValidUntil %v from now, want about 10s less the drift margin", time.Until(v))
	}
	sent := time.Now()
	if err := lk.Extend(ctx, 2*time.Second); err != nil {
		t.Fatal(err)
	}
	if got := lk.Lease(); got != 2*time.Second {
		t.Fatalf("Lease after Extend(2s) %v, want 2s", got)
	}
	if v := lk.ValidUntil(); v.After(sent.Add(2*time.Second)) || v.Before(sent.Add(time.Second)) {
		t.Fatalf("ValidUntil after Extend(2s): %v after it was sent, want within (1s, 2s]", v.Sub(sent))
	}
	lk.Release(ctx)
	if v := lk.ValidUntil(); !v.IsZero() {
		t.Fatalf("ValidUntil after Release %v, want zero", v)
	}
}

// TestAPINotes holds the answers docs/locks.md's API notes give for locks that
// are not, or no longer, held.
func TestAPINotes(t *testing.T) {
	l, _, rdb := newLocker(t)
	ctx := ctxFor(t)
	key := testKey(t)

	var never *padlock.Lock
	if err := never.Release(ctx); err != nil {
		t.Errorf("Release of a nil Lock: %v, want nil", err)
	}
	var zero padlock.Lock
	if err := zero.Release(ctx); !errors.Is(err, padlock.ErrNotHeld) {
		t.Errorf("Release of a zero Lock: %v, want ErrNotHeld", err)
	}
	if _, err := zero.TTL(ctx); !errors.Is(err, padlock.ErrNotHeld) {
		t.Errorf("TTL of a zero Lock: %v, want ErrNotHeld", err)
	}
	if err := zero.Extend(ctx, time.Second); !errors.Is(err, padlock.ErrNotHeld) {
		t.Errorf("Extend of a zero Lock: %v, want ErrNotHeld", err)
	}
	select {
	case <-zero.Done():
	default:
		t.Error("Done of a zero Lock is open")
	}

	// An expired lock: TTL and Extend say it is not held, and Extend does
	// not take the key again (unlike redsync's SetNXOnExtend).
	lk := mustAcquire(t, l, ctx, key, padlock.Options{TTL: 100 * time.Millisecond, NoRenew: true})
	<-lk.Done()
	time.Sleep(150 * time.Millisecond)
	if _, err := lk.TTL(ctx); !errors.Is(err, padlock.ErrNotHeld) {
		t.Errorf("TTL of an expired lock: %v, want ErrNotHeld", err)
	}
	if err := lk.Extend(ctx, time.Second); !errors.Is(err, padlock.ErrNotHeld) {
		t.Errorf("Extend of an expired lock: %v, want ErrNotHeld", err)
	}
	if n, err := rdb.Exists(ctx, "padlock:{"+key+"}").Result(); err != nil || n != 0 {
		t.Errorf("lock key after Extend of an expired lock: exists=%d, %v; want gone", n, err)
	}
	if err := lk.Release(ctx); !errors.Is(err, padlock.ErrNotHeld) {
		t.Errorf("Release of an expired lock: %v, want ErrNotHeld", err)
	}
	if err := lk.Release(ctx); err != nil {
		t.Errorf("second Release: %v, want nil", err)
	}
}

// TestForeignValueIsNotOurs: someone overwrites the lock's key by hand.
// Release, Extend and TTL must say the lock is not held and leave the
// other value alone.
// A check of the peers' own suites (bsm/redislock, go-redsync/redsync).
func TestForeignValueIsNotOurs(t *testing.T) {
	l, _, rdb := newLocker(t)
	ctx := ctxFor(t)
	key := testKey(t)
	lockKey := "padlock:{" + key + "}"
	for _, op := range []string{"Release", "Extend", "TTL"} {
		t.Run(op, func(t *testing.T) {
			lk := mustAcquire(t, l, ctx, key, padlock.Options{})
			if err := rdb.Set(ctx, lockKey, "ABCD", time.Minute).Err(); err != nil {
				t.Fatal(err)
			}
			var err error
			switch op {
			case "Release":
				err = lk.Release(ctx)
			case "Extend":
				err = lk.Extend(ctx, time.Hour)
			case "TTL":
				_, err = lk.TTL(ctx)
			}
			if !errors.Is(err, padlock.ErrNotHeld) {
				t.Fatalf("%s of an overwritten lock: %v, want ErrNotHeld", op, err)
			}
			if !errors.Is(lk.Err(), padlock.ErrLockLost) {
				t.Fatalf("Err after %s found the lock gone: %v, want ErrLockLost", op, lk.Err())
			}
			v, _ := rdb.Get(ctx, lockKey).Result()
			ttl, _ := rdb.PTTL(ctx, lockKey).Result()
			if v != "ABCD" || ttl > time.Minute {
				t.Fatalf("the other value after %s: %q with %v left, want \"ABCD\" untouched", op, v, ttl)
			}
			rdb.Del(ctx, lockKey)
			lk.Release(ctx)
		})
	}
}

// A Release whose context is done (a request whose client went away)
// still gives the key back: it is not left locked, for nobody, for the
// rest of its lease. The same for a set's. (Both once sent nothing.)
func TestReleaseOnAnEndedContextLetsGo(t *testing.T) {
	l, _, rdb := newLocker(t)
	ctx := ctxFor(t)
	key := testKey(t)
	for _, multi := range []bool{false, true} {
		done, cancel := context.WithCancel(ctx)
		var err error
		if multi {
			ml, aerr := l.AcquireAll(done, []string{key + ":a", key + ":b"}, padlock.Options{TTL: time.Minute})
			if aerr != nil {
				t.Fatal(aerr)
			}
			cancel()
			err = ml.Release(done)
		} else {
			lk := mustAcquire(t, l, done, key, padlock.Options{TTL: time.Minute})
			cancel()
			err = lk.Release(done)
		}
		if err != nil {
			t.Errorf("AcquireAll %v: Release on a cancelled context: %v; want nil, the key given back", multi, err)
		}
		names := []string{key}
		if multi {
			names = []string{key + ":a", key + ":b"}
		}
		for _, k := range names {
			if n, err := rdb.Exists(ctx, l.RedisKey(k)).Result(); err != nil || n != 0 {
				t.Errorf("AcquireAll %v: %s still locked after Release on a cancelled context (%v); want it free", multi, k, err)
			}
		}
	}
}
