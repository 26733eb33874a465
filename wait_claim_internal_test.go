package padlock

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/padlockgo/padlock/internal/faultproxy"
	"github.com/padlockgo/padlock/internal/redistest"
	"github.com/redis/go-redis/v9"
)

// The tests of "Nobody holds for nobody" (wait_claim.go): a waiter that
// is not there, killed, gone, or that forgot the token Redis granted, costs
// the next live waiter under a second, whatever the lease (30 s here), in
// both modes; and a grant notice is never evidence of a grant.

// claimBound is what a waiter that is not there may cost the next live
// waiter, from the release, in these tests: the claim window, and the
// round trips and wake-ups around it, which a loaded machine stretches
// (quiet, the next live waiter has the key 501-505 ms after the release;
// at a load of 16 on 2 CPUs, up to 1.6 s). A grant that held the key for
// the lease would cost 30 s.
const claimBound = 2 * time.Second

// longLease is the lease the waiters that are not there asked for: the
// default TTL, which the key would sit idle for without the claim window.
const longLease = 30 * time.Second

// nextLiveWaiter waits for the lock the live waiter queued on got
// (queueWaiters) and fails t unless it came within claimBound of released.
func nextLiveWaiter(t *testing.T, got <-chan handed, released time.Time) *Lock {
	t.Helper()
	return liveWaiterWithin(t, got, released, claimBound, "the release", "the lease of a waiter that is not there")
}

// liveWaiterWithin waits for the live waiter's lock on got, and fails t
// unless it came within bound of from (when since happened), rather than
// not before instead.
func liveWaiterWithin(t *testing.T, got <-chan handed, from time.Time, bound time.Duration, since, instead string) *Lock {
	t.Helper()
	select {
	case h := <-got:
		if h.lk == nil {
			t.Fatal("the live waiter got no lock")
		}
		d := time.Since(from)
		t.Logf("the live waiter had the key %v after %s", d, since)
		if d > bound {
			t.Fatalf("the live waiter had the key %v after %s; want it within %v, not %s", d, since, bound, instead)
		}
		return h.lk
	case <-time.After(longLease):
		t.Fatalf("the live waiter did not get the key within %v of %s", longLease, since)
	}
	return nil
}

// viaProxy returns a Locker that reaches srv through a proxy of its own,
// which the test may cut or close: a process whose connections die with
// it.
func viaProxy(t *testing.T, srv *redistest.Server) (*Locker, *faultproxy.Proxy) {
	t.Helper()
	p, err := faultproxy.Start(srv.Addr())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	c := srv.Client(t, func(o *redis.Options) { o.Addr = p.Addr(); o.MaxRetries = -1 })
	l := mustNew(t, c)
	t.Cleanup(func() { l.Close() })
	return l, p
}

// TestKilledWaiterCostsUnderASecond: a waiter's process is killed (an OOM
// kill, an evicted pod) while it waits: its connections die with it, and
// nothing of it tells Redis. The release grants the key to its standing
// bid, or in fair mode to its entry's bid; the next live waiter has the
// key within a second, whether it already waited or came after the
// release. A fair waiter killed long enough before the release (its bid
// older than bidLife) is passed over at once; two fair waiters killed
// together cost a claim window each, not a bid's life each.
func TestKilledWaiterCostsUnderASecond(t *testing.T) {
	for _, fair := range []bool{false, true} {
		for _, when := range []string{"waiting", "after", "stale", "two"} {
			if (when == "stale" || when == "two") && !fair {
				continue // a default-mode Locker has one bid per key, and grantBid skips an old one the same way
			}
			t.Run(mode(fair)+"/"+when, func(t *testing.T) {
				srv := redistest.Start(t)
				h, live := mustNew(t, srv.Client(t)), mustNew(t, srv.Client(t))
				defer h.Close()
				defer live.Close()
				dead, p := viaProxy(t, srv)
				ctx := context.Background()
				const key = "killed-waiter"
				o := Options{TTL: longLease, Wait: longLease, Fair: fair}

				holder, err := h.Acquire(ctx, key, Options{TTL: longLease, Fair: fair})
				if err != nil {
					t.Fatal(err)
				}
				killed := 1
				if when == "two" {
					killed = 2
				}
				for i := range killed {
					go func() {
						if lk, err := dead.Acquire(ctx, key, o); err == nil {
							lk.Release(ctx)
						}
					}()
					waitForWaiters(t, dead, key, i+1)
					waitParked(t, dead, key, i+1)
				}
				p.Close() // killed: every connection gone, none made again
				var got <-chan handed
				if when != "after" {
					got = queueWaiters(t, live, key, 1, o)
				}
				if when == "stale" {
					time.Sleep(bidLife + 100*time.Millisecond)
				}
				released := time.Now()
				if err := holder.Release(ctx); err != nil {
					t.Fatal(err)
				}
				if when == "after" {
					got = queueWaitersNow(live, key, o)
				}
				lk := nextLiveWaiter(t, got, released)
				if lk.Fence() <= holder.Fence() {
					t.Fatalf("fence %d after %d", lk.Fence(), holder.Fence())
				}
				lk.Release(ctx)
			})
		}
	}
}

// queueWaitersNow starts one waiting Acquire of key on l without waiting
// for it to queue (it may get the key at once).
func queueWaitersNow(l *Locker, key string, o Options) <-chan handed {
	got := make(chan handed, 1)
	go func() {
		lk, _ := l.Acquire(context.Background(), key, o)
		got <- handed{0, lk}
	}()
	return got
}

