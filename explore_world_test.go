package padlock_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/padlockgo/padlock"
	"github.com/padlockgo/padlock/internal/explore"

	"github.com/redis/go-redis/v9"
)

// The explorer's world: one run's servers, Lockers, checker and
// randomness, and the faults it injects on them: restarts, pauses,
// stalled sends and lost notices.

// world is one run: its server, Lockers, checker and randomness.
type world struct {
	t    *testing.T
	seed uint64
	fam  string
	tr   *explore.Trace
	srv  *explore.Server   // the one server; a Redlock run's first node, a Cluster's first master
	srvs []*explore.Server // every server: a Redlock run's nodes, a Cluster's masters
	plan *explore.Plan
	chk  *checker

	// A Redlock run (family redlock): its Lockers' nodes, and whether
	// they are said to persist every write (WithPersistentNodes), which a
	// restart without persistence then breaks.
	redlock    bool
	persistent bool
	// cluster: a run on a Redis Cluster in memory (exploreDeployment),
	// whose masters are srvs; nil on one node or Redlock.
	cluster *explore.Cluster

	clients  []redis.UniversalClient
	hooks    []*explore.Hook
	lhooks   [][]*explore.Hook // the hooks of each Locker's clients
	lockers  []*padlock.Locker
	closed   []chan struct{} // closed when lockers[i] was closed mid-run
	closedAt []atomic.Int64  // when Close returned, since the start; 0 if not
	// closingAt: when Close was called, since the start; 0 if not.
	closingAt []atomic.Int64
	late      sync.WaitGroup
	wg        sync.WaitGroup // every goroutine of the run's operations
	actors    atomic.Int64   // numbers the goroutines, for their randomness

	jobs *jobs // the schedule family's job

	tokens *tokenSends // token-fresh: every grant-making command sent
	copies *copiesSeen // copy-inert: the clean-ups that ran
	bids   bidsRead    // bid-fresh: the stale bids read in Redis
	sets   *sets       // whole-or-none: what AcquireAll's attempts took
	order  *orderSeen  // the order invariants: queues, lines, the election
	// electKey is the Redis key of the election's lock, in the election
	// family.
	electKey string

	keys []string
	ttl  time.Duration // the lease most grants ask for: a lock is handed on only to a waiter that asked for the same
	end  time.Time     // no new operations after this
	// maxWait, when not zero, caps how long an Acquire waits (runs on the
	// wall clock keep their seconds few).
	maxWait time.Duration
	// maxSet, when not zero, caps the keys of one AcquireAll.
	maxSet int
	// extendOdds: a holder calls Extend before one step of its work in
	// extendOdds (0: 30).
	extendOdds int
	// hot: a mutex or fair run on several keys with short holds and more
	// goroutines, so that the hand-offs of different keys fall due
	// together and go in one batch (store_combine.go).
	hot bool
	// noticesStarved: a run whose commands meet no fault and that loses
	// one release notice in three (faultNotices).
	noticesStarved bool
	// noticesFaulted: the notices to the Lockers' waiters are lost,
	// repeated or late now and then (faultNotices).
	noticesFaulted bool
	// fleet: a mutex or fair run on one node or the Cluster, on one key, whose notices
	// meet no fault (and its commands none, unless fleetFaults), with
	// lines of waiters in each Locker, so that
	// Lockers with lines of their own take turns (the turns invariant).
	fleet bool
	// fleetSets: a fleet run whose waiters include AcquireAlls.
	fleetSets bool
	// In fleet runs, the waiters that are not there (the idle invariant,
	// explore_idle_test.go): doomed, the Locker killed (-1: none), at
	// killShare of the run, killedAt (-1 until then), dead once it is;
	// grantsLost: grant notices are lost now and then.
	doomed     int
	fleetTTL   time.Duration
	killShare  float64
	killedNs   atomic.Int64 // killedAt, read by the notices' goroutines too
	dead       atomic.Bool
	grantsLost bool
	// killAtGrant: the doomed Locker dies at the first grant to one of
	// its bids after killShare (its waiter never hears it), not at a
	// moment of its own; killArmed once killShare has passed, killing
	// once one of the two ways has begun the kill.
	killAtGrant bool
	killArmed   atomic.Bool
	killing     atomic.Bool
	// impatient: a fleet run's Locker whose waiters give up soon (-1:
	// none).
	impatient int
	// impatientHonest: in one faulted fleet seed's run in two, the
	// impatient Locker's commands meet no fault and no late copy
	// (planOf), so that nothing excuses a bid its line leaves standing
	// when all its waiters give up at once.
	impatientHonest bool
	// quitShare: the share of the run after which the impatient Locker
	// starts no more operations (0: it never stops), as a process whose
	// traffic ends: its last waiters give up, and nothing of it may be
	// left standing in Redis (bid-owned).
	quitShare float64
	// giveUps: the impatient Locker's waiting Acquires, by operation,
	// each with the cancel of its context: one grant to it in three
	// makes them all give up as it arrives (noticesOf).
	giveUpsMu sync.Mutex
	giveUps   map[*opSeen]context.CancelFunc
	// grants: the grant notices heard in a fleet run (the claimed
	// invariant, explore_claim_test.go).
	grants grantsSeen
	// fleetFaults: a fleet run whose commands meet faults, and faults,
	// when (explore_fleetfault_test.go).
	fleetFaults bool
	faults      faultsSeen
	// fleetSeed: a fleet seed's run (seedFamily), whose faulted runs also
	// meet late copies of attempts (lateCopies).
	fleetSeed bool
}

