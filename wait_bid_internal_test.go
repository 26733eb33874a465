package padlock

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/padlockgo/padlock/internal/redistest"
	"github.com/redis/go-redis/v9"
)

// TestGrantAtReleaseIsClaimed: a waiter of another Locker is given the
// key by the release itself, and claims it with the one attempt its
// notice wakes it for: it makes no other, its fence is above the
// releaser's, Redis holds the key under the claiming attempt's own token
// (not the bid's, which the notice named), and the waiter trusts its
// lease from no later than when it sent that attempt.
//
// So too in fair mode, where the release grants the key to the bid that
// the oldest waiter's entry in the queue carries, and the waiter leaves
// the queue.
func TestGrantAtReleaseIsClaimed(t *testing.T) {
	for _, fair := range []bool{false, true} {
		t.Run(mode(fair), func(t *testing.T) { testGrantAtReleaseIsClaimed(t, fair) })
	}
}

// mode names a test's run in the default or fair mode.
func mode(fair bool) string {
	if fair {
		return "fair"
	}
	return "default"
}

func testGrantAtReleaseIsClaimed(t *testing.T, fair bool) {
	srv := redistest.Start(t)
	a := mustNew(t, srv.Client(t))
	defer a.Close()
	scripts := redistest.CountCommands("evalsha", "eval")
	bc := srv.Client(t)
	bc.AddHook(scripts)
	b := mustNew(t, bc)
	defer b.Close()
	b.recheck = time.Hour // the waiter tries again only if something wakes it
	var bid atomic.Value
	b.notifier.fault = func(_, payload string) (int, time.Duration) {
		if token, _, ok := parseGrant(payload); ok {
			bid.Store(token)
		}
		return 1, 0
	}
	ctx := context.Background()
	const key, ttl = "granted", 5 * time.Second

	holder, err := a.Acquire(ctx, key, Options{TTL: ttl, Fair: fair})
	if err != nil {
		t.Fatal(err)
	}
	got := queueWaiters(t, b, key, 1, Options{TTL: ttl, Wait: 30 * time.Second, Fair: fair})
	tried := scripts.Load()
	released := time.Now()
	h := handedOnRelease(t, ctx, holder, got)
	defer h.lk.Release(ctx)
	if n := scripts.Load(); n != tried+1 {
		t.Fatalf("the waiter's Locker sent %d scripts after the release; want one, the attempt that claims the grant", n-tried)
	}
	granted, _ := bid.Load().(string)
	if granted == "" {
		t.Fatal("no grant notice was heard: the release did not grant the key")
	}
	if h.lk.Token() == granted {
		t.Fatalf("the waiter holds the token %s its grant notice named; want the claiming attempt's own", granted)
	}
	if h.lk.Fence() <= holder.Fence() {
		t.Fatalf("fence %d after %d", h.lk.Fence(), holder.Fence())
	}
	v, err := srv.Client(t).Get(ctx, a.RedisKey(key)).Result()
	if err != nil || !strings.HasPrefix(v, h.lk.Token()+"|") {
		t.Fatalf("Redis holds %q (%v); want the waiter's grant %s", v, err, h.lk.Token())
	}
	if pttl := srv.Client(t).PTTL(ctx, a.RedisKey(key)).Val(); pttl <= claimWindow {
		t.Fatalf("the claimed key's lease is %v; want the waiter's %v, not the grant's claim window", pttl, ttl)
	}
	if until := h.lk.ValidUntil(); until.After(time.Now().Add(ttl)) || until.Before(released) {
		t.Fatalf("the waiter trusts its lease until %v from now; want at most the lease, %v, from the claiming attempt", time.Until(until), ttl)
	}
	if q, _ := srv.Client(t).LRange(ctx, h.lk.id.keys[2], 0, -1).Result(); len(q) != 0 {
		t.Fatalf("the queue holds %q once its only waiter was granted the key; want it empty", q)
	}
}

