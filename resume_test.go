package padlock_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"sync/atomic"
	"testing"
	"time"

	"github.com/padlockgo/padlock"
	"github.com/redis/go-redis/v9"
)

// TestDetachResume: a lock taken by one Locker (the process that queues a
// job) is taken over by another (the worker): the first stops renewing
// it, the second renews it past the original lease and releases it.
func TestDetachResume(t *testing.T) {
	// On virtual time: the three leases of renewal cost nothing.
	inBubble(t, func(t *testing.T, bb *bubble) {
		queuer, _ := bb.locker()
		worker, _ := bb.locker()
		other, _ := bb.locker()
		ctx := context.Background()
		key := testKey(t)
		const ttl = 600 * time.Millisecond

		lk := mustAcquire(t, queuer, ctx, key, padlock.Options{TTL: ttl})
		own, err := lk.Detach()
		if err != nil {
			t.Fatalf("Detach: %v", err)
		}
		if own.Key != key || own.Token != lk.Token() || own.Fence != lk.Fence() {
			t.Fatalf("Ownership %+v, want key %q, token %q, fence %d", own, key, lk.Token(), lk.Fence())
		}
		select {
		case <-lk.Done():
		default:
			t.Fatal("Done still open after Detach")
		}
		if !errors.Is(lk.Err(), padlock.ErrReleased) {
			t.Fatalf("Err after Detach: %v, want ErrReleased", lk.Err())
		}
		if err := lk.Release(ctx); err != nil {
			t.Fatalf("Release after Detach: %v, want nil (it does nothing)", err)
		}
		if _, err := other.Acquire(ctx, key, padlock.Options{}); !errors.Is(err, padlock.ErrNotAcquired) {
			t.Fatalf("Acquire of a detached lock: %v, want ErrNotAcquired (still held)", err)
		}

		// The Ownership travels with the job, e.g. as JSON.
		b, err := json.Marshal(own)
		if err != nil {
			t.Fatal(err)
		}
		var got padlock.Ownership
		if err := json.Unmarshal(b, &got); err != nil {
			t.Fatal(err)
		}
		resumed, err := worker.Resume(ctx, got, padlock.Options{TTL: ttl})
		if err != nil {
			t.Fatalf("Resume: %v", err)
		}
		if resumed.Fence() != own.Fence || resumed.Token() == own.Token {
			t.Fatalf("resumed fence %d, token %q; want fence %d and a token other than the detached one's", resumed.Fence(), resumed.Token(), own.Fence)
		}
		time.Sleep(3 * ttl) // renewed by the worker's watchdog
		if err := resumed.Err(); err != nil {
			t.Fatalf("resumed lock after 3 leases: %v", err)
		}
		if _, err := other.Acquire(ctx, key, padlock.Options{}); !errors.Is(err, padlock.ErrNotAcquired) {
			t.Fatalf("Acquire while resumed: %v, want ErrNotAcquired", err)
		}
		if err := resumed.Release(ctx); err != nil {
			t.Fatalf("Release of the resumed lock: %v", err)
		}
		next := mustAcquire(t, other, ctx, key, padlock.Options{})
		if next.Fence() <= own.Fence {
			t.Fatalf("next fence %d, want above %d", next.Fence(), own.Fence)
		}
		next.Release(ctx)
	})
}

// TestResumeNotHeld: Resume checks the token in Redis.
func TestResumeNotHeld(t *testing.T) {
	l, _, _ := newLocker(t)
	ctx := ctxFor(t)
	key := testKey(t)
	lk := mustAcquire(t, l, ctx, key, padlock.Options{TTL: 200 * time.Millisecond, NoRenew: true})
	own, err := lk.Detach()
	if err != nil {
		t.Fatal(err)
	}
	wrong := own
	wrong.Token = "not-the-token"
	if _, err := l.Resume(ctx, wrong, padlock.Options{}); !errors.Is(err, padlock.ErrNotHeld) {
		t.Fatalf("Resume with another token: %v, want ErrNotHeld", err)
	}
	time.Sleep(400 * time.Millisecond) // the lease ends: nobody resumed it
	if _, err := l.Resume(ctx, own, padlock.Options{}); !errors.Is(err, padlock.ErrNotHeld) {
		t.Fatalf("Resume after the lease ended: %v, want ErrNotHeld", err)
	}
	if _, err := l.Resume(ctx, padlock.Ownership{Key: key}, padlock.Options{}); !errors.Is(err, padlock.ErrInvalid) {
		t.Fatalf("Resume without a token: %v, want ErrInvalid", err)
	}
	if _, err := lk.Detach(); !errors.Is(err, padlock.ErrNotHeld) {
		t.Fatalf("second Detach: %v, want ErrNotHeld", err)
	}
}

// TestResumeTwice: a queue that delivers a job twice has two workers
// resume the same Ownership. Only the first may hold the lock.
func TestResumeTwice(t *testing.T) {
	queuer, srv, _ := newLocker(t)
	w1 := padlock.MustNew(t, srv.Client(t))
	defer w1.Close()
	w2 := padlock.MustNew(t, srv.Client(t))
	defer w2.Close()
	ctx := ctxFor(t)
	lk := mustAcquire(t, queuer, ctx, testKey(t), padlock.Options{TTL: 5 * time.Second})
	own, err := lk.Detach()
	if err != nil {
		t.Fatalf("Detach: %v", err)
	}
	first, err := w1.Resume(ctx, own, padlock.Options{})
	if err != nil {
		t.Fatalf("first Resume: %v", err)
	}
	defer first.Release(ctx)
	second, err := w2.Resume(ctx, own, padlock.Options{})
	if !errors.Is(err, padlock.ErrNotHeld) {
		if second != nil {
			second.Release(ctx)
		}
		t.Fatalf("second Resume of one Ownership: %v, want ErrNotHeld", err)
	}
	if err := first.Err(); err != nil {
		t.Fatalf("first resumed lock after the second Resume: %v, want held", err)
	}
}

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

// TestResumeSentAgainReturnsTheLock: Redis runs a Resume, the connection
// closes before its reply, and padlock sends it again. The copy finds the
// lock under the resuming token: Resume returns the lock, not ErrNotHeld.
// Regression: the copy said ErrNotHeld; the lock stayed under a lost token.
func TestResumeSentAgainReturnsTheLock(t *testing.T) {
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

// TestResumeLateReplyIsUnavailable: Redis runs a Resume, but its reply
// comes after the new lease has run out. Resume does not return a lock that
// is lost already: it returns ErrUnavailable.
// Regression: Resume returned a lock already lost (explorer).
func TestResumeLateReplyIsUnavailable(t *testing.T) {
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
