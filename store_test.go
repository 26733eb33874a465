package padlock_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/padlockgo/padlock"
)

// TestOlderFormatFailsLoudly: a lock key holding a bare token, as a padlock
// from before "one identity per grant" stores it, shares the key prefix
// with this version. Acquire must fail with an error that says so, not
// read the key as free, nor as someone else's lock to wait for; and a
// value that is no padlock token at all is someone else's lock.
func TestOlderFormatFailsLoudly(t *testing.T) {
	l, _, rdb := newLocker(t)
	ctx := ctxFor(t)
	key := testKey(t)
	for _, old := range []string{
		"AAAAAAAAAAAAAAAAAAAAAA",              // a token
		"AAAAAAAAAAAAAAAAAAAAAA*",             // marked by a waiter
		"AAAAAAAAAAAAAAAAAAAAAA~host=a pid=1", // with an owner
	} {
		if err := rdb.Set(ctx, l.RedisKey(key), old, time.Minute).Err(); err != nil {
			t.Fatal(err)
		}
		lk, err := l.Acquire(ctx, key, padlock.Options{})
		if err == nil {
			lk.Release(ctx)
			t.Fatalf("Acquire over %q: got the lock, want an error", old)
		}
		if !strings.Contains(err.Error(), "older padlock format") {
			t.Errorf("Acquire over %q: got %v, want an error naming the older format", old, err)
		}
	}
	if err := rdb.Set(ctx, l.RedisKey(key), "someone-else", time.Minute).Err(); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Acquire(ctx, key, padlock.Options{}); !errors.Is(err, padlock.ErrNotAcquired) {
		t.Errorf("Acquire over a foreign value: got %v, want ErrNotAcquired", err)
	}
}
