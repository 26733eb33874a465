package padlock

import (
	"errors"
	"testing"
	"time"
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