// lateCopy is a go-redis hook that, once armed, answers the first call of
// the script whose SHA1 is sha with a timeout, as if its reply was lost,
// and keeps the command: land runs it on Redis later, through another
// client, after commands the caller sent since (a request held up in the
// network). It keeps the last call Redis answered since, too.
type lateCopy struct {
	sha string
	// cleanupSha, when set, is the script of the clean-up of the held
	// attempt (release.lua), which is lost too and never runs; with
	// cleanupsToLose, only that many first calls of it that name the held
	// attempt are lost.
	cleanupSha     string
	cleanupsToLose int
	cleanupsLost   int
	// landBeforeBurial, when set, lands the held copy through it just
	// before the first clean-up of the held attempt that is not lost
	// reaches Redis.
	landBeforeBurial *redis.Client
	landed           bool
	landErr          error
	// beforeLeave, when set, runs once, before the first call of the
	// script whose SHA1 is leaveSha reaches Redis.
	leaveSha    string
	beforeLeave func()
	armed       atomic.Bool
	mu          sync.Mutex
	held        []any
	after       []any
	taken       chan struct{}
}

func newLateCopy(sha string) *lateCopy { return &lateCopy{sha: sha, taken: make(chan struct{})} }

// loseCleanups makes the first n clean-ups of the held attempt lost, in
// the mode fair says (release.lua's, or release_fair.lua's).
func (h *lateCopy) loseCleanups(fair bool, n int) {
	h.cleanupSha, h.cleanupsToLose = plainScripts.release.Hash(), n
	if fair {
		h.cleanupSha = plainScripts.releaseFair.Hash()
	}
}

func (h *lateCopy) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *lateCopy) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		args := cmd.Args()
		if len(args) > 1 && args[0] == "evalsha" && h.leaveSha != "" && args[1] == h.leaveSha {
			h.mu.Lock()
			f := h.beforeLeave
			h.beforeLeave = nil
			h.mu.Unlock()
			if f != nil {
				f()
			}
		}
		if h.lostCleanup(args) {
			err := &net.OpError{Op: "read", Net: "tcp", Err: os.ErrDeadlineExceeded}
			cmd.SetErr(err)
			return err
		}
		if len(args) < 2 || args[0] != "evalsha" || args[1] != h.sha {
			return next(ctx, cmd)
		}
		if h.armed.CompareAndSwap(true, false) {
			h.mu.Lock()
			h.held = append([]any(nil), args...)
			h.mu.Unlock()
			close(h.taken)
			err := &net.OpError{Op: "read", Net: "tcp", Err: os.ErrDeadlineExceeded}
			cmd.SetErr(err)
			return err
		}
		err := next(ctx, cmd)
		h.mu.Lock()
		if h.held != nil && err == nil {
			h.after = slices.Clone(args)
		}
		h.mu.Unlock()
		return err
	}
}

