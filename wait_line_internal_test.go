package padlock

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/padlockgo/padlock/internal/redistest"
	"github.com/redis/go-redis/v9"
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

// TestLineBidsLeftWithTheLastWaiter: two Acquires of one Locker try at
// once; the second to join its line passes its bid, the one Redis holds,
// to the line. Both give up before the first takes it over: the last to
// leave withdraws it, so the release grants nothing to it, and the live
// waiter of another Locker has the key within a second.
func TestLineBidsLeftWithTheLastWaiter(t *testing.T) {
	srv := redistest.Start(t)
	h, live := mustNew(t, srv.Client(t)), mustNew(t, srv.Client(t))
	defer h.Close()
	defer live.Close()
	gate := &replyGate{sha: plainScripts.acquire.Hash(), second: make(chan struct{})}
	wc := srv.Client(t)
	wc.AddHook(gate)
	w := mustNew(t, wc)
	defer w.Close()
	w.recheck = time.Hour // the first waiter looks again only when woken
	ctx := context.Background()
	const key = "line-bids"
	o := Options{TTL: longLease, Wait: longLease}

	holder, err := h.Acquire(ctx, key, Options{TTL: longLease})
	if err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithCancel(ctx)
	var done sync.WaitGroup
	for range 2 {
		done.Go(func() {
			if lk, err := w.Acquire(wctx, key, o); err == nil {
				lk.Release(ctx)
			}
		})
	}
	awaitWaiters(t, w, key, "the second waiter's bid passed to the line", func(kw *keyWaiters) bool { return kw != nil && len(kw.waiters) == 2 && len(kw.lineBids) == 1 })
	waitParked(t, w, key, 2)
	cancel()
	done.Wait()
	bidsGone(t, srv.Client(t), holder.id.bidsKey(), w.id)
	got := queueWaiters(t, live, key, 1, o)
	released := time.Now()
	if err := holder.Release(ctx); err != nil {
		t.Fatal(err)
	}
	nextLiveWaiter(t, got, released).Release(ctx)
}

// replyGate is a go-redis hook that holds the reply of the first call of
// the script whose SHA1 is sha until a second call of it has begun, so
// that two attempts made at once reach Redis in the order they began and
// their callers read their replies in that order too.
type replyGate struct {
	sha    string
	calls  atomic.Int32
	second chan struct{}
}

func (g *replyGate) DialHook(next redis.DialHook) redis.DialHook { return next }

func (g *replyGate) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		args := cmd.Args()
		if len(args) < 2 || args[1] != g.sha {
			return next(ctx, cmd)
		}
		switch g.calls.Add(1) {
		case 1:
			err := next(ctx, cmd)
			<-g.second
			return err
		case 2:
			// Sent after the first ran in Redis; the first's caller
			// reads its reply only now.
			err := next(ctx, cmd)
			close(g.second)
			time.Sleep(20 * time.Millisecond) // the first joins its line first
			return err
		}
		return next(ctx, cmd)
	}
}

func (g *replyGate) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// bidsGone waits, 5 s at most, until the bids hash bids holds no bid of
// the Locker whose id is locker: a waiter's withdrawal goes on behind its
// answer.
func bidsGone(t *testing.T, rdb *redis.Client, bids, locker string) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for rdb.HExists(context.Background(), bids, locker).Val() {
		if time.Now().After(deadline) {
			t.Fatalf("the bid %q of a Locker with no waiter left stands 5s on: nobody withdrew it", rdb.HGet(context.Background(), bids, locker).Val())
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestLastToLeaveGetsTheLineBids: the bids waiters passed to a line go
// back to whoever leaves it last, to withdraw them; nobody before.
func TestLastToLeaveGetsTheLineBids(t *testing.T) {
	n, l, channel := lineBidsSetup(t)
	ctx := context.Background()
	a := &acquisition{l: l, key: "k", o: Options{Wait: time.Second}}
	first := n.join(ctx, channel, a, false)
	second := n.join(ctx, channel, a, false)
	passed := passBidToLine(n, l, first)
	if orphans := n.leave(channel, first, false); len(orphans) != 0 {
		t.Fatalf("the first to leave got %d line bids, with a waiter still in line", len(orphans))
	}
	orphans := n.leave(channel, second, false)
	if len(orphans) != 1 || orphans[0].id != passed.id {
		t.Fatalf("the last to leave got %v; want the bid passed to the line", orphans)
	}
}

// The last default-mode waiter to leave a line that fair waiters stay in
// gets the line's bids too: a fair waiter never claims a default-mode
// grant, so a release would grant them to nobody. (They once stayed
// until the last fair waiter left, and a default release, or a set's,
// granted one to nobody for the claim window.)
func TestLastDefaultWaiterGetsTheLineBids(t *testing.T) {
	n, l, channel := lineBidsSetup(t)
	ctx := context.Background()
	def := n.join(ctx, channel, &acquisition{l: l, key: "k", o: Options{Wait: time.Second}}, false)
	fair := n.join(ctx, channel, &acquisition{l: l, key: "k", o: Options{Wait: time.Second, Fair: true}}, false)
	passed := passBidToLine(n, l, def)
	orphans := n.leave(channel, def, false)
	if len(orphans) != 1 || orphans[0].id != passed.id {
		t.Fatalf("the last default-mode waiter to leave got %v; want the bid passed to the line, which the fair waiter left will not claim", orphans)
	}
	if orphans := n.leave(channel, fair, false); len(orphans) != 0 {
		t.Fatalf("the fair waiter, last to leave, got %v; want nothing left", orphans)
	}
}

// lineBidsSetup returns a notifier and a Locker on a server of t's own,
// and the channel of key "k", for the tests of the bids passed to a line.
func lineBidsSetup(t *testing.T) (*notifier, *Locker, string) {
	srv := redistest.Start(t)
	n := newNotifier(srv.Client(t), "self")
	t.Cleanup(n.close)
	l := mustNew(t, srv.Client(t))
	t.Cleanup(func() { _ = l.Close() })
	return n, l, "padlock:{k}"
}

// passBidToLine puts a bid in w's line, as a waiter passes its own there,
// and returns it.
func passBidToLine(n *notifier, l *Locker, w *waiter) bidSent {
	passed := bidSent{id: mintID(l.keys, "k", Options{}), busy: true}
	n.mu.Lock()
	w.kw.lineBids = append(w.kw.lineBids, passed)
	n.mu.Unlock()
	return passed
}