// extendNow reports whether a holder calls Extend before this step.
func (w *world) extendNow(r *rand.Rand) bool {
	if w.extendOdds == 0 {
		return r.IntN(30) == 0
	}
	return r.IntN(w.extendOdds) == 0
}

// rng returns the randomness of one actor of the run: fixed by the seed.
func (w *world) rng(actor int) *rand.Rand {
	return rand.New(rand.NewPCG(w.seed, 0x9e3779b97f4a7c15^uint64(actor)))
}

// restarts returns when any of the run's servers restarted.
func (w *world) restarts() []time.Time {
	var rs []time.Time
	for _, s := range w.srvs {
		rs = append(rs, s.Restarts()...)
	}
	return rs
}

// restartIn reports whether any of the run's servers restarted without
// persistence within (from, to]: a key may be gone from it since.
func (w *world) restartIn(from, to time.Duration) bool {
	for _, r := range w.restarts() {
		if at := r.Sub(w.tr.Start()); at > from && at <= to {
			return true
		}
	}
	return false
}

// pausedIn reports whether any of the run's servers was paused at some
// time in [from, to].
func (w *world) pausedIn(from, to time.Time) bool {
	for _, s := range w.srvs {
		if s.PausedIn(from, to) {
			return true
		}
	}
	return false
}

func latest(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// backing says why a majority of the Redlock nodes does not hold h's
// lock under its token at least until its ValidUntil, which its holder
// trusts ("" when one does): a change a majority confirmed is in force on
// each node of that majority, as every node refuses a change older than
// one it applied. A node that restarted without persistence since the
// anchor's send (less the longest a command can be in flight) has
// dropped it, which the restart rule makes safe: it is excused.
func (w *world) backing(h *hold) string {
	if h.lk == nil {
		return ""
	}
	rk := w.lockers[0].RedisKey(h.key)
	valid, now := h.lk.ValidUntil(), time.Now()
	if w.restartIn(h.anchor-maxInFlight, w.chk.now()) {
		return ""
	}
	var ends []string
	holding := 0
	for _, s := range w.srvs {
		v, err := s.M.Get(rk)
		if err != nil || !strings.Contains(v, h.lk.Token()) {
			ends = append(ends, s.Name+": not held")
			continue
		}
		end := now.Add(s.M.TTL(rk))
		if !end.Before(valid) {
			holding++
		}
		ends = append(ends, fmt.Sprintf("%s: %q to %.3fs", s.Name, v[strings.Index(v, "|"):], end.Sub(w.tr.Start()).Seconds()))
	}
	if need := len(w.srvs)/2 + 1; holding < need {
		return fmt.Sprintf("trusted until %.3fs, but only %d nodes hold it that long, want %d (%s)", valid.Sub(w.tr.Start()).Seconds(), holding, need, strings.Join(ends, "; "))
	}
	return ""
}

// exploreMaxLease is the Redlock runs' max lease (WithMaxLease): the longest
// TTL they ask for, and how long a restarted node waits before it votes.
const exploreMaxLease = 2 * time.Second

// lease caps d at the max lease on a Redlock run (Acquire and Extend
// reject longer ones).
func (w *world) lease(d time.Duration) time.Duration {
	if w.redlock {
		return min(d, exploreMaxLease)
	}
	return d
}

// stallExtends makes Locker i's Extends stall, one time in three, for
// 1-20 ms between their check that the lock is held and the change they
// begin, as the seed decides.
func (w *world) stallExtends(l *padlock.Locker, i int) {
	padlock.SetExtending(l, w.stall(-100-i))
}

// stallProclaims makes Proclaim on Locker i stall, now and then, between
// its check that the term leads and the record it writes: a term may
// end meanwhile.
func (w *world) stallProclaims(l *padlock.Locker, i int) {
	padlock.SetProclaiming(l, w.stall(-150-i))
}

// faultNotices makes the notices that reach Locker i's waiters (release
// notices, other Lockers' wants, grants at release) lost, repeated or
// late, now and then, in one run of two, as the seed decides: a waiter
// must make do with its timers and its next attempt, and take a grant
// only once, whatever the notices do. (Drawn apart, so that the other
// runs keep their randomness.)
func (w *world) faultNotices(l *padlock.Locker, i int) {
	if w.rng(-600).IntN(2) == 0 && !w.noticesStarved || w.fleet {
		return
	}
	w.noticesFaulted = true
	var mu sync.Mutex
	r := w.rng(-610 - i)
	padlock.SetNoticeFault(l, func(channel, payload string) (int, time.Duration) {
		mu.Lock()
		defer mu.Unlock()
		switch n := r.IntN(20); {
		case n < 2, w.noticesStarved && n < 7:
			w.tr.Add("L%d: notice %q lost", i, payload)
			if strings.HasPrefix(payload, "g") {
				w.order.grantLost(w.chk.now())
			}
			return 0, 0
		case n < 3:
			w.tr.Add("L%d: notice %q delivered twice, 1-30 ms late", i, payload)
			return 2, time.Duration(1+r.IntN(30)) * time.Millisecond
		case n < 5:
			w.tr.Add("L%d: notice %q delivered 1-30 ms late", i, payload)
			return 1, time.Duration(1+r.IntN(30)) * time.Millisecond
		}
		return 1, 0
	})
}

// stall returns a step that sleeps 1 to 20 ms in one call of three, drawn
// from the actor's own randomness.
func (w *world) stall(actor int) func() {
	var mu sync.Mutex
	r := w.rng(actor)
	return func() {
		mu.Lock()
		d := time.Duration(0)
		if r.IntN(3) == 0 {
			d = time.Duration(1+r.IntN(20)) * time.Millisecond
		}
		mu.Unlock()
		time.Sleep(d)
	}
}
