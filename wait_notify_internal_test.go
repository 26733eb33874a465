package padlock

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/padlockgo/padlock/internal/redistest"
	"github.com/redis/go-redis/v9"
)

// TestReleaseWakesOneWaiter queues many waiters in one Locker and checks
// that a release of another Locker costs no attempt at all (it grants the
// key to the first waiter's bid), not one per waiter, and that no waiter
// polls while the holder keeps the lock. It runs in a bubble.
func TestReleaseWakesOneWaiter(t *testing.T) {
	inBubble(t, func(t *testing.T, b *bubble) {
		calls := redistest.CountCommands("evalsha", "eval")
		rdb := b.client()
		rdb.AddHook(calls)
		l := b.locker(rdb)
		holderLocker := b.locker(b.client()) // another "process"
		ctx := context.Background()
		const key, waiters = "herd", 10

		holder, err := holderLocker.Acquire(ctx, key, Options{})
		if err != nil {
			t.Fatal(err)
		}
		got := make(chan *Lock, waiters)
		var wg sync.WaitGroup
		for range waiters {
			wg.Go(func() {
				lk, err := l.Acquire(ctx, key, Options{Wait: 30 * time.Second, Retry: LinearBackoff(time.Millisecond)})
				if err != nil {
					t.Errorf("waiter: %v", err)
					return
				}
				got <- lk
			})
		}
		waitForWaiters(t, l, key, waiters)
		before := calls.Load()
		time.Sleep(300 * time.Millisecond) // a polling waiter would try ~300 times here
		// At most one attempt per waiter that started before the subscription
		// was live, made right after subscribing (it may land inside this
		// window), and one more the first in line decided on by its retry
		// strategy just before the subscription went live; polling at 1ms
		// would make thousands.
		if polled := calls.Load() - before; polled > waiters+1 {
			t.Fatalf("waiters made %d attempts while the lock was held; want at most %d (they wait for a notice)", polled, waiters+1)
		}

		// The release grants the key to the first waiter's bid, which its
		// next attempt claims (wait_claim.go); the other waiters get it
		// handed on within the Locker, each hand-off after one
		// confirmation, and only the last release goes back to Redis:
		// one claim, waiters-1 confirmations and one release.
		if err := handoverScript.Load(ctx, rdb).Err(); err != nil { // one EVALSHA per hand-off
			t.Fatal(err)
		}
		before = calls.Load()
		holder.Release(ctx)
		var fence int64
		for range waiters {
			lk := <-got
			if lk.Fence() <= fence {
				t.Fatalf("fence %d after %d: fences must rise with every holder", lk.Fence(), fence)
			}
			fence = lk.Fence()
			if err := lk.Release(ctx); err != nil {
				t.Fatal(err)
			}
		}
		if n := calls.Load() - before; n != waiters+1 {
			t.Fatalf("%d script calls for %d hand-overs, want %d (the claim, a confirmation per hand-off, one release)", n, waiters, waiters+1)
		}
		wg.Wait()
	})
}

