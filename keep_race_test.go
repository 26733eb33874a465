package padlock_test

import (
	"errors"
	"testing"
	"time"

	"github.com/padlockgo/padlock"
)

// An Extend that passed its check that the lock is held, and sends its
// change only after ReleaseAfter returned, changes nothing: ReleaseAfter's
// lease is the last (the explorer found an Extend undoing it).
func TestExtendRacingReleaseAfter(t *testing.T) {
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
