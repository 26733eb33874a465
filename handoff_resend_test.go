package padlock

import (
	"context"
	"errors"
	"io"
	"sync/atomic"
	"testing"
	"time"

	"github.com/padlockgo/padlock/internal/redistest"
	"github.com/redis/go-redis/v9"
)

// resetHandover makes the first hand-off command run and then fail as a
// closed connection does, so that padlock sends it again.
type resetHandover struct{ n atomic.Int32 }

func (h *resetHandover) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h *resetHandover) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}
func (h *resetHandover) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		args := cmd.Args()
		if cmd.Name() != "evalsha" || len(args) < 2 || args[1] != handoverScript.Hash() || h.n.Add(1) != 1 {
			return next(ctx, cmd)
		}
		if err := next(ctx, cmd); err != nil {
			return err
		}
		cmd.SetErr(io.EOF) // the connection closed after the server ran it
		return io.EOF
	}
}

// TestHandOffSentAgain: a Release hands the lock to a waiter of its
// Locker; Redis runs the hand-off, the connection closes before its
// reply, and padlock sends it again. The copy finds the lock under the
// waiter's token: the hand-off happened, and neither the releaser nor
// the waiter is told the lock was lost (the explorer found the copy
// reported as ErrNotHeld, the lock left in Redis under a token nobody
// held).
func TestHandOffSentAgain(t *testing.T) {
	srv := redistest.Start(t)
	rdb := srv.Client(t)
	ctx := context.Background()
	if err := handoverScript.Load(ctx, rdb).Err(); err != nil { // one EVALSHA per hand-off
		t.Fatal(err)
	}
	hook := &resetHandover{}
	rdb.AddHook(hook)
	l := mustNew(t, rdb)
	defer l.Close()
	key := testKey(t)
	holder, got := holderWithWaiter(t, l, key, Options{Wait: 10 * time.Second})
	err := holder.Release(ctx)
	if hook.n.Load() < 2 {
		t.Fatalf("scenario not staged: %d hand-off command(s) sent, want the hand-off and its copy", hook.n.Load())
	}
	if errors.Is(err, ErrNotHeld) {
		t.Errorf("Release whose hand-off ran, its copy sent again = %v, want nil", err)
	}
	var next *Lock
	select {
	case h := <-got:
		next = h.lk
	case <-time.After(10 * time.Second):
		t.Fatal("the waiter was not handed the lock")
	}
	if next == nil {
		t.Fatal("the waiter's Acquire failed")
	}
	defer next.Release(ctx)
	if err := next.Err(); err != nil {
		t.Errorf("the waiter's lock: Err = %v, want nil", err)
	}
	if v, _ := rdb.Get(ctx, l.RedisKey(key)).Result(); tokenOf(v) != next.Token() {
		t.Errorf("Redis holds the lock under %q, the waiter's token is %q", tokenOf(v), next.Token())
	}
}
