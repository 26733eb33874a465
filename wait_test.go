package padlock

import (
	"context"
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/padlockgo/padlock/internal/redistest"
	"github.com/redis/go-redis/v9"
)

// stopAfter is a strategy that stops after that many attempts, written
// without LimitAttempts.
type stopAfter int

func (s stopAfter) NextBackoff(attempt int) time.Duration {
	if attempt+1 >= int(s) {
		return -1
	}
	return time.Millisecond
}

// TestRetryStrategyStopsWaiting has a strategy stop the wait for a key
// another Locker holds while release notices flow: the Acquire must give
// up after the attempts the strategy allows, however much of its Wait is
// left, and NoRetry must not take the key even when the holder lets go
// within the Wait.
func TestRetryStrategyStopsWaiting(t *testing.T) {
	srv := redistest.Start(t)
	for _, tc := range []struct {
		name         string
		retry        RetryStrategy
		releaseAfter time.Duration // 0: the holder keeps the key
		want         int
	}{
		{"NoRetry, holder releases", NoRetry(), 100 * time.Millisecond, 1},
		{"LimitAttempts 3", LimitAttempts(LinearBackoff(time.Millisecond), 3), 0, 3},
		{"own strategy stops after 5", stopAfter(5), 0, 5},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := mustNew(t, srv.Client(t))
			defer l.Close()
			// Look again every 20ms, short of a notice: a strategy that
			// were ignored would let hundreds of attempts through.
			l.recheck = 20 * time.Millisecond
			holderLocker := mustNew(t, srv.Client(t))
			defer holderLocker.Close()
			ctx := context.Background()
			key := strings.ReplaceAll(t.Name(), "/", ":")

			holder, err := holderLocker.Acquire(ctx, key, Options{})
			if err != nil {
				t.Fatal(err)
			}
			defer holder.Release(ctx)
			if tc.releaseAfter > 0 {
				time.AfterFunc(tc.releaseAfter, func() { holder.Release(ctx) })
			}
			lk, err := l.Acquire(ctx, key, Options{Wait: 10 * time.Second, Retry: tc.retry})
			if lk != nil {
				lk.Release(ctx)
				t.Fatalf("took the lock (fence %d); want ErrNotAcquired after %d attempts", lk.Fence(), tc.want)
			}
			var na *NotAcquiredError
			if !errors.As(err, &na) {
				t.Fatalf("got %v, want ErrNotAcquired", err)
			}
			if na.Attempts != tc.want {
				t.Fatalf("got %d attempts, want %d", na.Attempts, tc.want)
			}
		})
	}
}

