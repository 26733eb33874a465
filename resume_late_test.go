package padlock_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/padlockgo/padlock"
	"github.com/redis/go-redis/v9"
)

// TestResumeLateReply: Redis runs a Resume, but its reply comes after the
// new lease has run out. Resume does not return a lock that is lost
// already (the explorer found one): it returns ErrUnavailable.
func TestResumeLateReply(t *testing.T) {
	l, _, rdb := newLocker(t)
	hook := hookOn(rdb)
	ctx := ctxFor(t)
	key := testKey(t)
	lk := mustAcquire(t, l, ctx, key, padlock.Options{TTL: time.Minute})
	own, err := lk.Detach()
	if err != nil {
		t.Fatalf("Detach: %v", err)
	}
	const ttl = 200 * time.Millisecond
	var armed atomic.Bool
	armed.Store(true)
	hook.onProcess(func(ctx context.Context, cmd redis.Cmder, next redis.ProcessHook) error {
		if !armed.CompareAndSwap(true, false) {
			return next(ctx, cmd)
		}
		err := next(ctx, cmd)
		time.Sleep(ttl + 100*time.Millisecond) // the reply is late
		return err
	})
	got, err := l.Resume(ctx, own, padlock.Options{TTL: ttl})
	if armed.Load() {
		t.Fatal("scenario not staged: Resume sent no command")
	}
	if err == nil {
		t.Fatalf("Resume with its reply after its lease = a lock (Err %v), want an error", got.Err())
	}
	if !errors.Is(err, padlock.ErrUnavailable) {
		t.Errorf("Resume with its reply after its lease = %v, want ErrUnavailable", err)
	}
}