// TestReleaseBidsForItsOwnWaiters: Lockers take turns. A Locker whose
// turn ends with a waiter of its own in line gives the key to the waiter
// of another Locker that asked for it. When its own waiter has no bid in
// Redis (it queued behind the Locker's waiters and never tried), the
// release bids for it in the same script, and the waiter makes no attempt
// of its own (before, it bid with an attempt a round trip later): when
// the other Locker's holder releases, the key comes back to it by that
// bid, under a token of its own, with its lease trusted from when the
// release that bid was sent. And a turn serves the waiters the Locker had
// when it began: a's first waiter, granted the key with a's second queued
// behind it, hands it to that one, not to b's waiter that asked before.
func TestReleaseBidsForItsOwnWaiters(t *testing.T) {
	srv := redistest.Start(t)
	ac := srv.Client(t)
	scripts := redistest.CountCommands("evalsha", "eval")
	ac.AddHook(scripts)
	a := mustNew(t, ac)
	defer a.Close()
	b := mustNew(t, srv.Client(t))
	defer b.Close()
	ctx := context.Background()
	const key, ttl = "turns", 5 * time.Second
	o := Options{TTL: ttl, Wait: 30 * time.Second}

	// The release script loaded, so that a release is one command.
	warm, err := a.Acquire(ctx, key+":warm", Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := warm.Release(ctx); err != nil {
		t.Fatal(err)
	}
	// b holds the key; a's two waiters queue behind it, then b's.
	holder, err := b.Acquire(ctx, key, Options{TTL: ttl})
	if err != nil {
		t.Fatal(err)
	}
	mine := queueWaiters(t, a, key, 2, o)
	theirs := queueWaiters(t, b, key, 1, o)
	// The release grants the key to a's bid: a's first waiter holds it,
	// and its turn covers a's second.
	first := handedOnRelease(t, ctx, holder, mine)
	// a's third waiter queues behind its second, so it does not try.
	third := joinLine(t, a, key, "a's third waiter", o, 2)
	awaitWaiters(t, a, key, "b's want heard", func(kw *keyWaiters) bool { return len(kw.wanters) > 0 })
	rdb := srv.Client(t)
	before, _ := rdb.HGet(ctx, holder.id.bidsKey(), a.id).Result() // the second's, which the hand-off spends
	handOffAt := time.Now()
	if err := first.lk.Release(ctx); err != nil {
		t.Fatal(err)
	}
	var second handed
	select {
	case second = <-mine:
	case hb := <-theirs:
		t.Fatalf("b's waiter got the key (fence %d) while a's turn had a waiter left", hb.lk.Fence())
	}
	if second.lk == nil {
		t.Fatal("a's second waiter got no lock")
	}
	if second.lk.Fence() != first.lk.Fence()+1 {
		t.Fatalf("a's second waiter got fence %d after %d: want the next, handed on within a's turn, though b's waiter asked before it", second.lk.Fence(), first.lk.Fence())
	}
	select {
	case hb := <-theirs:
		t.Fatalf("b's waiter got the key (fence %d) while a's turn had a waiter left", hb.lk.Fence())
	default:
	}
	// The hand-off took a's bid (its second waiter's) out of Redis, and
	// a's third waiter never bid, unless it was first in line for a
	// recheck (a loaded machine), after which it looks again and bids
	// anew.
	if bid, err := rdb.HGet(ctx, second.lk.id.bidsKey(), a.id).Result(); err != redis.Nil && (bid == before || time.Since(handOffAt) < a.recheck) {
		t.Fatalf("a's bid in Redis after the hand-off: %q (%v); want none (before it: %q)", bid, err, before)
	}
	sent, sentAt := scripts.Load(), time.Now()
	if err := second.lk.Release(ctx); err != nil {
		t.Fatal(err)
	}
	var hb handed
	select {
	case hb = <-theirs:
	case lk := <-third:
		t.Fatalf("a's third waiter got the key (fence %d) after a's turn, before b's waiter that asked", lk.Fence())
	}
	if hb.lk == nil {
		t.Fatal("b's waiter got no lock")
	}
	time.Sleep(20 * time.Millisecond)
	if err := hb.lk.Release(ctx); err != nil {
		t.Fatal(err)
	}
	last := <-third
	got := time.Now()
	if last == nil {
		t.Fatal("a's third waiter got no lock")
	}
	defer last.Release(ctx)
	// A waiter first in line bids again every bidRefresh: on a loaded
	// machine, where this stretch lasts that long, those are a's too.
	if n, again := scripts.Load()-sent, int64(time.Since(sentAt)/bidRefresh); n < 2 || n > 2+again {
		t.Fatalf("a sent %d scripts from its turn's last release to its third waiter's lock; want 2, the release, which bids for its waiter, and the claim (and %d bids again)", n, again)
	}
	if !(holder.Fence() < first.lk.Fence() && second.lk.Fence() < hb.lk.Fence() && hb.lk.Fence() < last.Fence()) {
		t.Fatalf("fences %d, %d, %d, %d, %d: want them rising", holder.Fence(), first.lk.Fence(), second.lk.Fence(), hb.lk.Fence(), last.Fence())
	}
	for _, lk := range []*Lock{holder, first.lk, second.lk, hb.lk} {
		if last.Token() == lk.Token() {
			t.Fatalf("a's third waiter holds token %s, an earlier grant's", lk.Token())
		}
	}
	v, err := srv.Client(t).Get(ctx, a.RedisKey(key)).Result()
	if err != nil || !strings.HasPrefix(v, last.Token()+"|") {
		t.Fatalf("Redis holds %q (%v); want a's third waiter's grant %s", v, err, last.Token())
	}
	// Its claim, an attempt of its own sent after that release, set its
	// lease (acquire.lua): it trusts no more than the lease from before
	// the claim's reply came. (Bounded from the release, the check failed
	// on a loaded machine whenever the claim went out more than the drift
	// margin after it.)
	if until := last.ValidUntil(); until.After(got.Add(ttl)) {
		t.Fatalf("a's third waiter trusts its lease until %v after its lock came back; want at most the lease, %v", until.Sub(got), ttl)
	}
}

// TestGrantAtReleaseLostNoticeTakenOver: the notice of a grant at release
// is lost. The waiter's own timer wakes it, and its next attempt finds the
// key under its earlier attempt's grant and takes it over: it gets the
// lock, under the new attempt's token, well before the grant's lease
// would have freed the key.
func TestGrantAtReleaseLostNoticeTakenOver(t *testing.T) {
	for _, fair := range []bool{false, true} {
		t.Run(mode(fair), func(t *testing.T) { testGrantAtReleaseLostNoticeTakenOver(t, fair) })
	}
}

func testGrantAtReleaseLostNoticeTakenOver(t *testing.T, fair bool) {
	srv, a, b := twoLockers(t)
	b.recheck = 50 * time.Millisecond
	lost := grantNotices(b, func(int64) int { return 0 })
	ctx := context.Background()
	const key, ttl = "lost-grant", 10 * time.Second

	holder, err := a.Acquire(ctx, key, Options{TTL: ttl, Fair: fair})
	if err != nil {
		t.Fatal(err)
	}
	got := queueWaiters(t, b, key, 1, Options{TTL: ttl, Wait: 30 * time.Second, Fair: fair})
	released := time.Now()
	h := handedOnRelease(t, ctx, holder, got)
	defer h.lk.Release(ctx)
	if lost.Load() == 0 {
		t.Fatal("no grant notice was sent: the release did not grant the key")
	}
	if d := time.Since(released); d > ttl/2 {
		t.Fatalf("the waiter got the lock %v after the release; want its next attempt to take the grant over", d)
	}
	v, _ := srv.Client(t).Get(ctx, a.RedisKey(key)).Result()
	if !strings.HasPrefix(v, h.lk.Token()+"|") {
		t.Fatalf("Redis holds %q; want the waiter's lock %s", v, h.lk.Token())
	}
	if h.lk.Fence() <= holder.Fence() {
		t.Fatalf("fence %d after %d", h.lk.Fence(), holder.Fence())
	}
}

// TestGrantNoticeRepeatedIsAStranger: every grant notice arrives twice.
// The copy changes nothing: the next waiter of the same Locker, which
// tries Redis while the first holds the key and so has a bid of its own
// that the copy does not name, goes on waiting.
func TestGrantNoticeRepeatedIsAStranger(t *testing.T) {
	_, a, b := twoLockers(t)
	b.recheck = 20 * time.Millisecond // the second waiter tries, and bids, while the first holds
	grantNotices(b, func(int64) int { return 2 })
	ctx := context.Background()
	const key = "twice"

	holder, err := a.Acquire(ctx, key, Options{})
	if err != nil {
		t.Fatal(err)
	}
	got := queueWaiters(t, b, key, 2, Options{Wait: 30 * time.Second})
	if err := holder.Release(ctx); err != nil {
		t.Fatal(err)
	}
	first := <-got
	if first.lk == nil {
		t.Fatal("the first waiter got no lock")
	}
	select {
	case second := <-got:
		t.Fatalf("the second waiter got a lock (fence %d) while the first holds the key (fence %d)", second.lk.Fence(), first.lk.Fence())
	case <-time.After(200 * time.Millisecond):
	}
	if err := first.lk.Err(); err != nil {
		t.Fatalf("the first waiter's lock ended: %v", err)
	}
	if err := first.lk.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if second := <-got; second.lk != nil {
		second.lk.Release(ctx)
	}
}

// TestGiveUpWhileGrantedLetsGo: the waiter's wait ends as the release
// grants it the key, its notice lost. The waiter must let the grant go as
// it leaves (behind its answer), so the key is free within moments, not
// after the grant's 30 s lease.
func TestGiveUpWhileGrantedLetsGo(t *testing.T) {
	for _, fair := range []bool{false, true} {
		t.Run(mode(fair), func(t *testing.T) { testGiveUpWhileGrantedLetsGo(t, fair) })
	}
}

func testGiveUpWhileGrantedLetsGo(t *testing.T, fair bool) {
	_, a, b := twoLockers(t)
	lost := grantNotices(b, func(int64) int { return 0 })
	ctx := context.Background()
	const key = "gave-up"

	holder, err := a.Acquire(ctx, key, Options{TTL: 30 * time.Second, Fair: fair})
	if err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithCancel(ctx)
	errs := make(chan error, 1)
	go func() {
		lk, err := b.Acquire(wctx, key, Options{TTL: 30 * time.Second, Wait: 30 * time.Second, Fair: fair})
		if lk != nil {
			lk.Release(ctx)
		}
		errs <- err
	}()
	waitForWaiters(t, b, key, 1)
	waitParked(t, b, key, 1)
	if err := holder.Release(ctx); err != nil {
		t.Fatal(err)
	}
	for lost.Load() == 0 {
		time.Sleep(time.Millisecond)
	}
	cancel()
	if err := <-errs; !errors.Is(err, context.Canceled) {
		t.Fatalf("the waiter ended with %v; want its context's end", err)
	}
	// Close waits for the give-up's withdrawal, which lets go of the
	// grant at once: the key is free, not held for the claim window.
	b.Close()
	lk, err := a.Acquire(ctx, key, Options{Fair: fair})
	if err != nil {
		t.Fatalf("the key stayed held by the grant to the waiter that gave up, after its withdrawal: %v", err)
	}
	lk.Release(ctx)
}

// TestGrantParsing: a grant notice is "g<ms> <token>"; anything else, a
// fair waiter's place among them, is not one.
func TestGrantParsing(t *testing.T) {
	token, hold, ok := parseGrant("g480 tok~owner with spaces")
	if !ok || hold != 480*time.Millisecond || token != "tok~owner with spaces" {
		t.Fatalf("got %q, %v, %v", token, hold, ok)
	}
	for _, s := range []string{"", "g", "g1", "g1 ", "g-1 t", "gx t", "gAbCdEfGhIjKlMnOpQrStUv", "*id", "x1 t"} {
		if _, _, ok := parseGrant(s); ok {
			t.Errorf("%q read as a grant", s)
		}
	}
}

// TestGrantAtReleaseWhenLockersStartTogether: waiters of 4 Lockers (8
// each), or 100 of one, ask for one key at once, before any line has
// formed, so several waiters of one Locker leave bids, each replacing the
// last, and the first grants go out before every Locker hears notices.
// Every waiter must get the lock within its wait: a grant to a bid of a
// waiter behind the first of its Locker, its notice lost, is taken over by
// the first.
// Regression: only a waiter's own previous attempt was taken over; a grant
// to the bid of a waiter behind the first sat for its whole lease. Then:
// the first kept only 16 of the bids passed to it, and dropped its own.
func TestGrantAtReleaseWhenLockersStartTogether(t *testing.T) {
	for _, tc := range []struct{ lockers, each int }{{4, 8}, {1, 100}} {
		t.Run(fmt.Sprintf("%dx%d", tc.lockers, tc.each), func(t *testing.T) {
			srv := redistest.Start(t)
			var lockers []*Locker
			for range tc.lockers {
				l := mustNew(t, srv.Client(t))
				defer l.Close()
				lockers = append(lockers, l)
			}
			ctx := context.Background()
			start := make(chan struct{})
			n := tc.lockers * tc.each
			errs := make(chan error, n)
			for i := range n {
				go func() {
					<-start
					lk, err := lockers[i%tc.lockers].Acquire(ctx, "burst", Options{Wait: 10 * time.Second})
					if err == nil {
						time.Sleep(time.Millisecond)
						err = lk.Release(ctx)
					}
					errs <- err
				}()
			}
			close(start)
			for range n {
				if err := <-errs; err != nil {
					t.Fatal(err)
				}
			}
		})
	}
}

// TestReleaseBidReplacesOnlyEarlierBids: a bid that a release of the
// Locker placed replaced in Redis the Locker's bid that was answered
// before the release was sent, which the first waiter then forgets (its
// grant can never come); a bid answered after it may have replaced the
// release's instead, and stays, as does one whose reply was lost.
func TestReleaseBidReplacesOnlyEarlierBids(t *testing.T) {
	l := &Locker{notifier: newNotifier(nil, "self")}
	o := Options{TTL: time.Second, Wait: time.Minute}
	mint := func() *lockID { return mintOn([3]string{"k", "f", "b"}, o) }
	t0 := time.Now()
	a := &acquisition{l: l, o: o, id: mint()}
	w := &waiter{a: a, wake: make(chan struct{}, 1)}
	kw := &keyWaiters{waiters: []*waiter{w}}
	w.kw, a.w = kw, w
	before, after, lost, byRelease := mint(), mint(), mint(), mint()
	a.bids.sent = []bidSent{
		{id: lost, sent: t0},
		{id: before, sent: t0, busy: true, answered: t0.Add(time.Millisecond)},
		{id: after, sent: t0.Add(2 * time.Millisecond), busy: true, answered: t0.Add(4 * time.Millisecond)},
	}
	kw.lineBids = []bidSent{{id: byRelease, sent: t0.Add(3 * time.Millisecond), busy: true, byRelease: true}}
	if other := l.notifier.takeLineBids(w, &a.bids, a.id.ttl, a.o.NoRenew); len(other) != 0 {
		t.Fatalf("withdrawn %v, want none: the same lease", other)
	}
	var got []*lockID
	for _, b := range a.bids.sent {
		got = append(got, b.id)
	}
	if want := []*lockID{lost, after, byRelease}; !slices.Equal(got, want) {
		t.Fatalf("bids %v, want the lost one, the one answered after the release was sent, and the release's: %v", got, want)
	}
}

// TestGiveUpWithdrawsTheBid: a waiter of another Locker gives up while the
// key is held, before any grant; the holder releases later, and the key
// is free: the waiter's bid went with it, and no grant goes to nobody.
func TestGiveUpWithdrawsTheBid(t *testing.T) {
	srv, a, b := twoLockers(t)
	ctx := context.Background()
	const key = "gave-up-bid"
	holder, err := a.Acquire(ctx, key, Options{TTL: 30 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.Acquire(ctx, key, Options{TTL: 30 * time.Second, Wait: 300 * time.Millisecond}); !errors.Is(err, ErrNotAcquired) {
		t.Fatalf("waiter: %v", err)
	}
	time.Sleep(200 * time.Millisecond) // the withdrawal goes on behind the answer
	if err := holder.Release(ctx); err != nil {
		t.Fatal(err)
	}
	lk, err := a.Acquire(ctx, key, Options{Wait: 2 * time.Second})
	if err != nil {
		v, _ := srv.Client(t).Get(ctx, a.RedisKey(key)).Result()
		t.Fatalf("the key stayed held after its holder released it, the only waiter having given up: %v (Redis holds %q)", err, v)
	}
	lk.Release(ctx)
}

// loseAcquireReply runs fn before it sends the first acquire script after
// it was armed, and then loses that script's reply.
type loseAcquireReply struct {
	sha   string
	armed atomic.Bool
	fn    func()
}

func (h *loseAcquireReply) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h *loseAcquireReply) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}
func (h *loseAcquireReply) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		args := cmd.Args()
		if len(args) > 1 && args[0] == "evalsha" && args[1] == h.sha && h.armed.CompareAndSwap(true, false) {
			h.fn()
			_ = next(ctx, cmd)
			err := errors.New("injected: reply lost")
			cmd.SetErr(err)
			return err
		}
		return next(ctx, cmd)
	}
}