// TestSubscribeRefusedFollowsStrategy waits as a Redis user that may not
// SUBSCRIBE (a user without channel permissions is refused the same way,
// NOPERM, though also the PUBLISH of a waiting attempt): go-redis reports
// no error, the refusal never reaches the notifier, and the waiter must
// attempt on the strategy's schedule instead of once per subscribe
// timeout.
func TestSubscribeRefusedFollowsStrategy(t *testing.T) {
	srv := redistest.Start(t)
	if !srv.Real() {
		t.Skip("needs ACL")
	}
	admin := srv.Client(t)
	ctx := context.Background()
	if err := admin.Do(ctx, "ACL", "SETUSER", "nosub", "on", ">pw", "~*", "&*", "+@all", "-subscribe", "-ssubscribe").Err(); err != nil {
		t.Fatal(err)
	}
	rdb := srv.Client(t, func(o *redis.Options) { o.Username, o.Password = "nosub", "pw" })

	// The premise: Subscribe succeeds, and only a reader sees the refusal.
	ps := rdb.Subscribe(ctx, "probe")
	if _, err := ps.Receive(ctx); err == nil || !strings.Contains(err.Error(), "NOPERM") {
		t.Fatalf("got %v from the subscription, want a NOPERM error", err)
	}
	ps.Close()

	calls := redistest.CountCommands("evalsha", "eval")
	rdb.AddHook(calls)
	l := mustNew(t, rdb)
	defer l.Close()
	holderLocker := mustNew(t, admin)
	defer holderLocker.Close()
	holder, err := holderLocker.Acquire(ctx, "refused", Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Release(ctx)

	// LinearBackoff(20ms) sleeps 10-20ms between attempts: 50 to 100 in a
	// second. Expect a fifth of the fewest, for a loaded machine; once
	// per subscribe timeout would be 2.
	const wait, step = time.Second, 20 * time.Millisecond
	_, err = l.Acquire(ctx, "refused", Options{Wait: wait, Retry: LinearBackoff(step)})
	if !errors.Is(err, ErrNotAcquired) {
		t.Fatalf("got %v, want ErrNotAcquired", err)
	}
	n := calls.Load()
	if least, most := int64(wait/step/5), int64(wait/(step/2))+3; n < least || n > most {
		t.Fatalf("got %d attempts in %v, want %d to %d (one each 10-20ms)", n, wait, least, most)
	}
}

// TestCalledOffWaiterPassesHandedLockOn hands a lock to a waiter whose
// wait was called off as it came: the waiter must leave the line before it
// lets the lock go, so that the lock goes on to the next waiter by
// hand-off (the next fence), not back through Redis.
func TestCalledOffWaiterPassesHandedLockOn(t *testing.T) {
	l, _, _ := startLocker(t)
	ctx := context.Background()
	const key = "called-off"
	o := Options{Wait: 10 * time.Second}

	// The lock as it would be handed to the waiter below: taken by a
	// waiting Acquire, with fences to spare.
	handedLock, err := l.Acquire(ctx, key, o)
	if err != nil {
		t.Fatal(err)
	}
	handedLock.fenceEnd = handedLock.fence + 5

	// The waiter it is handed to, first in line, and one behind it.
	a := &acquisition{l: l, key: key, o: o.withDefaults(l.defaults), pacing: pacing{deadline: time.Now().Add(o.Wait)}}
	a.id = newLockID(l.keys, key, newToken(), a.o)
	a.w = l.notifier.join(ctx, a.id.lockKey(), a)
	next := make(chan *Lock, 1)
	go func() {
		lk, err := l.Acquire(ctx, key, o)
		if err != nil {
			t.Errorf("next waiter: %v", err)
		}
		next <- lk
	}()
	awaitWaiters(t, l, key, "a second waiter", func(kw *keyWaiters) bool { return kw != nil && len(kw.waiters) == 2 })
	waitParked(t, l, key, 1)

	cctx, cancel := context.WithCancel(ctx)
	cancel()
	lk, err := a.receive(cctx, handedLock)
	if lk != nil || !errors.Is(err, ErrNotAcquired) || !errors.Is(err, context.Canceled) {
		t.Fatalf("got %v, %v; want ErrNotAcquired and context.Canceled", lk, err)
	}
	got := <-next
	if got == nil {
		return
	}
	defer got.Release(ctx)
	if got.Fence() != handedLock.Fence()+1 {
		t.Fatalf("next waiter got fence %d, want %d: the lock handed on, not taken anew from Redis", got.Fence(), handedLock.Fence()+1)
	}
}

// TestUnanswered checks which failed attempts count toward giving up on
// an unreachable Redis: not a slow grant, nor a Redlock vote that enough
// nodes answered but split, which the next attempt may settle.
func TestUnanswered(t *testing.T) {
	refused := &net.OpError{Op: "dial", Net: "tcp", Err: errors.New("connection refused")}
	for _, tc := range []struct {
		name string
		err  error
		want bool
	}{
		{"refused", refused, true},
		{"timeout", context.DeadlineExceeded, true},
		{"late grant", errLateGrant, false},
		{"split vote", quorumOfOutcomes(3, NodeAgreed, NodeAgreed, NodeBusy, NodeBusy, NodeUnreachable), false},
		{"too few nodes", quorumOfOutcomes(3, NodeAgreed, NodeBusy, NodeUnreachable, NodeUnreachable, NodeUnreachable), true},
		{"restarting nodes", quorumOfOutcomes(2, NodeAgreed, NodeRestarting, NodeRestarting), false},
		{"restarting and down", quorumOfOutcomes(2, NodeRestarting, NodeUnreachable, NodeUnreachable), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := unanswered(tc.err); got != tc.want {
				t.Fatalf("got %v, want %v", got, tc.want)
			}
		})
	}
}

// quorumOfOutcomes is the QuorumError of an acquire whose nodes did as
// outcomes say, need of them being a majority.
func quorumOfOutcomes(need int, outcomes ...NodeOutcome) *QuorumError {
	q := &QuorumError{Op: "acquire", Need: need}
	for i, o := range outcomes {
		q.Nodes = append(q.Nodes, NodeResult{Index: i, Outcome: o})
	}
	return q
}
