package padlock_test

import (
	"context"
	"testing"
	"time"

	"github.com/padlockgo/padlock"
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
