package padlock

import (
	"context"
	"errors"
	"net"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// loseHandover is a go-redis hook that lets the first hand-off
// (lua/handover.lua) run on the server and then fails it, as a reply lost
// to a read timeout would.
type loseHandover struct{ n atomic.Int32 }

func (*loseHandover) DialHook(next redis.DialHook) redis.DialHook { return next }
func (*loseHandover) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}
func (h *loseHandover) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		args := cmd.Args()
		if len(args) < 2 || args[1] != handoverScript.Hash() || h.n.Add(1) != 1 {
			return next(ctx, cmd)
		}
		if err := next(ctx, cmd); err != nil {
			return err
		}
		lost := &net.OpError{Op: "read", Net: "tcp", Err: os.ErrDeadlineExceeded}
		cmd.SetErr(lost)
		return lost
	}
}

// TestHandOffReplyLost: the round trip that moves a lock to the next
// local holder's token runs, but its reply is lost. The lock must not be
// handed on (its move is not confirmed), nor left locked under either
// token, and Release must say it could not tell (ErrUnavailable), not that
// the lock was lost; the waiter then takes the key from Redis.
func TestHandOffReplyLost(t *testing.T) {
	l, srv, rdb := startLocker(t)
	hook := &loseHandover{}
	rdb.AddHook(hook)
	ctx := ctxFor(t)
	key := testKey(t)
	if err := handoverScript.Load(ctx, rdb).Err(); err != nil {
		t.Fatal(err)
	}
	holder, got := holderWithWaiter(t, l, key, Options{Wait: 10 * time.Second})
	waitParked(t, l, key, 1)
	err := holder.Release(ctx)
	if hook.n.Load() == 0 {
		t.Fatal("scenario not staged: no hand-off was sent")
	}
	if !errors.Is(err, ErrUnavailable) || errors.Is(err, ErrNotHeld) {
		t.Errorf("Release with the hand-off's reply lost: got %v, want ErrUnavailable and not ErrNotHeld", err)
	}
	if holder.Err() != ErrReleased {
		t.Errorf("holder's Err: got %v, want ErrReleased", holder.Err())
	}
	h := <-got
	if h.lk == nil {
		t.Fatal("the waiter got no lock")
	}
	defer h.lk.Release(ctx)
	if h.lk.lease == holder.lease {
		t.Error("the lock was handed on although its move to the waiter's token was not confirmed")
	}
	if v, err := srv.Client(t).Get(ctx, l.RedisKey(key)).Result(); err != nil || tokenOf(v) != h.lk.Token() {
		t.Errorf("lock key holds %q (%v), want the waiter's token %q", v, err, h.lk.Token())
	}
}