// lostCleanup reports whether args are the clean-up of the held attempt,
// when that is lost too.
func (h *lateCopy) lostCleanup(args []any) bool {
	if h.cleanupSha == "" || len(args) < 4 || args[0] != "evalsha" || args[1] != h.cleanupSha {
		return false
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.held == nil || fmt.Sprint(scriptArgv(args)[0]) != fmt.Sprint(scriptArgv(h.held)[0]) {
		return false
	}
	if h.cleanupsToLose > 0 && h.cleanupsLost >= h.cleanupsToLose {
		if c := h.landBeforeBurial; c != nil && !h.landed {
			h.landed = true
			h.landErr = c.Do(context.Background(), h.held...).Err()
		}
		return false
	}
	h.cleanupsLost++
	return true
}

func (h *lateCopy) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// land runs the held command on Redis through c.
func (h *lateCopy) land(t *testing.T, c *redis.Client) {
	t.Helper()
	<-h.taken
	h.mu.Lock()
	args := h.held
	h.mu.Unlock()
	if err := c.Do(context.Background(), args...).Err(); err != nil && err != redis.Nil {
		t.Fatalf("the late copy: %v", err)
	}
}

// token returns the token of the held attempt, once it is held.
func (h *lateCopy) token() string {
	<-h.taken
	h.mu.Lock()
	defer h.mu.Unlock()
	return fmt.Sprint(scriptArgv(h.held)[0])
}

// last returns the last call Redis answered after the held one.
func (h *lateCopy) last() []any {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.after
}

// lateCopySetup starts the setting of the late-copy tests on a Redis of
// their own: rdb, a plain client; h, the Locker of the key's holder; live,
// that of the live waiter queued behind; and w, that of the waiter whose
// attempt of the script whose SHA1 is sha is held up in the network
// (late, armed by the test). The Lockers close as the test ends.
func lateCopySetup(t *testing.T, sha string) (rdb *redis.Client, h, live, w *Locker, late *lateCopy) {
	t.Helper()
	srv := redistest.Start(t)
	rdb = srv.Client(t)
	h, live = mustNew(t, srv.Client(t)), mustNew(t, srv.Client(t))
	late = newLateCopy(sha)
	wc := srv.Client(t)
	wc.AddHook(late)
	w = mustNew(t, wc)
	t.Cleanup(func() {
		_ = w.Close()
		_ = live.Close()
		_ = h.Close()
	})
	return rdb, h, live, w, late
}

// attemptScript returns the SHA1 of a waiting Acquire's attempt script in
// the mode fair says.
func attemptScript(fair bool) string {
	if fair {
		return acquireFairScript.Hash()
	}
	return plainScripts.acquire.Hash()
}

// TestLateCopyReplacingTheBidIsClaimed: a waiter's attempt is held up in
// the network; the client times out, and its clean-up is lost (so the
// token is not buried, lua/claim.lua); its next attempt is answered busy
// and bids, and then the first reaches Redis and replaces that bid with
// its own token. The release grants that token. The waiter keeps the tokens
// of attempts whose replies were lost for the rest of its wait, busy
// answers or not, so it claims the grant itself: the attempt that takes
// the key names the lost attempt's token, and takes the key from the
// grant, which does not expire first. (A busy answer that forgot the
// token, mutant 44, left the grant unclaimed for its claim window, under
// every timing bound a loaded machine allows: so the claim is read in
// Redis, not timed.)
func TestLateCopyReplacingTheBidIsClaimed(t *testing.T) {
	srv := redistest.Start(t)
	rdb := srv.Client(t)
	h := mustNew(t, srv.Client(t))
	defer h.Close()
	late := newLateCopy(plainScripts.acquire.Hash())
	late.cleanupSha = plainScripts.release.Hash()
	wc := srv.Client(t)
	wc.AddHook(late)
	w := mustNew(t, wc)
	defer w.Close()
	ctx := context.Background()
	const key = "late-copy-bid"
	o := Options{TTL: longLease, Wait: longLease, Retry: LinearBackoff(time.Millisecond)}

	holder, err := h.Acquire(ctx, key, Options{TTL: longLease})
	if err != nil {
		t.Fatal(err)
	}
	expired := expiries(t, rdb, holder.id.lockKey())
	late.armed.Store(true)
	got := queueWaiters(t, w, key, 1, o)
	lost := late.token()
	// The bid placed again every bidRefresh may replace the copy's: land
	// it until it is the one standing.
	for try := 0; standingBid(t, rdb, holder, w, false) != lost; try++ {
		if try == 3 {
			t.Fatal("the late copy's bid never stood")
		}
		late.land(t, rdb)
	}
	released := time.Now()
	if err := holder.Release(ctx); err != nil {
		t.Fatal(err)
	}
	lk := nextLiveWaiter(t, got, released)
	defer lk.Release(ctx)
	// The Acquire's last attempt took the key.
	if prev := scriptArgv(late.last())[5:]; !slices.ContainsFunc(prev, func(a any) bool { return fmt.Sprint(a) == lost }) {
		t.Errorf("the attempt that took the key named the earlier tokens %v; want the lost attempt's %s among them", prev, lost)
	}
	if expired() {
		t.Error("the grant to the lost attempt's token expired before the waiter took the key: nobody claimed it")
	}
}

// expiries subscribes to key's keyspace events and returns a func that
// reports whether key expired since, up to the moment it is called: a PING
// on the subscription is answered after every event published before it.
func expiries(t *testing.T, rdb *redis.Client, key string) func() bool {
	t.Helper()
	ctx := context.Background()
	if err := rdb.ConfigSet(ctx, "notify-keyspace-events", "Kx").Err(); err != nil {
		t.Fatal(err)
	}
	ps := rdb.Subscribe(ctx, fmt.Sprintf("__keyspace@%d__:%s", rdb.Options().DB, key))
	t.Cleanup(func() { ps.Close() })
	if _, err := ps.Receive(ctx); err != nil {
		t.Fatal(err)
	}
	return func() bool {
		t.Helper()
		if err := ps.Ping(ctx); err != nil {
			t.Fatal(err)
		}
		for expired := false; ; {
			msg, err := ps.ReceiveTimeout(ctx, 10*time.Second)
			if err != nil {
				t.Fatal(err)
			}
			switch m := msg.(type) {
			case *redis.Message:
				expired = expired || m.Payload == "expired"
			case *redis.Pong:
				return expired
			}
		}
	}
}

// TestRefusedLeaveSentAgain: a fair waiter gives up while Redis refuses
// its connections for a moment. Its leave is sent again, behind its
// answer, until Redis takes it, so the queue holds nothing of the waiter
// once its Locker's clean-ups are done. (Before, the leave was sent once,
// and the entry stood, first in line, until its bid grew stale.)
func TestRefusedLeaveSentAgain(t *testing.T) {
	srv := redistest.Start(t)
	h := mustNew(t, srv.Client(t))
	defer h.Close()
	w, p := viaProxy(t, srv)
	ctx := context.Background()
	const key = "refused-leave"
	o := Options{TTL: longLease, Wait: longLease, Fair: true}
	holder, err := h.Acquire(ctx, key, Options{TTL: longLease, Fair: true})
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Release(ctx)
	wctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		lk, err := w.Acquire(wctx, key, o)
		if lk != nil {
			lk.Release(ctx)
		}
		done <- err
	}()
	waitForWaiters(t, w, key, 1)
	waitParked(t, w, key, 1)
	queue := holder.id.keys[2]
	if n := srv.Client(t).LLen(ctx, queue).Val(); n != 1 {
		t.Fatalf("the queue holds %d entries while the waiter waits; want 1", n)
	}
	p.Refuse(true)
	p.Reset()
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("the waiter ended with %v; want its context's end", err)
	}
	time.Sleep(100 * time.Millisecond) // the first leave is refused
	p.Refuse(false)
	w.Close() // its clean-ups are done
	if q := srv.Client(t).LRange(ctx, queue, 0, -1).Val(); len(q) != 0 {
		t.Fatalf("the queue holds %q after the waiter left; want it empty", q)
	}
}

// TestRefusedWithdrawCostsUnderASecond: a waiter gives up while Redis
// refuses its connections, so its withdraw never arrives, and its bid (or
// fair entry) stands. A release then grants the key to it: its Locker,
// alive but with no waiter for the token, does not claim it, and the live
// waiter has the key within a second.
func TestRefusedWithdrawCostsUnderASecond(t *testing.T) {
	for _, fair := range []bool{false, true} {
		t.Run(mode(fair), func(t *testing.T) {
			srv := redistest.Start(t)
			h, live := mustNew(t, srv.Client(t)), mustNew(t, srv.Client(t))
			defer h.Close()
			defer live.Close()
			w, p := viaProxy(t, srv)
			ctx := context.Background()
			const key = "refused-withdraw"
			o := Options{TTL: longLease, Wait: longLease, Fair: fair}

			holder, err := h.Acquire(ctx, key, Options{TTL: longLease, Fair: fair})
			if err != nil {
				t.Fatal(err)
			}
			wctx, cancel := context.WithCancel(ctx)
			done := make(chan error, 1)
			go func() {
				lk, err := w.Acquire(wctx, key, o)
				if lk != nil {
					lk.Release(ctx)
				}
				done <- err
			}()
			waitForWaiters(t, w, key, 1)
			waitParked(t, w, key, 1)
			p.Refuse(true)
			p.Reset()
			cancel()
			if err := <-done; !errors.Is(err, context.Canceled) {
				t.Fatalf("the waiter ended with %v; want its context's end", err)
			}
			time.Sleep(1200 * time.Millisecond) // the withdraw, sent behind the answer, is refused
			p.Refuse(false)
			got := queueWaiters(t, live, key, 1, o)
			released := time.Now()
			if err := holder.Release(ctx); err != nil {
				t.Fatal(err)
			}
			nextLiveWaiter(t, got, released).Release(ctx)
		})
	}
}

