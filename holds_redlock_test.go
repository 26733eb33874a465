package padlock_test

import (
	"context"
	"errors"
	"testing"

	"github.com/padlockgo/padlock"
	"github.com/padlockgo/padlock/internal/redistest"
)

// A Redlock Locker keeps no semaphores or read-write locks: counts and
// reader sets on independent nodes would bound nothing. Each refuses with
// an ErrInvalid error naming why, instead of handing out a hold. Nor does
// it hold elections, which need one deployment: Campaign refuses too.
func TestHoldsRefusedOnRedlock(t *testing.T) {
	l := redlockOn(t, redistest.StartN(t, 3))
	ctx := context.Background()
	if _, err := l.Semaphore(2); !errors.Is(err, padlock.ErrInvalid) {
		t.Errorf("Semaphore: got %v, want ErrInvalid", err)
	}
	if _, err := l.AcquireRead(ctx, "k", padlock.Options{}); !errors.Is(err, padlock.ErrInvalid) {
		t.Errorf("AcquireRead: got %v, want ErrInvalid", err)
	}
	if _, err := l.AcquireWrite(ctx, "k", padlock.Options{}); !errors.Is(err, padlock.ErrInvalid) {
		t.Errorf("AcquireWrite: got %v, want ErrInvalid", err)
	}
	if _, err := l.Election("e", padlock.Options{}).Campaign(ctx, "v"); !errors.Is(err, padlock.ErrInvalid) {
		t.Errorf("Campaign: got %v, want ErrInvalid", err)
	}
}
