package padlock_test

import (
	"context"
	"crypto/sha1"
	"encoding/hex"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/padlockgo/padlock"
	"github.com/redis/go-redis/v9"
)

// lateCleanup is the fault of the late clean-up scenarios, on the script
// commands whose KEYS[1] is key: the first (the attempt) runs and its
// reply is lost; the next command that runs another script (the clean-up
// the client sends for it) is not sent, but held for the test to send
// later. Further attempts pass, and so does everything once the test has
// disarmed it.
type lateCleanup struct {
	key string

	mu      sync.Mutex
	attempt string // the lost attempt's script, once it ran
	held    []any
	done    bool // disarmed, or the clean-up was held
}

func (lc *lateCleanup) fault(ctx context.Context, cmd redis.Cmder, next redis.ProcessHook) error {
	if firstKey(cmd) != lc.key {
		return next(ctx, cmd)
	}
	lc.mu.Lock()
	attempt, done := lc.attempt, lc.done
	lc.mu.Unlock()
	switch {
	case done:
		return next(ctx, cmd)
	case attempt == "": // runs; its reply is lost
		if err := next(ctx, cmd); err != nil {
			return err // NOSCRIPT: the EVAL that follows is the attempt
		}
		lc.mu.Lock()
		lc.attempt = scriptID(cmd)
		lc.mu.Unlock()
		cmd.SetErr(errReplyLost)
		return errReplyLost
	case scriptID(cmd) == attempt: // another attempt
		return next(ctx, cmd)
	}
	// Stalls on the way: the test sends it later.
	lc.mu.Lock()
	lc.held, lc.done = slices.Clone(cmd.Args()), true
	lc.mu.Unlock()
	cmd.SetErr(errReplyLost)
	return errReplyLost
}

// disarm lets everything pass from now on.
func (lc *lateCleanup) disarm() {
	lc.mu.Lock()
	defer lc.mu.Unlock()
	lc.done = true
}

// deliver sends the held command through raw, as the stalled bytes
// arriving late, and returns its reply.
func (lc *lateCleanup) deliver(t *testing.T, ctx context.Context, raw *redis.Client) any {
	t.Helper()
	lc.mu.Lock()
	attempt, held := lc.attempt, lc.held
	lc.mu.Unlock()
	if attempt == "" {
		t.Fatalf("scenario not staged: no attempt on %q", lc.key)
	}
	if held == nil {
		t.Logf("no clean-up was sent for the lost attempt")
		return nil
	}
	reply, err := raw.Do(ctx, held...).Result()
	if err != nil {
		// NOSCRIPT here would be the test's fault (the script was
		// loaded beforehand); any other error is the server's answer.
		if redis.HasErrorPrefix(err, "NOSCRIPT") {
			t.Fatalf("the held %v could not be sent late: %v", held[0], err)
		}
		return err
	}
	return reply
}

// scriptID names the script an EVAL or EVALSHA runs: its SHA1.
func scriptID(cmd redis.Cmder) string {
	args := cmd.Args()
	if len(args) < 2 {
		return ""
	}
	body, _ := args[1].(string)
	if cmd.Name() == "eval" {
		h := sha1.Sum([]byte(body))
		return hex.EncodeToString(h[:])
	}
	return strings.ToLower(body)
}

// lateCleanupCase is one primitive in the late clean-up scenario.
type lateCleanupCase struct {
	// watch is the Redis key a grant's attempt and clean-up name first.
	watch func(l *padlock.Locker, key string) string
	// take takes the grant on l, waiting; rival tries it once, on
	// another Locker.
	take, rival func(ctx context.Context, l *padlock.Locker, key string) (*padlock.Lock, error)
}