// TestLateCopyAfterGiveUpCostsUnderASecond: a waiter's attempt is held up
// in the network, and reaches Redis after the waiter gave up: it bids, or
// in fair mode queues the waiter again, with a bid. The release grants
// the key to it; nobody claims it, and the live waiter has the key within
// a second.
func TestLateCopyAfterGiveUpCostsUnderASecond(t *testing.T) {
	for _, fair := range []bool{false, true} {
		t.Run(mode(fair), func(t *testing.T) {
			rdb, h, live, w, late := lateCopySetup(t, attemptScript(fair))
			ctx := context.Background()
			const key = "late-copy-gone"
			o := Options{TTL: longLease, Wait: longLease, Fair: fair, Retry: LinearBackoff(time.Millisecond)}

			holder, err := h.Acquire(ctx, key, Options{TTL: longLease, Fair: fair})
			if err != nil {
				t.Fatal(err)
			}
			late.armed.Store(true)
			wctx, cancel := context.WithCancel(ctx)
			done := make(chan struct{})
			go func() {
				defer close(done)
				if lk, err := w.Acquire(wctx, key, o); err == nil {
					lk.Release(ctx)
				}
			}()
			waitForWaiters(t, w, key, 1)
			waitParked(t, w, key, 1)
			cancel()
			<-done
			w.Close() // its withdraw and its leave are done
			late.land(t, rdb)
			got := queueWaiters(t, live, key, 1, o)
			released := time.Now()
			if err := holder.Release(ctx); err != nil {
				t.Fatal(err)
			}
			nextLiveWaiter(t, got, released).Release(ctx)
		})
	}
}

// TestLateCopyOnAFreeKeyTakesNothing: a waiter's attempt is held up in
// the network, the client times out and cleans up, and the copy reaches
// Redis only after the waiter gave up, or was served and let go, when the
// key is free. The clean-up buried the attempt's token (lua/claim.lua):
// the copy takes no key, leaves no bid and queues nobody, and the next
// Acquire, with no wait, has the key. (Before, the copy held the key, for
// nobody, its whole lease.) When the clean-up's reply is lost too, and it
// never ran, the waiter's withdrawal as it gives up, or the claim that
// serves it, buries the token again. (Before, a give-up withdrew the bid
// without burying it, and the copy held the free key its lease.) When
// that burial gets no answer either, it is sent again until Redis
// answers. (Before, it was sent once, and the copy held the free key its
// lease.)
func TestLateCopyOnAFreeKeyTakesNothing(t *testing.T) {
	for _, fair := range []bool{false, true} {
		for _, served := range []bool{false, true} {
			for lost, what := range []string{"", "/clean-up-lost", "/clean-up-and-burial-lost"} {
				name := mode(fair) + "/gave-up"
				if served {
					name = mode(fair) + "/served"
				}
				t.Run(name+what, func(t *testing.T) { lateCopyOnAFreeKey(t, fair, served, lost) })
			}
		}
	}
}

// TestLateCopyAfterAHandOffTakesNothing: as TestLateCopyOnAFreeKeyTakesNothing,
// with the waiter served by a hand-off within its Locker, the holder
// being of the same Locker: a waiting attempt's reply is lost and so is
// its clean-up, the holder hands the lock on to the waiter, which lets
// go, and then the attempt's copy, held up in the network, lands on the
// free key. The hand-off buries the attempt, as an attempt that serves
// the waiter does, so the copy takes nothing. (Before, the hand-off
// forgot the attempt, and the copy held the free key, for nobody, its
// whole lease.)
func TestLateCopyAfterAHandOffTakesNothing(t *testing.T) {
	for _, fair := range []bool{false, true} {
		t.Run(mode(fair), func(t *testing.T) {
			rdb, _, live, w, late := lateCopySetup(t, attemptScript(fair))
			late.loseCleanups(fair, 1)
			handedOn := &handOnSeen{}
			w.cfg.observer = handedOn // before its first operation
			ctx := context.Background()
			key := "late-copy-handed-" + mode(fair)
			o := Options{TTL: longLease, Wait: longLease, Fair: fair, Retry: LinearBackoff(time.Millisecond)}
			holder, err := w.Acquire(ctx, key, o)
			if err != nil {
				t.Fatal(err)
			}
			done, lost := waitWithLateCopy(t, ctx, w, late, key, o)
			if err := holder.Release(ctx); err != nil {
				t.Fatal(err)
			}
			lk := <-done
			if lk == nil {
				t.Fatal("the waiter was not served")
			}
			if !handedOn.seen.Load() {
				t.Fatal("the holder's Release did not hand the lock on to the waiter of its Locker")
			}
			if err := lk.Release(ctx); err != nil {
				t.Fatal(err)
			}
			w.Close() // its burials are done
			late.land(t, rdb)
			if v, err := rdb.Get(ctx, holder.id.lockKey()).Result(); err != redis.Nil {
				t.Fatalf("the key holds %q (%v) after the late copy of the lost attempt %s; want it free", v, err, lost)
			}
			lk2, err := live.Acquire(ctx, key, Options{TTL: longLease, Fair: fair})
			if err != nil {
				t.Fatalf("an Acquire with no wait after the late copy: %v; want the free key", err)
			}
			lk2.Release(ctx)
		})
	}
}

