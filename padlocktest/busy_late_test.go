package padlocktest_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/padlockgo/padlock/padlocktest"
)

// lateReplies holds back the replies of the first n scripts Redis runs
// for d: the grants they carry come back after a short lease ran out, as
// on a starved test runtime.
type lateReplies struct {
	n atomic.Int64
	d time.Duration
}

func (h *lateReplies) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h *lateReplies) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}
func (h *lateReplies) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		err := next(ctx, cmd)
		if (cmd.Name() == "evalsha" || cmd.Name() == "eval") && h.n.Add(-1) >= 0 {
			time.Sleep(h.d)
		}
		return err
	}
}

// TestBusyTakesTheKeyAgainAfterALateGrant: a grant whose reply came after
// its lease had run out is let go by the Locker; Busy asks again and
// returns a lock that holds the key, rather than an error for a test that
// only asked for a busy key.
func TestBusyTakesTheKeyAgainAfterALateGrant(t *testing.T) {
	env := padlocktest.New(t)
	ctx := ctxFor(t)
	late := &lateReplies{d: 80 * time.Millisecond}
	late.n.Store(1)
	env.Client().AddHook(late)
	lk, err := env.Busy(ctx, "k", 50*time.Millisecond)
	if err != nil {
		t.Fatalf("Busy with its first grant late: %v, want a lock", err)
	}
	if late.n.Load() >= 0 {
		t.Fatalf("no reply was held back: the test did not make a grant late")
	}
	if !env.Miniredis().Exists(env.Locker().RedisKey("k")) {
		t.Fatalf("Busy returned, but the key is not held in Redis")
	}
	_ = lk.Release(ctx)
}
