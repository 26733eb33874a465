package padlock

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/padlockgo/padlock/internal/redistest"
)

// TestHoldNoticeBeforeJoiningIsKept: a notice that names a queued waiter
// before it has taken its place in its Locker's line (right after the first
// attempt that queued it in Redis) is not lost: the waiter finds it when it
// joins, and tries again at once.
// Regression: a notice that came before the waiter joined its line was lost.
func TestHoldNoticeBeforeJoiningIsKept(t *testing.T) {
	srv := redistest.Start(t)
	n := newNotifier(srv.Client(t), "self")
	defer n.close()
	ctx := context.Background()
	const channel = "padlock:{k}:sem"
	newWaiter := func(token string) *waiter {
		return &waiter{h: &holdAcquisition{named: token}, wake: make(chan struct{}, 1)}
	}
	first := n.enter(ctx, channel, newWaiter("first"), wakeOne)
	n.notify(channel, "late") // names a waiter not in line yet
	late := n.enter(ctx, channel, newWaiter("late"), wakeOne)
	other := n.enter(ctx, channel, newWaiter("other"), wakeOne)
	sleep, open := n.parkHold(late)
	if sleep || !open {
		t.Errorf("the named waiter, joining after its notice: parkHold = %v, %v; want to try at once", sleep, open)
	}
	if sleep, _ := n.parkHold(other); !sleep {
		t.Errorf("a waiter the notice did not name: parkHold = %v, want asleep", sleep)
	}
	for _, w := range []*waiter{first, late, other} {
		n.leave(channel, w, false)
	}
}

// TestTurnsTakenWhenTheHolderHasABlock: Lockers take turns. A holder that
// took the key with a wait (so with a block of fences it could hand on
// within its Locker) releases while a waiter of its own Locker and one of
// another Locker that asked wait: the other Locker's waiter gets it
// first. (A test whose holder had one fence, and so could never hand on,
// let a break of the turns pass.)
func TestTurnsTakenWhenTheHolderHasABlock(t *testing.T) {
	_, a, b := twoLockers(t)
	ctx := context.Background()
	const key = "turns-block"
	holder, err := a.Acquire(ctx, key, Options{Wait: time.Second}) // a waiting Acquire: a block of fences
	if err != nil {
		t.Fatal(err)
	}
	local := queueWaiters(t, a, key, 1, Options{Wait: 30 * time.Second})
	other := queueWaiters(t, b, key, 1, Options{Wait: 30 * time.Second})
	awaitWaiters(t, a, key, "want notice", func(kw *keyWaiters) bool { return len(kw.wanters) == 1 })
	if err := holder.Release(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case h := <-other:
		h.lk.Release(ctx)
		h2 := <-local
		h2.lk.Release(ctx)
	case h := <-local:
		h.lk.Release(ctx)
		<-other
		t.Fatalf("the releasing Locker kept the key for its own waiter (fence %d after %d) though another Locker's waiter asked", h.lk.Fence(), holder.Fence())
	}
}

// TestTurnServesOnlyTheWaitersQueuedAsItBegan: a Locker's turn covers the
// waiters in its line when it took the key, not the ones that came
// after, even when one of the first gave up: a's first waiter takes the
// key with a's second behind it; the second gives up and a third joins;
// the first's release goes to b's waiter, which asked, not to the third.
// (A count of the waiters queued let the third take the second's place.)
func TestTurnServesOnlyTheWaitersQueuedAsItBegan(t *testing.T) {
	_, a, b := twoLockers(t)
	ctx := context.Background()
	const key = "turn-members"
	o := Options{Wait: 30 * time.Second}
	holder, err := b.Acquire(ctx, key, Options{})
	if err != nil {
		t.Fatal(err)
	}
	mine := queueWaiters(t, a, key, 1, o)
	// a's second waiter, which gives up once a's first holds the key.
	gaveUp := make(chan error, 1)
	sctx, stop := context.WithCancel(ctx)
	defer stop()
	go func() {
		lk, err := a.Acquire(sctx, key, o)
		if lk != nil {
			lk.Release(ctx)
		}
		gaveUp <- err
	}()
	awaitWaiters(t, a, key, "a's second waiter in line", func(kw *keyWaiters) bool { return kw != nil && len(kw.waiters) == 2 })
	waitParked(t, a, key, 2)
	theirs := queueWaiters(t, b, key, 1, o)
	first := handedOnRelease(t, ctx, holder, mine)
	stop()
	if err := <-gaveUp; !errors.Is(err, context.Canceled) {
		t.Fatalf("a's second waiter: %v, want context.Canceled", err)
	}
	third := joinLine(t, a, key, "a's third waiter", o, 1)
	awaitWaiters(t, a, key, "b's want heard", func(kw *keyWaiters) bool { return len(kw.wanters) > 0 })
	if err := first.lk.Release(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case hb := <-theirs:
		if hb.lk == nil {
			t.Fatal("b's waiter got no lock")
		}
		if err := hb.lk.Release(ctx); err != nil {
			t.Fatal(err)
		}
	case lk := <-third:
		t.Fatalf("a's third waiter, which came during a's turn, got the key (fence %d after %d) before b's waiter, which asked", lk.Fence(), first.lk.Fence())
	}
	if lk := <-third; lk != nil {
		lk.Release(ctx)
	}
}