// TestLateCopyBeforeItsBurialQueuesNobody: a waiter's first attempt is
// held up in the network, the client times out, and its clean-up is
// lost, so the attempt is not buried; the waiter gives up, or is served,
// and the copy lands after that but before the waiter's withdrawal, or
// the burial that follows the serving, reaches Redis. In fair mode the
// copy, which asked to join the queue, queues the waiter's place again,
// with its bid. The place leaves the queue only after that burial, which
// takes the entry out: the queue and the bids hold nothing of the waiter
// once its clean-ups are done, and the release goes to the live waiter,
// not to a bid nobody claims. (Before, a waiter that gave up left the
// queue first and withdrew after, and a waiter served never left it: the
// entry stayed, and the release granted the key to nobody for its claim
// window.)
func TestLateCopyBeforeItsBurialQueuesNobody(t *testing.T) {
	for _, fair := range []bool{false, true} {
		for _, served := range []bool{false, true} {
			name := mode(fair) + "/gave-up"
			if served {
				name = mode(fair) + "/served"
			}
			t.Run(name, func(t *testing.T) { lateCopyBeforeItsBurial(t, fair, served) })
		}
	}
}

func lateCopyBeforeItsBurial(t *testing.T, fair, served bool) {
	rdb, h, live, w, late := lateCopySetup(t, attemptScript(fair))
	late.loseCleanups(fair, 1)
	late.landBeforeBurial = rdb
	ctx := context.Background()
	const key = "late-copy-before-burial"
	o := Options{TTL: longLease, Wait: longLease, Fair: fair, Retry: LinearBackoff(time.Millisecond)}
	holder, err := h.Acquire(ctx, key, Options{TTL: longLease, Fair: fair})
	if err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	done, lost := waitWithLateCopy(t, wctx, w, late, key, o)
	bidsKey, queue := holder.id.bidsKey(), holder.id.keys[2]
	// left reports whether the copy landed and nothing of it is left in
	// the bids or the queue.
	left := func() []string {
		var out []string
		for id, b := range rdb.HGetAll(ctx, bidsKey).Val() {
			if strings.Contains(b, lost) {
				out = append(out, fmt.Sprintf("a bid %s=%q", id, b))
			}
		}
		for _, e := range rdb.LRange(ctx, queue, 0, -1).Val() {
			out = append(out, fmt.Sprintf("the queue entry %q", e))
		}
		return out
	}
	landed := func() bool {
		late.mu.Lock()
		defer late.mu.Unlock()
		if late.landErr != nil && late.landErr != redis.Nil {
			t.Fatalf("the late copy: %v", late.landErr)
		}
		return late.landed
	}
	if served {
		if err := holder.Release(ctx); err != nil {
			t.Fatal(err)
		}
		lk := <-done
		if lk == nil {
			t.Fatal("the waiter was not served")
		}
		// Its burial goes on behind it, as it holds the key.
		deadline := time.Now().Add(cleanupTimeout + time.Second)
		for !landed() || len(left()) > 0 {
			if time.Now().After(deadline) {
				t.Fatalf("%v after the waiter was served, the late copy landed %v, and left %q; want it landed, before the burial, and nothing of it left", cleanupTimeout+time.Second, landed(), left())
			}
			time.Sleep(time.Millisecond)
		}
		holder = lk
	} else {
		cancel()
		if lk := <-done; lk != nil {
			t.Fatal("the waiter that gave up holds the key")
		}
		w.Close() // its withdrawals, burials and leave are done
		if !landed() {
			t.Fatal("the late copy did not land before the burial")
		}
		for _, what := range left() {
			t.Errorf("%s is left after the waiter left; want nothing", what)
		}
	}
	got := queueWaiters(t, live, key, 1, o)
	released := time.Now()
	if err := holder.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if v := rdb.Get(ctx, holder.id.lockKey()).Val(); strings.Contains(v, lost) {
		t.Errorf("the release granted the key to the late copy's bid: %q", v)
	}
	nextLiveWaiter(t, got, released).Release(ctx)
}

// TestFairGiveUpLetsGoOfAGrantMadeAsItLeaves: a fair waiter with an
// attempt whose reply and clean-up were lost gives up; it buries that
// attempt, leaves the queue, and withdraws its bids, in that order. A
// release that lands just before the leave grants the key to the bid its
// queue entry carries: the withdrawal after the leave lets that grant go,
// so the key is not held for nobody once the waiter's clean-ups are done,
// and the live waiter behind it has the key. (A withdrawal before the
// leave missed that grant, which held the key for its claim window: the
// explorer's claimed invariant, fleet seed 1048633.)
func TestFairGiveUpLetsGoOfAGrantMadeAsItLeaves(t *testing.T) {
	rdb, h, live, w, late := lateCopySetup(t, attemptScript(true))
	late.loseCleanups(true, 1)
	ctx := context.Background()
	const key = "fair-grant-as-it-leaves"
	o := Options{TTL: longLease, Wait: longLease, Fair: true, Retry: LinearBackoff(time.Millisecond)}
	holder, err := h.Acquire(ctx, key, Options{TTL: longLease, Fair: true})
	if err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	done, _ := waitWithLateCopy(t, wctx, w, late, key, o)
	got := queueWaiters(t, live, key, 1, o)
	released := make(chan time.Time, 1)
	late.mu.Lock()
	late.leaveSha = plainScripts.leaveFair.Hash()
	late.beforeLeave = func() {
		released <- time.Now()
		if err := holder.Release(ctx); err != nil {
			t.Errorf("the holder's release: %v", err)
		}
	}
	late.mu.Unlock()
	cancel()
	if lk := <-done; lk != nil {
		t.Fatal("the waiter that gave up holds the key")
	}
	w.Close() // its burial, its leave and its withdrawals are done
	at := <-released
	bid := fmt.Sprint(scriptArgv(late.last())[0]) // its entry's bid: its last attempt's
	if v, err := rdb.Get(ctx, holder.id.lockKey()).Result(); err == nil && strings.HasPrefix(v, bid+"|") {
		t.Errorf("the key holds the grant %q to the bid of the waiter that left; want it let go", v)
	}
	nextLiveWaiter(t, got, at).Release(ctx)
}