// TestGrantNoticeAfterALostAttemptIsNotTaken: a release grants the key to
// the waiter's bid while the waiter's next attempt, which names that bid,
// is on its way, and the attempt's reply is lost. The attempt may have
// taken the grant over, and its clean-up let it go: the waiter must not
// take the lock from the grant's notice, and whatever it gets, Redis
// holds it under its token and nobody else takes the key.
func TestGrantNoticeAfterALostAttemptIsNotTaken(t *testing.T) {
	srv := redistest.Start(t)
	a := mustNew(t, srv.Client(t))
	defer a.Close()
	bc := srv.Client(t)
	b := mustNew(t, bc)
	defer b.Close()
	b.recheck = 200 * time.Millisecond
	ctx := context.Background()
	const key, ttl = "lost-attempt", 10 * time.Second
	holder, err := a.Acquire(ctx, key, Options{TTL: ttl})
	if err != nil {
		t.Fatal(err)
	}
	var granted atomic.Int64
	b.notifier.fault = func(_, payload string) (int, time.Duration) {
		if _, _, ok := parseGrant(payload); ok {
			granted.Add(1)
		}
		return 1, 0
	}
	hook := &loseAcquireReply{sha: b.store.(single).scripts.acquire.Hash(), fn: func() {
		if err := holder.Release(ctx); err != nil {
			t.Error(err)
		}
		for granted.Load() == 0 {
			time.Sleep(time.Millisecond)
		}
	}}
	bc.AddHook(hook)
	got := queueWaiters(t, b, key, 1, Options{TTL: ttl, Wait: 30 * time.Second})
	hook.armed.Store(true)
	h := <-got
	if h.lk == nil {
		t.Fatal("no lock")
	}
	defer h.lk.Release(ctx)
	time.Sleep(100 * time.Millisecond)
	v, _ := srv.Client(t).Get(ctx, a.RedisKey(key)).Result()
	if !strings.HasPrefix(v, h.lk.Token()+"|") {
		t.Errorf("the waiter holds a lock (token %s) that Redis does not: it holds %q", h.lk.Token(), v)
	}
	if other, err := a.Acquire(ctx, key, Options{}); err == nil {
		t.Errorf("another Locker took the key (fence %d) while the waiter holds it (fence %d)", other.Fence(), h.lk.Fence())
		other.Release(ctx)
	}
}

