package padlock

import (
	"context"
	"net"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/padlockgo/padlock/internal/redistest"
	"github.com/redis/go-redis/v9"
)

// strandHook makes the first acquire attempt on key, and the command that
// follows it on key (the cleanup release of that attempt), fail as if
// their replies were lost, without sending them: the test sends them
// later, as a network that delivers a stalled connection's bytes after a
// new connection's would.
type strandHook struct {
	key string

	mu    sync.Mutex
	held  [][]any
	phase int
}

func (h *strandHook) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *strandHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		args := cmd.Args()
		onKey := len(args) > 3 && args[0] == "evalsha" && args[3] == h.key
		h.mu.Lock()
		strand := onKey && h.phase < 2 && (h.phase == 1 || args[2] == int64(2) || args[2] == 2)
		if strand {
			h.phase++
			h.held = append(h.held, args)
		}
		h.mu.Unlock()
		if strand {
			err := &net.OpError{Op: "read", Net: "tcp", Err: os.ErrDeadlineExceeded}
			cmd.SetErr(err)
			return err
		}
		return next(ctx, cmd)
	}
}

func (h *strandHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// TestLostAttemptRunsLate: an attempt of a waiting Acquire is lost, and so
// is the release that cleans up after it; the next attempt takes the lock.
// Both lost commands may still run after that (their bytes were on the
// way). The cleanup release then deletes the key the new lock holds, and
// another Locker takes it: the holder must have been told, or must not
// have been handed the lock.
func TestLostAttemptRunsLate(t *testing.T) {
	srv := redistest.Start(t)
	rdb := srv.Client(t)
	l := mustNew(t, rdb)
	defer l.Close()
	ctx := context.Background()
	const key = "stranded"
	hook := &strandHook{key: l.RedisKey(key)}
	rdb.AddHook(hook)
	lk, err := l.Acquire(ctx, key, Options{TTL: 10 * time.Second, Wait: 5 * time.Second})
	if err != nil {
		t.Fatalf("Acquire: %v", err)
	}
	defer lk.Release(ctx)
	hook.mu.Lock()
	held := hook.held
	hook.mu.Unlock()
	if len(held) != 2 {
		t.Fatalf("stranded %d commands, want the lost attempt and its cleanup", len(held))
	}
	// The stranded bytes arrive: the attempt, then its cleanup.
	plain := srv.Client(t)
	for _, sc := range []*script{plainScripts.acquire, plainScripts.release} {
		if err := sc.Load(ctx, plain).Err(); err != nil {
			t.Fatal(err)
		}
	}
	for _, args := range held {
		if err := plain.Do(ctx, args...).Err(); err != nil {
			t.Fatalf("late %v: %v", args[0], err)
		}
	}
	other := mustNew(t, srv.Client(t))
	defer other.Close()
	theirs, err := other.Acquire(ctx, key, Options{})
	if err != nil {
		t.Logf("the key stayed held: %v", err)
		return
	}
	defer theirs.Release(ctx)
	if lk.Err() == nil {
		t.Fatalf("another Locker took the key (fence %d) while the holder's lock (fence %d) reports held until %v",
			theirs.Fence(), lk.Fence(), time.Until(lk.ValidUntil()).Round(time.Millisecond))
	}
}

// TestDetachWithRenewalInFlight: the watchdog's renewal, with the lock's
// 300ms lease, is on its way when the lock is detached, and runs after
// another Locker resumed the lock with a 10s lease. Redis then holds
// 300ms; the resumed lock must not report held once another owner can
// take the key.
func TestDetachWithRenewalInFlight(t *testing.T) {
	srv := redistest.Start(t)
	const ttl = 300 * time.Millisecond
	hook := &lagHook{
		before:      func(args []any) bool { return extendCall(args, ttl) },
		beforeDelay: 100 * time.Millisecond, // within the renewal's deadline
		held:        make(chan struct{}, 1),
	}
	rdb := srv.Client(t)
	rdb.AddHook(hook)
	a := mustNew(t, rdb)
	defer a.Close()
	b := mustNew(t, srv.Client(t))
	defer b.Close()
	ctx := context.Background()
	const key = "detached"
	lk, err := a.Acquire(ctx, key, Options{TTL: ttl})
	if err != nil {
		t.Fatal(err)
	}
	hook.armed.Store(true)
	select {
	case <-hook.held:
	case <-time.After(5 * time.Second):
		t.Fatal("no renewal went out")
	}
	own, err := lk.Detach()
	if err != nil {
		t.Fatalf("Detach: %v", err)
	}
	resumed, err := b.Resume(ctx, own, Options{TTL: 10 * time.Second})
	if err != nil {
		t.Fatalf("Resume: %v", err)
	}
	defer resumed.Release(ctx)
	time.Sleep(150*time.Millisecond + ttl) // the renewal runs, then its lease ends
	contend(t, srv, key, resumed, 0)
}

// TestLostAttemptRunsAfterExtend: a lost attempt of the Acquire that took
// the lock runs after an Extend to a longer lease. acquire.lua takes the
// lock anew for its own token, with the Acquire's shorter lease: the
// holder must not go on trusting the Extend's.
func TestLostAttemptRunsAfterExtend(t *testing.T) {
	srv := redistest.Start(t)
	rdb := srv.Client(t)
	l := mustNew(t, rdb)
	defer l.Close()
	ctx := context.Background()
	const key = "stranded"
	const ttl = 500 * time.Millisecond
	hook := &strandHook{key: l.RedisKey(key)}
	rdb.AddHook(hook)
	lk, err := l.Acquire(ctx, key, Options{TTL: ttl, Wait: 5 * time.Second})
	if err != nil {
		t.Fatalf("Acquire: %v", err)
	}
	defer lk.Release(ctx)
	if err := lk.Extend(ctx, 10*time.Second); err != nil {
		t.Fatalf("Extend: %v", err)
	}
	hook.mu.Lock()
	attempt := hook.held[0] // its cleanup stays lost
	hook.mu.Unlock()
	plain := srv.Client(t)
	if err := plainScripts.acquire.Load(ctx, plain).Err(); err != nil {
		t.Fatal(err)
	}
	if err := plain.Do(ctx, attempt...).Err(); err != nil {
		t.Fatalf("late attempt: %v", err)
	}
	time.Sleep(ttl + 100*time.Millisecond)
	contend(t, srv, key, lk, 0)
}