// TestLateReleaseBidsForNobody: a release that gives the key to another
// Locker's waiter bids, in the same script, for its own Locker's first
// waiter. Its reply is lost: it is held up in the network, and lands
// only after that waiter gave up and its Locker withdrew the bid it may
// have placed; the release's sends again, behind Release, are lost too. The withdrawal buries the bid's token, so the release,
// when it lands, grants the key to the other Locker's waiter and places
// no bid; the bids hold nothing of the Locker whose waiters are gone.
// (Before, the release placed the bid after its withdrawal, and the next
// release granted the key to it, held by nobody for the claim window:
// the explorer's claimed invariant, fleet seed 1048763.)
func TestLateReleaseBidsForNobody(t *testing.T) {
	rdb, other, _, w, late := lateCopySetup(t, plainScripts.release.Hash())
	late.loseCleanups(false, 0) // every later send of the held release
	ctx := context.Background()
	const key = "late-release-bid"
	o := Options{TTL: longLease, Wait: longLease}
	held, err := w.Acquire(ctx, key, Options{TTL: longLease})
	if err != nil {
		t.Fatal(err)
	}
	got := queueWaiters(t, other, key, 1, o)
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	done := make(chan *Lock, 1)
	go func() {
		lk, _ := w.Acquire(wctx, key, o)
		done <- lk
	}()
	waitForWaiters(t, w, key, 1)
	waitParked(t, w, key, 1)
	// The other Locker's want heard: w's turn is over, so its release
	// grants the key to the other's bid, and bids for w's waiter.
	awaitWaiters(t, w, key, "the other Locker's want heard", func(kw *keyWaiters) bool { return len(kw.wanters) > 0 })
	late.armed.Store(true)
	if err := held.Release(ctx); err == nil {
		t.Fatal("the release's reply came; want it lost")
	}
	late.mu.Lock()
	argv := scriptArgv(late.held)
	late.mu.Unlock()
	if len(argv) < 8 {
		t.Fatalf("the release held up carries no bid: %q", argv)
	}
	bid := fmt.Sprint(argv[6])
	cancel()
	if lk := <-done; lk != nil {
		t.Fatal("the waiter that gave up holds the key")
	}
	w.Close() // its withdrawals are done
	late.land(t, rdb)
	landed := time.Now()
	for id, b := range rdb.HGetAll(ctx, held.id.bidsKey()).Val() {
		if strings.Contains(b, bid) {
			t.Errorf("the release placed the bid %s=%q after its Locker's waiters left", id, b)
		}
	}
	nextLiveWaiter(t, got, landed).Release(ctx)
}

// waitWithLateCopy arms late and starts a waiting Acquire of key on w
// with ctx, whose first attempt late holds up in the network; it returns
// once the waiter is parked in its line, with where its lock (or nil)
// will come and the token of the attempt held up.
func waitWithLateCopy(t *testing.T, ctx context.Context, w *Locker, late *lateCopy, key string, o Options) (<-chan *Lock, string) {
	t.Helper()
	late.armed.Store(true)
	done := make(chan *Lock, 1)
	go func() {
		lk, _ := w.Acquire(ctx, key, o)
		done <- lk
	}()
	lost := late.token()
	waitForWaiters(t, w, key, 1)
	waitParked(t, w, key, 1)
	return done, lost
}

// handOnSeen is an Observer that records whether a Release handed a lock
// on within its Locker.
type handOnSeen struct {
	NopObserver
	seen atomic.Bool
}

func (h *handOnSeen) LockReleased(e LockReleasedEvent) {
	if e.HandedOn {
		h.seen.Store(true)
	}
}

// lateCopyOnAFreeKey runs TestLateCopyOnAFreeKeyTakesNothing's case:
// cleanupsLost is how many of the calls that clean up or bury the held
// attempt are lost (never run, their callers time out).
func lateCopyOnAFreeKey(t *testing.T, fair, served bool, cleanupsLost int) {
	rdb, h, live, w, late := lateCopySetup(t, attemptScript(fair))
	if cleanupsLost > 0 {
		late.loseCleanups(fair, cleanupsLost)
	}
	ctx := context.Background()
	const key = "late-copy-free"
	o := Options{TTL: longLease, Wait: longLease, Fair: fair, Retry: LinearBackoff(time.Millisecond)}

	holder, err := h.Acquire(ctx, key, Options{TTL: longLease, Fair: fair})
	if err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	done, lost := waitWithLateCopy(t, wctx, w, late, key, o)
	if served {
		if err := holder.Release(ctx); err != nil {
			t.Fatal(err)
		}
		lk := <-done
		if lk == nil {
			t.Fatal("the waiter was not served")
		}
		if err := lk.Release(ctx); err != nil {
			t.Fatal(err)
		}
	} else {
		cancel()
		if lk := <-done; lk != nil {
			t.Fatal("the waiter that gave up holds the key")
		}
		if err := holder.Release(ctx); err != nil {
			t.Fatal(err)
		}
	}
	w.Close() // its withdraws and its leave are done
	late.land(t, rdb)
	if v, err := rdb.Get(ctx, holder.id.lockKey()).Result(); err != redis.Nil {
		t.Fatalf("the key holds %q (%v) after the late copy of the lost attempt %s; want it free", v, err, lost)
	}
	for id, b := range rdb.HGetAll(ctx, holder.id.bidsKey()).Val() {
		if strings.Contains(b, lost) {
			t.Errorf("the late copy left a bid %s=%q", id, b)
		}
	}
	if q := rdb.LRange(ctx, holder.id.keys[2], 0, -1).Val(); len(q) != 0 {
		t.Errorf("the queue holds %q after the late copy; want it empty", q)
	}
	lk, err := live.Acquire(ctx, key, Options{TTL: longLease, Fair: fair})
	if err != nil {
		t.Fatalf("an Acquire with no wait after the late copy: %v; want the free key", err)
	}
	lk.Release(ctx)
}