// TestGrantFenceComesFromTheCounter: a grant at release takes its fence
// from the counter, never from the clock alone, so it is above every
// earlier fence even when the counter runs ahead of the server's clock
// (as after the clock stepped back, or a failover to a master whose clock
// is behind), in both modes.
func TestGrantFenceComesFromTheCounter(t *testing.T) {
	for _, fair := range []bool{false, true} {
		t.Run(mode(fair), func(t *testing.T) {
			srv, a, b := twoLockers(t)
			ctx := context.Background()
			const key = "fence-ahead"
			holder, err := a.Acquire(ctx, key, Options{TTL: 10 * time.Second, Fair: fair})
			if err != nil {
				t.Fatal(err)
			}
			counter := a.keys.fence(a.RedisKey(key))
			ahead := holder.Fence() + 1_000_000_000_000 // 11.6 days ahead of the clock in µs
			rdb := srv.Client(t)
			if err := rdb.Set(ctx, counter, ahead, 0).Err(); err != nil {
				t.Fatal(err)
			}
			got := queueWaiters(t, b, key, 1, Options{TTL: 10 * time.Second, Wait: 30 * time.Second, Fair: fair})
			h := handedOnRelease(t, ctx, holder, got)
			defer h.lk.Release(ctx)
			if h.lk.Fence() <= ahead {
				t.Fatalf("the granted waiter's fence %d is not above the counter's %d: it was not taken from the counter", h.lk.Fence(), ahead)
			}
			if n, err := rdb.Get(ctx, counter).Int64(); err != nil || n < h.lk.Fence() {
				t.Fatalf("the counter reads %d (%v) after the grant of fence %d; want it moved past the grant's fences", n, err, h.lk.Fence())
			}
		})
	}
}
