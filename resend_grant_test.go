package padlock_test

import (
	"context"
	"io"
	"sync/atomic"
	"testing"
	"time"

	"github.com/padlockgo/padlock"
	"github.com/redis/go-redis/v9"
)

// resetAfterRun makes the first EVALSHA of sha run and then fail as a
// closed connection does, so that padlock sends it again; it returns
// how many copies were sent.
func resetAfterRun(hook *faultHook, sha string) *atomic.Int32 {
	var n atomic.Int32
	hook.onProcess(func(ctx context.Context, cmd redis.Cmder, next redis.ProcessHook) error {
		args := cmd.Args()
		if cmd.Name() != "evalsha" || len(args) < 2 || args[1] != sha || n.Add(1) != 1 {
			return next(ctx, cmd)
		}
		if err := next(ctx, cmd); err != nil {
			return err
		}
		cmd.SetErr(io.EOF) // the connection closed after the server ran it
		return io.EOF
	})
	return &n
}

// TestResumeSentAgain: Redis runs a Resume, the connection closes before
// its reply, and padlock sends it again. The copy finds the lock under
// the resuming token: Resume returns the lock, not ErrNotHeld.
func TestResumeSentAgain(t *testing.T) {
	l, _, rdb := newLocker(t)
	hook := hookOn(rdb)
	ctx := ctxFor(t)
	key := testKey(t)
	o := padlock.Options{TTL: 20 * time.Second}
	// Loads the resume script.
	if own, err := mustAcquire(t, l, ctx, key+":warm", o).Detach(); err == nil {
		if lk, err := l.Resume(ctx, own, o); err == nil {
			_ = lk.Release(ctx)
		}
	}
	own, err := mustAcquire(t, l, ctx, key, o).Detach()
	if err != nil {
		t.Fatalf("Detach: %v", err)
	}
	n := resetAfterRun(hook, padlock.ResumeSHA)
	lk, err := l.Resume(ctx, own, o)
	if n.Load() < 2 {
		t.Fatalf("scenario not staged: %d resume command(s) sent, want the resume and its copy", n.Load())
	}
	if err != nil {
		t.Fatalf("Resume that ran, its copy sent again = %v, want the lock", err)
	}
	defer lk.Release(ctx)
	if tok, _ := rdb.Get(ctx, l.RedisKey(key)).Result(); padlock.StoredToken(tok) != lk.Token() {
		t.Errorf("Redis holds the lock under %q, the resumed lock's token is %q", padlock.StoredToken(tok), lk.Token())
	}
}