// TestFairLateCopyOnAHeldKeyQueuesNobody: in fair mode, a waiter's
// joining attempt is held up in the network, the waiter gives up and its
// Locker closes, and the copy reaches Redis while the key is still held.
// The clean-up buried the attempt, so the copy queues nobody and leaves no
// bid: the release grants the key to the live waiter queued behind, not
// to the copy's token. (Before, the copy's entry was granted the key, and
// the live waiter waited out the claim window.)
func TestFairLateCopyOnAHeldKeyQueuesNobody(t *testing.T) {
	rdb, h, live, w, late := lateCopySetup(t, acquireFairScript.Hash())
	ctx := context.Background()
	const key = "fair-late-copy-held"
	o := Options{TTL: longLease, Wait: longLease, Fair: true, Retry: LinearBackoff(time.Millisecond)}

	holder, err := h.Acquire(ctx, key, Options{TTL: longLease, Fair: true})
	if err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithCancel(ctx)
	done, lost := waitWithLateCopy(t, wctx, w, late, key, o)
	cancel()
	if lk := <-done; lk != nil {
		t.Fatal("the waiter that gave up holds the key")
	}
	w.Close()
	if err := rdb.ZScore(ctx, holder.id.lostKey(), lost).Err(); err != nil {
		t.Fatalf("the lost attempt %s is not buried: %v", lost, err)
	}
	late.land(t, rdb) // the key is held
	for _, e := range rdb.LRange(ctx, holder.id.keys[2], 0, -1).Val() {
		if strings.Contains(e, lost) {
			t.Errorf("the late copy of the buried attempt %s is queued: %q", lost, e)
		}
	}
	got := queueWaiters(t, live, key, 1, o)
	released := time.Now()
	if err := holder.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if v := rdb.Get(ctx, holder.id.lockKey()).Val(); strings.HasPrefix(v, lost+"|") {
		t.Errorf("the release granted the key to the buried token %s (%q); want the live waiter's", lost, v)
	}
	nextLiveWaiter(t, got, released).Release(ctx)
}

// TestLateSetCopyOnFreeKeysTakesNothing is TestLateCopyOnAFreeKeyTakesNothing
// for AcquireAll: the rollback of a waiting attempt whose reply was lost
// buries it, so its copy, come once the AcquireAll gave up and the keys
// are free, takes none of them.
func TestLateSetCopyOnFreeKeysTakesNothing(t *testing.T) {
	rdb, h, live, w, late := lateCopySetup(t, multiPlain.acquire.Hash())
	ctx := context.Background()
	keys := []string{"late-set-a", "late-set-b"}

	holder, err := h.Acquire(ctx, keys[0], Options{TTL: longLease})
	if err != nil {
		t.Fatal(err)
	}
	late.armed.Store(true)
	wctx, cancel := context.WithCancel(ctx)
	done := make(chan *MultiLock, 1)
	go func() {
		m, _ := w.AcquireAll(wctx, keys, Options{TTL: longLease, Wait: longLease, Retry: LinearBackoff(time.Millisecond)})
		done <- m
	}()
	lost := late.token()
	waitForWaiters(t, w, keys[0], 1)
	cancel()
	if m := <-done; m != nil {
		t.Fatal("the AcquireAll that gave up holds the keys")
	}
	if err := holder.Release(ctx); err != nil {
		t.Fatal(err)
	}
	w.Close()
	late.land(t, rdb)
	for _, k := range keys {
		if v, err := rdb.Get(ctx, h.RedisKey(k)).Result(); err != redis.Nil {
			t.Errorf("%s holds %q (%v) after the late copy of the lost attempt %s; want it free", k, v, err, lost)
		}
	}
	m, err := live.AcquireAll(ctx, keys, Options{TTL: longLease})
	if err != nil {
		t.Fatalf("an AcquireAll with no wait after the late copy: %v; want the free keys", err)
	}
	m.Release(ctx)
}

// TestForgedGrantNoticeMakesNoHolder: a client that may read the keys and
// publish reads a waiting bid's token (from the bids hash, or the fair
// queue's entry) and publishes grant notices for it, in this version's
// form and the one before's, with a fence of its choosing. The waiter
// wakes and asks Redis, which answers busy: it holds nothing while the
// holder does, and when the holder lets go it gets the key with a fence
// from the counter, not the forger's.
func TestForgedGrantNoticeMakesNoHolder(t *testing.T) {
	for _, fair := range []bool{false, true} {
		t.Run(mode(fair), func(t *testing.T) {
			srv, h, w := twoLockers(t)
			ctx := context.Background()
			const key = "forged"
			o := Options{TTL: longLease, Wait: longLease, Fair: fair}
			holder, err := h.Acquire(ctx, key, Options{TTL: longLease, Fair: fair})
			if err != nil {
				t.Fatal(err)
			}
			got := queueWaiters(t, w, key, 1, o)
			rdb := srv.Client(t)
			token := standingBid(t, rdb, holder, w, fair)
			const huge = int64(1) << 60
			for _, forged := range []string{
				"g" + strconv.Itoa(int(claimWindow.Milliseconds())) + " " + token,
				"g" + strconv.FormatInt(huge, 10) + " " + strconv.FormatInt(huge, 10) + " " + token,
			} {
				if err := rdb.Publish(ctx, holder.id.lockKey(), forged).Err(); err != nil {
					t.Fatal(err)
				}
			}
			select {
			case hw := <-got:
				t.Fatalf("a forged grant notice gave the waiter a lock (fence %d) while the holder holds the key", hw.lk.Fence())
			case <-time.After(300 * time.Millisecond):
			}
			if err := holder.Err(); err != nil {
				t.Fatalf("the holder's lock ended: %v", err)
			}
			released := time.Now()
			if err := holder.Release(ctx); err != nil {
				t.Fatal(err)
			}
			lk := nextLiveWaiter(t, got, released)
			defer lk.Release(ctx)
			if lk.Fence() <= holder.Fence() || lk.Fence() >= huge {
				t.Fatalf("the waiter's fence is %d after the holder's %d; want the counter's next, not the forger's %d", lk.Fence(), holder.Fence(), huge)
			}
		})
	}
}