// checkLateCleanup stages the scenario: a waiting acquisition's attempt
// takes the grant but its reply is lost; the clean-up the client sends
// for it stalls on the way; the next attempt takes the grant again; then
// the stalled clean-up arrives. The promise: while the holder's Err is
// nil and its ValidUntil is ahead, a rival on another Locker does not get
// in. It runs on virtual time: an engine that makes the next attempt wait
// out the first grant's lease costs nothing, and no margin depends on
// the machine's load.
func checkLateCleanup(t *testing.T, c lateCleanupCase) {
	inBubble(t, func(t *testing.T, b *bubble) {
		l, rdb := b.locker()
		hook := hookOn(rdb)
		raw := b.client()
		rivals, _ := b.locker()
		ctx := context.Background()
		key := testKey(t)

		// The scripts are loaded beforehand, so that EVALSHA runs whenever
		// it arrives (a late one included).
		warm, err := c.take(ctx, l, key+":warm")
		if err != nil {
			t.Fatalf("warming up: %v", err)
		}
		if err := warm.Release(ctx); err != nil {
			t.Fatalf("warming up: Release: %v", err)
		}

		lc := &lateCleanup{key: c.watch(l, key)}
		hook.onProcess(lc.fault)
		lk, err := c.take(ctx, l, key)
		lc.disarm()
		if err != nil {
			t.Fatalf("acquisition after a lost attempt: %v", err)
		}
		defer lk.Release(ctx)
		reply := lc.deliver(t, ctx, raw)

		other, err := c.rival(ctx, rivals, key)
		if err == nil {
			defer other.Release(ctx)
			if until := lk.ValidUntil(); !until.IsZero() && time.Now().Before(until) {
				t.Fatalf("another Locker got in (fence %d) while the holder (fence %d) reports held for %v more: "+
					"the lost attempt's clean-up, arriving late (reply %v), undid the later grant",
					other.Fence(), lk.Fence(), time.Until(until).Round(time.Millisecond), reply)
			}
			t.Logf("another Locker got in after the holder was told (Err %v)", lk.Err())
			return
		}
		if !errors.Is(err, padlock.ErrNotAcquired) {
			t.Fatalf("rival: %v, want ErrNotAcquired", err)
		}
		if err := lk.Err(); err != nil {
			t.Fatalf("holder: Err = %v, want nil: the late clean-up must change nothing", err)
		}
	})
}

// Long leases and waits, free on virtual time: the wait outlasts the
// lease, so that an engine which makes the next attempt a stranger to the
// first grant (which then blocks it until its lease ends) still gets the
// grant.
const (
	lateTTL  = 6 * time.Second
	lateWait = 20 * time.Second
)

// TestLateCleanupKeepsWriteHold: a waiting AcquireWrite's attempt takes
// the write hold, its reply is lost; its clean-up stalls, the next
// attempt takes the hold, and then the clean-up arrives. Promise: while
// the writer's Err is nil and before its ValidUntil, no reader on another
// Locker gets in.
// Regression: the late clean-up released the later attempt's write hold.
func TestLateCleanupKeepsWriteHold(t *testing.T) {
	checkLateCleanup(t, lateCleanupCase{
		watch: func(l *padlock.Locker, key string) string { return l.RedisKey(key) + ":rw:w" },
		take: func(ctx context.Context, l *padlock.Locker, key string) (*padlock.Lock, error) {
			return l.AcquireWrite(ctx, key, padlock.Options{TTL: lateTTL, Wait: lateWait})
		},
		rival: func(ctx context.Context, l *padlock.Locker, key string) (*padlock.Lock, error) {
			return l.AcquireRead(ctx, key, padlock.Options{TTL: lateTTL})
		},
	})
}

// TestLateCleanupKeepsFairLock: the same for a fair mutex. Promise: while
// the holder's Err is nil and before its ValidUntil, another Locker's
// Acquire does not get the key.
// Regression: the late clean-up released the fair lock a later attempt took.
func TestLateCleanupKeepsFairLock(t *testing.T) {
	checkLateCleanup(t, lateCleanupCase{
		watch: func(l *padlock.Locker, key string) string { return l.RedisKey(key) },
		take: func(ctx context.Context, l *padlock.Locker, key string) (*padlock.Lock, error) {
			return l.Acquire(ctx, key, padlock.Options{TTL: lateTTL, Wait: lateWait, Fair: true})
		},
		rival: func(ctx context.Context, l *padlock.Locker, key string) (*padlock.Lock, error) {
			return l.Acquire(ctx, key, padlock.Options{TTL: lateTTL, Fair: true})
		},
	})
}

// TestLateCleanupKeepsFairPermit: the same for a fair semaphore's only
// permit. Promise: while the holder's Err is nil and before its
// ValidUntil, no other Locker gets a permit of the one-permit semaphore.
// Regression: the late clean-up freed the permit a later attempt took.
func TestLateCleanupKeepsFairPermit(t *testing.T) {
	permit := func(o padlock.Options) func(ctx context.Context, l *padlock.Locker, key string) (*padlock.Lock, error) {
		return func(ctx context.Context, l *padlock.Locker, key string) (*padlock.Lock, error) {
			sem, err := l.Semaphore(1)
			if err != nil {
				return nil, err
			}
			return sem.Acquire(ctx, key, o)
		}
	}
	checkLateCleanup(t, lateCleanupCase{
		watch: func(l *padlock.Locker, key string) string { return l.RedisKey(key) + ":sem" },
		take:  permit(padlock.Options{TTL: lateTTL, Wait: lateWait, Fair: true}),
		rival: permit(padlock.Options{TTL: lateTTL, Fair: true}),
	})
}
