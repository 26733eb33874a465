package padlock_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/padlockgo/padlock"
)

// TestOptionsFitTheirConstructor proves that each option fits the
// constructors it configures and no other: New(c, WithNodeTimeout(d)) and
// NewRedlock(cs, WithReplicaAck(n, d)) do not compile.
func TestOptionsFitTheirConstructor(t *testing.T) {
	tests := []struct {
		name           string
		opt            any
		locker, redlok bool
	}{
		{"WithDefaults", padlock.WithDefaults(padlock.Options{}), true, true},
		{"WithKeyPrefix", padlock.WithKeyPrefix("app:"), true, true},
		{"WithClockDrift", padlock.WithClockDrift(0.01, time.Millisecond), true, true},
		{"WithReplicaAck", padlock.WithReplicaAck(1, time.Second), true, false},
		{"WithNodeTimeout", padlock.WithNodeTimeout(time.Second), false, true},
		{"WithMaxLease", padlock.WithMaxLease(time.Minute), false, true},
		{"WithPersistentNodes", padlock.WithPersistentNodes(), false, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, ok := tt.opt.(padlock.LockerOption); ok != tt.locker {
				t.Errorf("%T is a LockerOption (fits New): got %v, want %v", tt.opt, ok, tt.locker)
			}
			if _, ok := tt.opt.(padlock.RedlockOption); ok != tt.redlok {
				t.Errorf("%T is a RedlockOption (fits NewRedlock): got %v, want %v", tt.opt, ok, tt.redlok)
			}
		})
	}
}

func TestRedlockLeaseLimit(t *testing.T) {
	// On virtual time, on in-memory nodes that vote at once.
	inBubble(t, func(t *testing.T, b *bubble) {
		l, _ := b.redlock(3)
		ctx := context.Background()
		key := testKey(t)

		_, err := l.Acquire(ctx, key, padlock.Options{TTL: 2 * rlMaxLease})
		if !errors.Is(err, padlock.ErrInvalid) || !strings.Contains(err.Error(), "Options.TTL") {
			t.Fatalf("Acquire with a TTL above the max lease: got %v, want ErrInvalid naming Options.TTL", err)
		}
		lk := mustAcquire(t, l, ctx, key, padlock.Options{})
		defer lk.Release(ctx)
		if err := lk.Extend(ctx, 2*rlMaxLease); !errors.Is(err, padlock.ErrInvalid) {
			t.Fatalf("Extend above the max lease: got %v, want ErrInvalid", err)
		}
		if _, err := l.Acquire(ctx, key+":fair", padlock.Options{Fair: true}); !errors.Is(err, padlock.ErrInvalid) {
			t.Fatalf("Acquire with Fair: got %v, want ErrInvalid", err)
		}
	})
}