// TestWaiterInAnotherLockerWakesOnNotice has the holder and the waiter in
// different Lockers, as in different processes: the waiter must wake on the
// release notice, not by polling.
func TestWaiterInAnotherLockerWakesOnNotice(t *testing.T) {
	srv := redistest.Start(t)
	calls := redistest.CountCommands("evalsha", "eval")
	rdb := srv.Client(t)
	rdb.AddHook(calls)
	waiterLocker := mustNew(t, rdb)
	defer waiterLocker.Close()
	holderLocker := mustNew(t, srv.Client(t))
	defer holderLocker.Close()
	ctx := context.Background()
	const key = "notice"

	holder, err := holderLocker.Acquire(ctx, key, Options{TTL: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan *Lock, 1)
	go func() {
		// A backoff this fast would make hundreds of attempts while the
		// holder holds on; notices make it unnecessary.
		lk, err := waiterLocker.Acquire(ctx, key, Options{Wait: 30 * time.Second, Retry: LinearBackoff(time.Millisecond)})
		if err != nil {
			t.Errorf("waiter: %v", err)
		}
		done <- lk
	}()
	waitForWaiters(t, waiterLocker, key, 1)
	// Until the subscription is confirmed the waiter follows its strategy;
	// from then on only notices (and the lease end) wake it.
	before := calls.Load()
	time.Sleep(300 * time.Millisecond)
	holder.Release(ctx)
	lk := <-done
	if lk == nil {
		return
	}
	defer lk.Release(ctx)
	// An attempt decided on by the retry strategy just before the
	// subscription went live, one more once subscribed (either may land
	// after the subscription was seen live), and the one the notice
	// triggered.
	if n := calls.Load() - before; n > 3 {
		t.Fatalf("waiter made %d attempts once notices flowed, want at most 3", n)
	}
}

// publishCalls returns how many PUBLISH commands srv has run, including
// those run by scripts.
func publishCalls(t *testing.T, rdb *redis.Client) int64 {
	t.Helper()
	info, err := rdb.Info(context.Background(), "commandstats").Result()
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.SplitSeq(info, "\r\n") {
		if rest, ok := strings.CutPrefix(line, "cmdstat_publish:calls="); ok {
			n, _ := strconv.ParseInt(rest[:strings.IndexByte(rest, ',')], 10, 64)
			return n
		}
	}
	return 0
}

// TestReleaseNoticeOnlyWhenWaited checks that a release publishes a notice
// only when someone waits for one: not in an uncontended cycle, but when
// a waiter of another Locker marked the lock, which must then wake by that
// notice alone.
func TestReleaseNoticeOnlyWhenWaited(t *testing.T) {
	srv := redistest.Start(t)
	if !srv.Real() {
		t.Skip("needs INFO commandstats")
	}
	stats := srv.Client(t)
	l := mustNew(t, srv.Client(t))
	defer l.Close()
	ctx := context.Background()

	before := publishCalls(t, stats)
	for range 5 {
		lk, err := l.Acquire(ctx, "quiet", Options{})
		if err != nil {
			t.Fatal(err)
		}
		if err := lk.Release(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if n := publishCalls(t, stats) - before; n != 0 {
		t.Fatalf("5 uncontended cycles published %d notices, want none", n)
	}

	holder, err := l.Acquire(ctx, "quiet", Options{})
	if err != nil {
		t.Fatal(err)
	}
	other := mustNew(t, srv.Client(t))
	defer other.Close()
	other.recheck = time.Hour // only the notice can wake the waiter
	done := make(chan *Lock, 1)
	go func() {
		lk, err := other.Acquire(ctx, "quiet", Options{Wait: time.Minute, Retry: LinearBackoff(time.Hour)})
		if err != nil {
			t.Error(err)
		}
		done <- lk
	}()
	waitForWaiters(t, other, "quiet", 1)
	waitParked(t, other, "quiet", 1)
	if err := holder.Release(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case lk := <-done:
		if lk != nil {
			lk.Release(ctx)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the waiter that marked the lock was not woken by its release")
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

	// LinearBackoff(20ms) sleeps 10-20ms between attempts: 150 to 300 in
	// three seconds, on a quiet machine. Once per subscribe timeout would
	// be 4; a loaded machine, whose round trips and wake-ups are slow,
	// once made 4 a second. So: more than twice the once-per-timeout
	// count, and never more often than the strategy says.
	const wait, step = 3 * time.Second, 20 * time.Millisecond
	_, err = l.Acquire(ctx, "refused", Options{Wait: wait, Retry: LinearBackoff(step)})
	if !errors.Is(err, ErrNotAcquired) {
		t.Fatalf("got %v, want ErrNotAcquired", err)
	}
	n := calls.Load()
	if least, most := 2*int64(wait/subscribeTimeout+1)+1, int64(wait/(step/2))+3; n < least || n > most {
		t.Fatalf("got %d attempts in %v, want %d to %d (one each 10-20ms; once per %v subscribe timeout would be %d)", n, wait, least, most, subscribeTimeout, wait/subscribeTimeout+1)
	}
}

// TestFairGrantLostWithTheConnectionKeepsTheTurn: the older fair
// waiter's grant notice is lost because its subscription's connection
// drops (the way pub/sub loses a notice), and the younger waiter, in
// another Locker, hears of the grant and looks again when it would end.
// The older waiter, woken as its subscription is made again, claims the
// grant within the claim window, so it keeps its turn.
func TestFairGrantLostWithTheConnectionKeepsTheTurn(t *testing.T) {
	// The older waiter claims within the claim window only if the machine
	// lets it: its first command after the connection drops is timed, and
	// a turn lost with that command's answer late (a loaded machine) is
	// tried again, at most three times in all.
	for try := 1; ; try++ {
		if !fairGrantLostWithTheConnection(t, try == 3) {
			return
		}
		t.Logf("try %d: the older waiter's claim was answered after the claim window; again", try)
	}
}

// fairGrantLostWithTheConnection runs TestFairGrantLostWithTheConnectionKeepsTheTurn
// once; it reports whether the younger waiter took the turn because the
// older one's claim was not answered within the claim window (so the run
// proved nothing), unless last, when that fails t.
func fairGrantLostWithTheConnection(t *testing.T, last bool) (slow bool) {
	srv := redistest.Start(t)
	a := mustNew(t, srv.Client(t))
	defer a.Close()
	bClient := srv.Client(t)
	claims := &firstCommand{}
	bClient.AddHook(claims)
	b := mustNew(t, bClient)
	defer b.Close()
	c := mustNew(t, srv.Client(t))
	defer c.Close()
	b.recheck, c.recheck = time.Hour, time.Hour // only a notice, or the grant's end, wakes them
	lost := grantNotices(b, func(int64) int { return 0 })
	ctx := context.Background()
	const key = "fair-lost-grant"

	holder, err := a.Acquire(ctx, key, Options{TTL: 10 * time.Second, Fair: true})
	if err != nil {
		t.Fatal(err)
	}
	older := queueWaiters(t, b, key, 1, Options{TTL: 10 * time.Second, Wait: 8 * time.Second, Fair: true})
	younger := queueWaiters(t, c, key, 1, Options{TTL: 10 * time.Second, Wait: 8 * time.Second, Fair: true})
	released := time.Now()
	if err := holder.Release(ctx); err != nil {
		t.Fatal(err)
	}
	for lost.Load() == 0 {
		if time.Since(released) > 5*time.Second {
			t.Fatal("no grant notice was sent: the release did not grant the key")
		}
		time.Sleep(time.Millisecond)
	}
	// The connection that lost it drops, and go-redis subscribes again.
	claims.arm()
	if err := srv.Client(t).ClientKillByFilter(ctx, "TYPE", "pubsub").Err(); err != nil {
		t.Fatal(err)
	}
	select {
	case h := <-older:
		if h.lk == nil {
			t.Fatal("the older waiter got no lock")
		}
		t.Logf("the older waiter claimed the grant %v after the release", time.Since(released))
		if h.lk.Fence() <= holder.Fence() {
			t.Fatalf("fence %d after %d", h.lk.Fence(), holder.Fence())
		}
		if err := h.lk.Release(ctx); err != nil {
			t.Fatal(err)
		}
	case h := <-younger:
		if answered, ok := claims.answered(); !last && (!ok || answered.Sub(released) >= claimWindow) {
			h.lk.Release(ctx)
			if h := <-older; h.lk != nil {
				h.lk.Release(ctx)
			}
			return true
		}
		t.Fatalf("the waiter queued later got the lock first (fence %d): the older one's grant ran out unclaimed", h.lk.Fence())
	case <-time.After(5 * time.Second):
		t.Fatal("neither waiter got the lock within 5s of the release")
	}
	if h := <-younger; h.lk == nil {
		t.Fatal("the younger waiter got no lock")
	} else {
		h.lk.Release(ctx)
	}
	return false
}

// firstCommand is a go-redis hook that, once armed, keeps when the first
// command (or pipeline) after it was answered.
type firstCommand struct {
	mu    sync.Mutex
	armed bool
	at    time.Time
}

func (f *firstCommand) arm() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.armed = true
}

func (f *firstCommand) answered() (time.Time, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.at, !f.at.IsZero()
}

func (f *firstCommand) note() {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.armed && f.at.IsZero() {
		f.at = time.Now()
	}
}

func (f *firstCommand) DialHook(next redis.DialHook) redis.DialHook { return next }

func (f *firstCommand) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		err := next(ctx, cmd)
		f.note()
		return err
	}
}

func (f *firstCommand) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		err := next(ctx, cmds)
		f.note()
		return err
	}
}
