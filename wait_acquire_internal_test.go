package padlock

import (
	"context"
	"errors"
	"net"
	"testing"
	"time"
)

// TestHandedLockLostBeforeWakeUp: a lock handed to a waiter that is lost
// before the waiter wakes is not returned by its Acquire.
func TestHandedLockLostBeforeWakeUp(t *testing.T) {
	l, _, _ := startLocker(t)
	ctx := context.Background()
	lk, err := l.Acquire(ctx, "lost-in-hand", Options{})
	if err != nil {
		t.Fatal(err)
	}
	lk.finish(ErrLockLost) // as the watchdog ends a lease it can no longer trust
	a := &acquisition{l: l, key: "lost-in-hand", o: Options{}, id: lk.id}
	got, err := a.receive(ctx, lk)
	if got != nil || err != nil {
		t.Fatalf("receive of a lost lock: %v, %v; want neither, so that the waiter tries Redis", got, err)
	}
	if n, _ := l.store.(single).client.Exists(ctx, lk.id.lockKey()).Result(); n != 0 {
		t.Fatal("the lost lock's key is still in Redis: receive must let it go")
	}
}

// TestCalledOffWaiterPassesHandedLockOn hands a lock to a waiter whose
// wait was called off as it came: the waiter must leave the line before it
// lets the lock go, so that the lock goes on to the next waiter by
// hand-off (the next fence), not back through Redis.
func TestCalledOffWaiterPassesHandedLockOn(t *testing.T) {
	l, _, _ := startLocker(t)
	l.recheck = time.Hour // the next waiter wakes for the hand-off alone
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
