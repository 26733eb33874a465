package padlock_test

import (
	"context"
	"errors"
	"io"
	"sync/atomic"
	"testing"
	"time"

	"github.com/padlockgo/padlock"
	"github.com/redis/go-redis/v9"
)

// TestReleaseWithLostReplyReportsReleased: Redis runs a Release, but the
// connection closes before its reply arrives, and padlock sends the
// release again, which finds the token gone. Promise: a Release that
// worked does not report the lock lost: it returns neither ErrNotHeld nor
// ErrLockLost, and Err says ErrReleased.
func TestReleaseWithLostReplyReportsReleased(t *testing.T) {
	l, srv, rdb := newLocker(t)
	hook := hookOn(rdb)
	raw := srv.Client(t)
	ctx := ctxFor(t)
	key := testKey(t)
	// Loads the release script, so that Release sends one EVALSHA.
	if err := mustAcquire(t, l, ctx, key+":warm", padlock.Options{}).Release(ctx); err != nil {
		t.Fatalf("warming up: Release: %v", err)
	}
	lk := mustAcquire(t, l, ctx, key, padlock.Options{TTL: 20 * time.Second})
	lockKey := l.RedisKey(key)
	var n atomic.Int32
	hook.onProcess(func(ctx context.Context, cmd redis.Cmder, next redis.ProcessHook) error {
		if firstKey(cmd) != lockKey || n.Add(1) != 1 {
			return next(ctx, cmd)
		}
		if err := next(ctx, cmd); err != nil {
			return err
		}
		cmd.SetErr(io.EOF) // the connection closed after the server ran it
		return io.EOF
	})
	err := lk.Release(ctx)
	if n.Load() == 0 {
		t.Fatal("scenario not staged: Release sent no command on the lock key")
	}
	if exists := raw.Exists(ctx, lockKey).Val(); exists != 0 {
		t.Fatalf("the key is still there after Release (%v)", err)
	}
	if errors.Is(err, padlock.ErrNotHeld) || errors.Is(err, padlock.ErrLockLost) {
		t.Errorf("Release that Redis ran, its reply lost on a closed connection: %v (ErrNotHeld %v, ErrLockLost %v); want nil, or at most an ErrUnavailable error",
			err, errors.Is(err, padlock.ErrNotHeld), errors.Is(err, padlock.ErrLockLost))
	}
	if got := lk.Err(); got != padlock.ErrReleased {
		t.Errorf("Err after a Release that worked = %v, want ErrReleased", got)
	}
}
