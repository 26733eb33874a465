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

// TestHoldReleaseWithLostReplyReportsReleased: as
// TestReleaseWithLostReplyReportsReleased, for a semaphore permit and a
// read-write hold: Redis runs the release, the connection closes before its
// reply, padlock sends it again, and the copy finds the hold gone. A
// release that worked does not report the hold lost.
// Regression: a permit's release, sent again, said ErrNotHeld (explorer).
func TestHoldReleaseWithLostReplyReportsReleased(t *testing.T) {
	l, _, rdb := newLocker(t)
	hook := hookOn(rdb)
	ctx := ctxFor(t)
	sem, err := l.Semaphore(2)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name    string
		acquire func(key string, o padlock.Options) (*padlock.Lock, error)
	}{
		{"permit", func(key string, o padlock.Options) (*padlock.Lock, error) { return sem.Acquire(ctx, key, o) }},
		{"read", func(key string, o padlock.Options) (*padlock.Lock, error) { return l.AcquireRead(ctx, key, o) }},
		{"write", func(key string, o padlock.Options) (*padlock.Lock, error) { return l.AcquireWrite(ctx, key, o) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			key := testKey(t)
			// Loads the release script, so that Release sends one EVALSHA.
			warm, err := tc.acquire(key+":warm", padlock.Options{})
			if err != nil {
				t.Fatalf("warming up: %v", err)
			}
			if err := warm.Release(ctx); err != nil {
				t.Fatalf("warming up: Release: %v", err)
			}
			lk, err := tc.acquire(key, padlock.Options{TTL: 20 * time.Second})
			if err != nil {
				t.Fatalf("Acquire: %v", err)
			}
			var armed, n atomic.Int32
			armed.Store(1)
			hook.onProcess(func(ctx context.Context, cmd redis.Cmder, next redis.ProcessHook) error {
				if armed.Load() == 0 || cmd.Name() != "evalsha" || n.Add(1) != 1 {
					return next(ctx, cmd)
				}
				if err := next(ctx, cmd); err != nil {
					return err
				}
				cmd.SetErr(io.EOF) // the connection closed after the server ran it
				return io.EOF
			})
			err = lk.Release(ctx)
			armed.Store(0)
			if n.Load() < 2 {
				t.Fatalf("scenario not staged: Release sent %d script command(s), want the release and its copy", n.Load())
			}
			if errors.Is(err, padlock.ErrNotHeld) || errors.Is(err, padlock.ErrLockLost) {
				t.Errorf("Release that Redis ran, its reply lost on a closed connection: %v (ErrNotHeld %v, ErrLockLost %v); want nil, or at most an ErrUnavailable error",
					err, errors.Is(err, padlock.ErrNotHeld), errors.Is(err, padlock.ErrLockLost))
			}
			if got := lk.Err(); got != padlock.ErrReleased {
				t.Errorf("Err after a Release that worked = %v, want ErrReleased", got)
			}
		})
	}
}