// standingBid returns the token of w's standing bid for holder's key, as
// a reader of the keys finds it.
func standingBid(t *testing.T, rdb *redis.Client, holder *Lock, w *Locker, fair bool) string {
	t.Helper()
	ctx := context.Background()
	if !fair {
		// "<ms registered> <lease ms> <token>" (lua/bids.lua)
		parts := strings.SplitN(rdb.HGet(ctx, holder.id.bidsKey(), w.id).Val(), " ", 3)
		if len(parts) != 3 {
			t.Fatalf("bid %q in Redis; want the waiter's", parts)
		}
		return parts[2]
	}
	// "<deadline ms>:<place>|<ms placed>|<lease ms>|<token>" (lua/queue_head.lua)
	q := rdb.LRange(ctx, holder.id.keys[2], 0, -1).Val()
	if len(q) != 1 || strings.Count(q[0], "|") != 3 {
		t.Fatalf("queue %q; want the waiter's entry, with its bid", q)
	}
	return q[0][strings.LastIndex(q[0], "|")+1:]
}

// TestFairExpiredGrantQueuesAgain: a fair waiter's grant notice is lost
// and its next attempt is held up past the claim window (a stalled
// process), so the grant runs out unclaimed, its entry gone from the
// queue. The next live waiter, in another Locker, told of the grant, has
// the key while the stalled attempt is still held up, within a second of
// the release (plus what the machine stalled the test's goroutines);
// Redis answers the stalled waiter's attempt that it is not queued, and
// it asks to join again, last, instead of waiting outside the queue,
// where no release would ever grant it the key.
func TestFairExpiredGrantQueuesAgain(t *testing.T) {
	srv := redistest.Start(t)
	a := mustNew(t, srv.Client(t))
	defer a.Close()
	// Held up until the next live waiter has the key (at most 15 s, within
	// the stalled waiter's 20 s wait), so that it has it on its own.
	stall := &stallScript{sha: acquireFairScript.Hash(), d: 15 * time.Second, resume: make(chan struct{})}
	bc := srv.Client(t)
	bc.AddHook(stall)
	b := mustNew(t, bc)
	defer b.Close()
	c := mustNew(t, srv.Client(t))
	defer c.Close()
	c.recheck = time.Hour
	grantNotices(b, func(int64) int { return 0 })
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	const key = "fair-expired-grant"
	rdb := srv.Client(t)

	holder, err := a.Acquire(ctx, key, Options{TTL: 30 * time.Second, Fair: true})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{}, 1)
	go func() {
		if lk, err := b.Acquire(ctx, key, Options{TTL: 30 * time.Second, Wait: 20 * time.Second, Fair: true}); err == nil {
			lk.Release(context.Background())
		}
		done <- struct{}{}
	}()
	waitForWaiters(t, b, key, 1)
	waitParked(t, b, key, 1)
	next := queueWaiters(t, c, key, 1, Options{TTL: 30 * time.Second, Wait: 20 * time.Second, Fair: true})
	queue := holder.id.keys[2]
	if n := rdb.LLen(ctx, queue).Val(); n != 2 {
		t.Fatalf("queue of %d before the release, want both waiters", n)
	}
	stall.armed.Store(true) // the older waiter's next attempt is held up
	stalls := meterStalls()
	released := time.Now()
	if err := holder.Release(ctx); err != nil {
		t.Fatal(err)
	}
	h := <-next
	d, stalled := time.Since(released), stalls()
	if h.lk == nil {
		t.Fatal("the next live waiter got no lock")
	}
	defer h.lk.Release(ctx)
	if stall.passed.Load() {
		t.Fatalf("the next live waiter had the key %v after the release, after the stalled waiter's attempt was let through; want it before: the unclaimed grant ends on its own", d)
	}
	close(stall.resume)
	if d > time.Second+stalled {
		t.Fatalf("the next live waiter had the key %v after the release; want it within a second (plus the %v the machine stalled): the unclaimed grant holds it for %v", d, stalled, claimWindow)
	}
	deadline := time.Now().Add(5 * time.Second)
	for rdb.LLen(ctx, queue).Val() != 1 {
		if time.Now().After(deadline) {
			t.Fatalf("the queue holds %q 5s after the release: the waiter whose grant ran out unclaimed did not queue again", rdb.LRange(ctx, queue, 0, -1).Val())
		}
		time.Sleep(10 * time.Millisecond)
	}
	cancel()
	<-done
}

// stallScript is a go-redis hook that holds up, once armed, the first
// call of the script whose SHA1 is sha (EVALSHA or EVAL, alone or in a
// pipeline) before sending it: by d, or until resume (when set) is
// closed. passed is set once the held call goes on.
type stallScript struct {
	sha    string
	d      time.Duration
	resume chan struct{}
	armed  atomic.Bool
	passed atomic.Bool
}

func (h *stallScript) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *stallScript) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		h.hold([]redis.Cmder{cmd})
		return next(ctx, cmd)
	}
}

func (h *stallScript) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		h.hold(cmds)
		return next(ctx, cmds)
	}
}

func (h *stallScript) hold(cmds []redis.Cmder) {
	for _, c := range cmds {
		args := c.Args()
		if len(args) > 1 && fmt.Sprint(args[1]) == h.sha && h.armed.CompareAndSwap(true, false) {
			select {
			case <-h.resume: // nil when not set: never
			case <-time.After(h.d):
			}
			h.passed.Store(true)
			return
		}
	}
}
