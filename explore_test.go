package padlock_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/padlockgo/padlock"
	"github.com/padlockgo/padlock/internal/explore"
	"github.com/padlockgo/padlock/internal/hashslot"

	"github.com/redis/go-redis/v9"
)

// The seeded fault-schedule explorer. Each seed runs one scenario inside
// a testing/synctest bubble, on virtual time: several goroutines on
// several Lockers take, hold and let go of one primitive's grants (on one
// node, a Redis Cluster in memory, or Redlock nodes: see
// explore_matrix_test.go), while the fault layer (internal/explore)
// decides, from the seed, per client and per command, to stall a command
// between padlock's checks and its send, lose its reply after the server
// ran it, reset the connection after it ran, or time the caller out and
// run the command later, after commands sent after it; and, per run, to
// pause a server, restart it without persistence, cancel contexts
// mid-operation and close a Locker mid-operation. The checker
// (explore_check_test.go) then checks each primitive's invariants. See
// "The explorer" in RELIABILITY.md.
//
//	PADLOCK_EXPLORE_SEEDS=N   how many seeds (default exploreSeeds; CI runs ciExploreSeeds)
//	PADLOCK_EXPLORE_FIRST=n   the first seed (default 1)
//	PADLOCK_EXPLORE_SEED=n    one seed, with its whole trace on failure
//	PADLOCK_EXPLORE_REPLAY=k  run each seed k times, and report how often it failed
//	PADLOCK_EXPLORE_FAMILY=f  only scenarios of family f (mutex, fair, rw, election, sem, semfair, keep, extend, resume, multi, redlock, schedule)
//	PADLOCK_EXPLORE_DEPLOYMENT=d  only runs on deployment d: single (one node), cluster (a Redis
//	                          Cluster in memory: one seed in three of every family but redlock), redlock
//	PADLOCK_EXPLORE_STOP=1    stop at the first failing seed
//	PADLOCK_EXPLORE_IGNORE=a,b  do not report invariants a and b (to look past a known break)

// exploreSeeds is the default number of seeds of a plain go test, about
// ten seconds without -race. CI's budget is ciExploreSeeds: .ci/run and
// the mutant runner ask for it with PADLOCK_EXPLORE_SEEDS.
const exploreSeeds = 100

// ciExploreSeeds is CI's budget: the mutant catalog's kill table
// (RELIABILITY.md) is measured at it, and the reverted fixes of its table
// were found within it when they were measured (a change to what a run
// does moves which seed fails). Under -race on a shared 2-CPU machine
// they take 3 to 5 minutes; see "The explorer".
const ciExploreSeeds = 400

// The scenario families; a seed's family is seed mod len(families).
var families = []string{"mutex", "fair", "rw", "election", "sem", "semfair", "keep", "extend", "resume", "multi", "redlock", "schedule"}

func envInt(t *testing.T, name string, def int) int {
	s := os.Getenv(name)
	if s == "" {
		return def
	}
	n, err := strconv.Atoi(s)
	if err != nil {
		t.Fatalf("%s=%q: %v", name, s, err)
	}
	return n
}

func TestExplore(t *testing.T) {
	if testing.Short() {
		t.Skip("the explorer runs many seeds")
	}
	first := envInt(t, "PADLOCK_EXPLORE_FIRST", 1)
	n := envInt(t, "PADLOCK_EXPLORE_SEEDS", exploreSeeds)
	if n < ciExploreSeeds {
		t.Logf("%d seeds; CI runs %d (PADLOCK_EXPLORE_SEEDS)", n, ciExploreSeeds)
	}
	replay := envInt(t, "PADLOCK_EXPLORE_REPLAY", 1)
	only := os.Getenv("PADLOCK_EXPLORE_FAMILY")
	onlyOn := os.Getenv("PADLOCK_EXPLORE_DEPLOYMENT")
	stop := os.Getenv("PADLOCK_EXPLORE_STOP") != ""
	ignore := map[string]bool{}
	for _, inv := range strings.Split(os.Getenv("PADLOCK_EXPLORE_IGNORE"), ",") {
		ignore[strings.TrimSpace(inv)] = true
	}
	verbose := false
	if s := os.Getenv("PADLOCK_EXPLORE_SEED"); s != "" {
		first, n, verbose = envInt(t, "PADLOCK_EXPLORE_SEED", 0), 1, true
	}
	var (
		mu       sync.Mutex
		failed   = map[string][]uint64{} // invariant -> seeds
		ran      int
		firstBad = -1
	)
	began := time.Now()
	for i := 0; i < n; i++ {
		seed := uint64(first + i)
		fam := families[seed%uint64(len(families))]
		if only != "" && fam != only {
			continue
		}
		dep, _ := exploreDeployment(seed, fam)
		if onlyOn != "" && dep != onlyOn {
			continue
		}
		what := fam + " on " + dep
		if fam == "redlock" {
			what = "redlock, operations of " + redlockOps(seed)
		}
		fails := 0
		for r := 0; r < replay; r++ {
			var vs []violation
			var trace *explore.Trace
			t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
				synctest.Test(t, func(t *testing.T) {
					vs, trace = exploreSeed(t, seed, fam)
				})
				vs = slices.DeleteFunc(vs, func(v violation) bool { return ignore[v.inv] })
				if os.Getenv("PADLOCK_EXPLORE_TRACE") != "" {
					t.Logf("trace of seed %d:\n%s", seed, trace.Around(0, 0, time.Hour, 1<<20))
				}
				if len(vs) == 0 {
					return
				}
				var b strings.Builder
				fmt.Fprintf(&b, "seed %d (%s): %d violation(s); replay with PADLOCK_EXPLORE_SEED=%d\n", seed, what, len(vs), seed)
				for i, v := range vs {
					if i == 3 && !verbose {
						fmt.Fprintf(&b, "... and %d more\n", len(vs)-3)
						break
					}
					fmt.Fprintf(&b, "%s at %.3fs: %s\n", v.inv, v.at.Seconds(), v.text)
				}
				v := vs[0]
				if verbose {
					fmt.Fprintf(&b, "trace:\n%s", trace.Around(v.at, time.Hour, time.Hour, 1<<20))
				} else {
					fmt.Fprintf(&b, "trace around the first:\n%s", trace.Around(v.at, 1500*time.Millisecond, 100*time.Millisecond, 40))
				}
				t.Error(b.String())
			})
			mu.Lock()
			ran++
			if len(vs) > 0 {
				fails++
				if firstBad < 0 {
					firstBad = ran
				}
				seen := map[string]bool{}
				for _, v := range vs {
					if !seen[v.inv] {
						seen[v.inv] = true
						failed[v.inv] = append(failed[v.inv], seed)
					}
				}
			}
			mu.Unlock()
		}
		if replay > 1 {
			t.Logf("seed %d (%s) failed %d of %d runs", seed, fam, fails, replay)
		}
		if stop && fails > 0 {
			break
		}
	}
	var invs []string
	for inv := range failed {
		invs = append(invs, inv)
	}
	sort.Strings(invs)
	var b strings.Builder
	fmt.Fprintf(&b, "explored %d runs of seeds %d..%d in %v", ran, first, first+n-1, time.Since(began).Round(time.Millisecond))
	if firstBad >= 0 {
		fmt.Fprintf(&b, "; first failure at run %d", firstBad)
	}
	for _, inv := range invs {
		s := failed[inv]
		fmt.Fprintf(&b, "\n  %-18s failed in %d seed(s), first %v", inv, len(s), s[:min(len(s), 8)])
	}
	t.Log(b.String())
}

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
	late     sync.WaitGroup
	wg       sync.WaitGroup // every goroutine of the run's operations
	actors   atomic.Int64   // numbers the goroutines, for their randomness

	jobs *jobs // the schedule family's job

	tokens *tokenSends // token-fresh: every grant-making command sent
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
	// fleet: a mutex run on one node and one key whose commands and
	// notices meet no fault, with four goroutines per Locker, so that
	// Lockers with lines of their own take turns (the turns invariant).
	fleet bool
	// In fleet runs, the waiters that are not there (the idle invariant,
	// explore_idle_test.go): doomed, the Locker killed (-1: none), at
	// killShare of the run, killedAt (-1 until then), dead once it is;
	// grantsLost: grant notices are lost now and then.
	doomed     int
	fleetTTL   time.Duration
	killShare  float64
	killedAt   time.Duration
	dead       atomic.Bool
	grantsLost bool
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

func exploreSeed(t *testing.T, seed uint64, fam string) ([]violation, *explore.Trace) {
	tr := explore.NewTrace()
	w := &world{t: t, seed: seed, fam: fam, tr: tr, tokens: newTokenSends(), sets: newSets(), order: newOrderSeen()}
	r := w.rng(-1)
	rates := []float64{0.03, 0.08, 0.15}
	rate := rates[r.IntN(len(rates))]
	if fam == "extend" || fam == "redlock" && redlockOps(seed) == "redlock" {
		// Lease changes lost, late and reordered. (Redlock runs of
		// other operations keep the others' rates: at this one, over
		// up to 5 nodes, few of their AcquireAlls and ticks succeed.)
		rate = 0.25
	}
	w.plan = &explore.Plan{Seed: seed, Rate: rate, Latency: pick(r, 50*time.Microsecond, 200*time.Microsecond, time.Millisecond)}
	if r.IntN(3) == 0 {
		// Replies lost below go-redis, which would send the command again.
		w.plan.ConnRate = 0.03
	}
	// A starved runtime: the watchdogs wake late.
	lateWatchdog := r.IntN(4) == 0
	if fam == "redlock" {
		// 2 to 5 nodes, each its own server (a quorum of N/2+1: 2 of 2,
		// 2 of 3, 3 of 4, 3 of 5); a Redlock client bounds its waits by
		// its context's deadline.
		w.redlock, w.plan.ContextTimeout = true, true
		w.persistent = r.IntN(4) == 0
		for j := range 2 + r.IntN(4) {
			s := explore.NewServer(fmt.Sprintf("n%d", j), tr)
			s.Addr = fmt.Sprintf("127.0.0.1:%d", 6379+j)
			w.srvs = append(w.srvs, s)
		}
		// What the run does with its Redlock Lockers, beside Acquire,
		// Extend and the releases: the operations of another family.
		fam = redlockOps(seed)
		w.fam = fam
	} else if dep, n := exploreDeployment(seed, fam); dep == "cluster" {
		w.cluster = explore.NewCluster(n, tr)
		w.srvs = w.cluster.Servers
	} else {
		w.srvs = []*explore.Server{explore.NewServer("redis", tr)}
	}
	w.srv = w.srvs[0]
	// Drawn apart: a mutex run in three whose commands meet no fault
	// and whose release notices are often lost, so that waiters must
	// find free keys by their own timers (the progress invariant, which
	// only operations without a fault show).
	if sr := w.rng(-820); fam == "mutex" && sr.IntN(3) == 0 {
		w.plan.Rate, w.plan.ConnRate, w.noticesStarved = 0, 0, true
	}
	// Drawn apart: half the other mutex runs on one node are a fleet.
	if fr := w.rng(-840); fam == "mutex" && !w.redlock && w.cluster == nil && !w.noticesStarved && fr.IntN(2) == 0 {
		w.plan.Rate, w.plan.ConnRate, w.fleet = 0, 0, true
	}
	// Commands that reach the server in steps: TIME repeats its reading
	// for every command of a step, and fences must still rise (drawn
	// apart, so that the other runs keep their randomness).
	if cr := w.rng(-500); !w.redlock && cr.IntN(3) == 0 {
		w.plan.Align = coarseTick
	}
	nLockers := 2 + r.IntN(2)
	w.doom(nLockers)
	// A wider drift margin widens the span between a lock's trust running
	// out and its lease in Redis.
	drift, fixed := pick(r, 0.01, 0.1, 0.3), pick(r, 2*time.Millisecond, 20*time.Millisecond)
	// The named window: the restarts after which holders of the keys a
	// server dropped may still believe they hold them. On Redlock there
	// is none, as a restarted node does not vote for the max lease,
	// unless the nodes are said to persist every write: then a restart
	// without persistence breaks that word, and any node's counts.
	restarts := w.srv.Restarts
	if w.cluster != nil {
		// Any master's restart opens the window, for every key.
		restarts = w.restarts
	}
	if w.redlock {
		restarts = func() []time.Time { return nil }
		if w.persistent {
			restarts = w.restarts
		}
	}
	w.chk = newChecker(tr, restarts, func(ttl time.Duration) time.Duration { return time.Duration(float64(ttl)*drift) + fixed })
	w.chk.noFences = w.redlock
	if w.cluster != nil {
		// A fence counter per hash slot (config_keys.go).
		w.chk.slot = func(key string) string { return strconv.Itoa(hashslot.Slot(w.lockers[0].RedisKey(key))) }
	}
	if w.redlock {
		w.chk.backing = w.backing
	}
	for i := range nLockers {
		var l *padlock.Locker
		if w.redlock {
			var cs []redis.UniversalClient
			var hs []*explore.Hook
			for j, s := range w.srvs {
				c, h := explore.NewClient(8*i+j, fmt.Sprintf("L%d.%s", i, s.Name), s, w.plan, tr, &w.late)
				w.watchTokens(h)
				w.clients = append(w.clients, c)
				w.hooks = append(w.hooks, h)
				cs, hs = append(cs, c), append(hs, h)
			}
			opts := []padlock.RedlockOption{padlock.WithClockDrift(drift, fixed), padlock.WithMaxLease(exploreMaxLease), padlock.WithDefaults(padlock.Options{TTL: time.Second}), padlock.WithObserver(lineObserver{w: w})}
			if w.persistent {
				opts = append(opts, padlock.WithPersistentNodes())
			}
			var err error
			if l, err = padlock.NewRedlock(cs, opts...); err != nil {
				t.Fatalf("NewRedlock: %v", err)
			}
			w.lhooks = append(w.lhooks, hs)
		} else if w.cluster != nil {
			l = w.newClusterLocker(i, padlock.WithClockDrift(drift, fixed), padlock.WithObserver(lineObserver{w: w}))
		} else {
			c, h := explore.NewClient(i, fmt.Sprintf("L%d", i), w.srv, w.plan, tr, &w.late)
			if i == w.doomed {
				c.AddHook(killer{&w.dead})
			}
			w.watchTokens(h)
			w.clients = append(w.clients, c)
			w.hooks = append(w.hooks, h)
			w.lhooks = append(w.lhooks, []*explore.Hook{h})
			// Without ContextTimeoutEnabled unless the plan says so.
			l = padlock.NewUnchecked(c, padlock.WithClockDrift(drift, fixed), padlock.WithObserver(lineObserver{w: w}))
		}
		// A hand-off is confirmed by a command sent after the release
		// began: let the virtual clock move on in between.
		padlock.SetConfirming(l, func() { time.Sleep(time.Microsecond) })
		// A stall between Extend's check and its send, now and then; and
		// between Proclaim's.
		w.stallExtends(l, i)
		w.stallProclaims(l, i)
		w.faultNotices(l, i)
		w.noticesOf(l, i)
		if lateWatchdog {
			lr := w.rng(-200 - i) // used by the watchdog's goroutine alone
			padlock.SetWatchdogLate(l, func() time.Duration {
				if lr.IntN(3) == 0 {
					return time.Duration(1+lr.IntN(60)) * time.Millisecond
				}
				return 0
			})
		}
		w.lockers = append(w.lockers, l)
		w.closed = append(w.closed, make(chan struct{}))
	}
	w.closedAt = make([]atomic.Int64, nLockers)
	if fam == "election" {
		w.electKey = w.lockers[0].RedisKey("el")
	}
	w.ttl = pick(r, 300*time.Millisecond, 600*time.Millisecond, time.Second)
	w.keys = []string{"k0"}
	if r.IntN(4) == 0 {
		w.keys = append(w.keys, "k1")
	}
	if fam == "multi" {
		w.keys = []string{"k0", "k1", "k2"}
	}
	// Drawn apart, so that the other runs keep their randomness.
	if hr := w.rng(-300); (fam == "mutex" || fam == "fair") && hr.IntN(3) == 0 && !w.fleet {
		w.hot = true
		w.keys = []string{"k0", "k1", "k2", "k3", "k4", "k5"}[:3+hr.IntN(4)]
		// Round trips long beside the holds, which are few ms apart
		// (work): a hand-off is often on its way when another falls due.
		w.plan.Latency = time.Millisecond
	}
	if w.fleet {
		w.keys = []string{"k0"}
	}
	w.spreadKeys()
	run := 4*time.Second + time.Duration(r.IntN(4000))*time.Millisecond
	w.end = time.Now().Add(run)
	tr.Add("seed %d: %s, %d Lockers, keys %v, fault rate %.2f, connection fault rate %.2f, late watchdogs %v, drift %v+%v, %v of operations, hot keys %v, commands in steps of %v, notices starved %v, fleet %v", seed, fam, nLockers, w.keys, w.plan.Rate, w.plan.ConnRate, lateWatchdog, drift, fixed, run, w.hot, w.plan.Align, w.noticesStarved, w.fleet)
	if w.fleet {
		tr.Add("fleet: leases of %v, L%d killed at %.0f%% of the run (-1: none), grant notices lost %v", w.fleetTTL, w.doomed, 100*w.killShare, w.grantsLost)
	}
	if w.cluster != nil {
		tr.Add("a Cluster in memory of %d masters; keys on masters %v", len(w.srvs), w.keyMasters())
	}
	if w.redlock {
		tr.Add("Redlock over %d nodes (quorum %d), max lease %v, persistent nodes said %v, operations of %s", len(w.srvs), len(w.srvs)/2+1, exploreMaxLease, w.persistent, fam)
	}

	wg := &w.wg
	// Run-wide faults: a pause, a restart without persistence, a Locker
	// closed mid-operation.
	var events []func()
	restarting := false // one node: a restart is among them
	if w.redlock || w.cluster != nil {
		// Per node (per master): a pause, a restart without persistence
		// (on a Cluster, as often as the one node's).
		restartOdds := 4
		if w.cluster != nil {
			restartOdds = 5
		}
		for _, s := range w.srvs {
			if r.IntN(3) == 0 {
				at, d := time.Duration(r.IntN(int(run))), time.Duration(50+r.IntN(4000))*time.Millisecond
				events = append(events, func() { time.Sleep(at); s.Pause(d) })
			}
			if r.IntN(restartOdds) == 0 {
				at := time.Duration(r.IntN(int(run)))
				events = append(events, func() { time.Sleep(at); s.Restart() })
			}
		}
	} else {
		if r.IntN(3) == 0 {
			at, d := time.Duration(r.IntN(int(run))), time.Duration(50+r.IntN(4000))*time.Millisecond
			events = append(events, func() { time.Sleep(at); w.srv.Pause(d) })
		}
		if r.IntN(5) == 0 {
			at := time.Duration(r.IntN(int(run)))
			events = append(events, func() { time.Sleep(at); w.srv.Restart() })
			restarting = true
		}
	}
	// Drawn apart: one run in three on one node without a restart starts
	// with the fence counter far ahead of the server's clock, as after the
	// clock stepped back or a failover to a master whose clock is behind:
	// every fence must come from the counter then, or fence-order fails.
	// (A restart loses the counter, and fences fall back to the clock.)
	if fr := w.rng(-860); !w.redlock && w.cluster == nil && !restarting && fr.IntN(3) == 0 {
		ahead := time.Now().Add(240 * time.Hour).UnixMicro()
		counter := strings.TrimSuffix(w.lockers[0].RedisKey("x"), "{x}") + "fence"
		if err := w.srv.M.Set(counter, strconv.FormatInt(ahead, 10)); err != nil {
			t.Fatalf("setting the fence counter ahead: %v", err)
		}
		tr.Add("fence counter %s starts at %d, ahead of the clock", counter, ahead)
	}
	closing, at := r.IntN(6) == 0, time.Duration(0)
	if closing {
		at = time.Duration(r.IntN(int(run)))
	} else if cr := w.rng(-900); fam == "multi" && cr.IntN(2) == 0 {
		// Half the multi runs close a Locker: an AcquireAll may be
		// waiting out a long backoff then (drawn apart, so that the
		// other runs keep their randomness).
		closing, at = true, time.Duration(cr.IntN(int(run)))
	}
	if closing {
		i := nLockers - 1
		events = append(events, func() {
			time.Sleep(at)
			tr.Add("L%d closed", i)
			close(w.closed[i])
			_ = w.lockers[i].Close()
			w.closedAt[i].Store(int64(w.chk.now()))
		})
	}
	for _, ev := range events {
		wg.Go(ev)
	}
	w.kill(run)

	w.actors.Store(1000) // goroutines started later (resumers) number from here
	if fam == "fair" || fam == "semfair" || fam == "rw" {
		wg.Go(w.watchQueues)
	}
	if fam == "multi" && len(w.srvs) == 1 {
		wg.Go(w.watchSets)
	}
	actors := 0
	switch fam {
	case "election":
		nc := 4 + r.IntN(2)
		for i := range nc {
			li := 0 // three candidates at least share a Locker: hand-offs
			if i >= 3 {
				li = i % nLockers
			}
			actors++
			a := actors
			wg.Go(func() { w.candidate(a, li) })
		}
		actors++
		a := actors
		wg.Go(func() { w.observer(a, 1%nLockers) })
	case "schedule":
		w.jobs = newJobs(r)
		tr.Add("job every %v, AtLeastFor %v, AtMostFor %v", w.jobs.interval, w.jobs.least, w.jobs.most)
		for li := range nLockers {
			for range 1 + r.IntN(2) {
				actors++
				a := actors
				wg.Go(func() { w.scheduler(a, li) })
			}
		}
	default:
		// Several goroutines per Locker: a Locker hands a lock on to its
		// own waiters.
		ng := nLockers * (2 + r.IntN(3))
		if w.hot {
			ng = nLockers * 2 * len(w.keys)
		}
		if w.fleet {
			ng = nLockers * 4
		}
		if w.redlock {
			// Every operation goes to every node: fewer goroutines keep
			// a seed's cost near the others'.
			ng = nLockers * (2 + r.IntN(2))
		}
		for i := range ng {
			li := i % nLockers
			if w.hot && i%4 != 0 {
				li = 0 // most in one Locker: its hand-offs meet
			}
			actors++
			a := actors
			wg.Go(func() { w.locker(a, li) })
		}
	}
	wg.Wait()

	// Everything let go: the checks at the end, without faults.
	for _, h := range w.hooks {
		h.Off()
	}
	for _, l := range w.lockers {
		_ = l.Close()
	}
	w.late.Wait()
	time.Sleep(5 * time.Second) // every lease has run out
	w.checkKeys()
	w.checkOrder()
	w.checkProgress()
	w.checkIdle()
	vs := w.chk.finish()
	for _, h := range w.hooks {
		h.CloseSide()
	}
	for _, c := range w.clients {
		_ = c.Close()
	}
	for _, s := range w.srvs {
		s.Close()
	}
	return vs, tr
}

func (w *world) isClosed(li int) bool {
	select {
	case <-w.closed[li]:
		return true
	default:
		return false
	}
}

// opCtx returns the context of one operation: usually without deadline;
// sometimes one that ends mid-operation.
func opCtx(r *rand.Rand) (context.Context, context.CancelFunc) {
	if r.IntN(5) == 0 {
		return context.WithTimeout(context.Background(), time.Duration(1+r.IntN(300))*time.Millisecond)
	}
	return context.WithCancel(context.Background())
}

func pick[T any](r *rand.Rand, xs ...T) T { return xs[r.IntN(len(xs))] }

// locker is one goroutine taking, holding and letting go of grants of
// the run's family on Locker li.
// semPermits is the capacity of the sem families' semaphores.
const semPermits = 2

func (w *world) locker(actor, li int) {
	r := w.rng(actor)
	g := fmt.Sprintf("g%d@L%d", actor, li)
	l := w.lockers[li]
	var sem *padlock.Semaphore
	permits := semPermits
	if w.fam == "sem" || w.fam == "semfair" {
		sem, _ = l.Semaphore(permits)
	}
	for time.Now().Before(w.end) && !w.isClosed(li) && !w.killedNow(li) {
		key := pick(r, w.keys...)
		o := padlock.Options{
			TTL:  pick(r, w.ttl, w.ttl, w.ttl, 300*time.Millisecond, 2*time.Second),
			Wait: pick(r, 0, 100*time.Millisecond, time.Second, 3*time.Second, 3*time.Second, 8*time.Second),
			Fair: w.fam == "fair" || w.fam == "semfair",
			// A fixed lease now and then (most of the extend family's):
			// nothing renews it, so the trust runs out while it is held.
			NoRenew: r.IntN(8) == 0 || w.fam == "extend" && r.IntN(3) != 0,
		}
		if w.hot || w.fleet {
			// Waiters that may be handed the lock: the same lease, a wait.
			o.TTL, o.Wait = w.ttl, max(o.Wait, time.Second)
		}
		if w.fleet {
			// Leases long beside the claim window, as users' are: a grant
			// to a waiter that is not there that held the key for one
			// would break the idle invariant.
			o.NoRenew, o.TTL = false, w.fleetTTL
		}
		if w.maxWait != 0 {
			o.Wait = min(o.Wait, w.maxWait)
		}
		if w.fam == "multi" && r.IntN(3) != 0 || w.fam == "cluster" && r.IntN(2) == 0 {
			w.multi(r, g, li, o)
			continue
		}
		kind, capacity := "mutex", 1
		ctx, cancel := opCtx(r)
		ctx, op := withOp(ctx)
		began := w.chk.now()
		var (
			lk  *padlock.Lock
			err error
		)
		switch w.fam {
		case "rw":
			if r.IntN(2) == 0 {
				kind = "write"
				w.began(op, li, kind, key, o)
				lk, err = l.AcquireWrite(ctx, key, o)
			} else {
				kind = "read"
				w.began(op, li, kind, key, o)
				lk, err = l.AcquireRead(ctx, key, o)
			}
		case "sem", "semfair":
			kind, capacity = "permit", permits
			w.began(op, li, kind, key, o)
			lk, err = sem.Acquire(ctx, key, o)
		default:
			w.began(op, li, kind, key, o)
			lk, err = l.Acquire(ctx, key, o)
		}
		w.ended(op, err == nil)
		w.gaveUp(op, ctx, err, o)
		w.checkCancelled(li, g, kind+" "+key, ctx, err)
		w.checkBudget(li, g, kind+" "+key, began, o.Wait, err)
		cancel()
		w.checkClosed(li, g, kind+" "+key)
		w.refused(g, err)
		if err != nil && o.Fair || err != nil && kind == "write" {
			w.leftQueue(g, kind+" "+key, op, began)
		}
		if err != nil {
			w.tr.Add("%s %s %s (TTL %v, wait %v): %v", g, kind, key, o.TTL, o.Wait, err)
			time.Sleep(time.Duration(r.IntN(50)) * time.Millisecond)
			continue
		}
		h := w.chk.grant(g, kind, key, lk.Fence(), lk, nil, capacity, began, nil)
		op.mu.Lock()
		op.hold = h
		op.mu.Unlock()
		w.chk.asked(h, o.TTL)
		if o.NoRenew {
			w.chk.fixedLease(h)
		}
		w.work(r, h, o.TTL, li)
		w.letGo(r, h, li, o)
	}
}

// multi takes a set of keys with AcquireAll (every key of it held at
// once, each with its own fence), holds it for a while, checking it
// before each small step, sometimes extends it, and releases it.
func (w *world) multi(r *rand.Rand, g string, li int, o padlock.Options) {
	keys := slices.Clone(w.keys)
	r.Shuffle(len(keys), func(i, j int) { keys[i], keys[j] = keys[j], keys[i] })
	n := len(keys)
	if w.maxSet != 0 {
		n = min(n, w.maxSet)
	}
	keys = keys[:1+r.IntN(n)]
	o.Fair, o.NoRenew = false, false
	if br := w.rng(-800 - int(w.actors.Add(1))); br.IntN(4) == 0 {
		// A long backoff after an attempt that got no answer: Close and
		// the context must still end the wait at once.
		o.Retry = padlock.LinearBackoff(pick(br, 500*time.Millisecond, 2*time.Second))
	}
	l := w.lockers[li]
	ctx, cancel := opCtx(r)
	ctx, op := withOp(ctx)
	began := w.chk.now()
	m, err := l.AcquireAll(ctx, keys, o)
	w.checkCancelled(li, g, fmt.Sprintf("AcquireAll %v", keys), ctx, err)
	w.checkBudget(li, g, fmt.Sprintf("AcquireAll %v", keys), began, o.Wait, err)
	cancel()
	w.checkClosed(li, g, fmt.Sprintf("AcquireAll %v", keys))
	w.refused(g, err)
	if err == nil {
		w.setGranted(m)
	} else {
		w.setFailed(li, g, keys, op, began)
	}
	if err != nil {
		w.tr.Add("%s AcquireAll %v (TTL %v, wait %v): %v", g, keys, o.TTL, o.Wait, err)
		time.Sleep(time.Duration(r.IntN(50)) * time.Millisecond)
		return
	}
	var hs []*hold
	for _, k := range m.Keys() {
		h := w.chk.grantMulti(g, k, m.Fence(k), m, began)
		w.chk.asked(h, o.TTL)
		hs = append(hs, h)
	}
	claim := func() bool {
		for _, h := range hs {
			if !w.chk.claim(h) {
				return false
			}
		}
		return true
	}
	for left := time.Duration(1+r.IntN(2*int(o.TTL/time.Millisecond))) * time.Millisecond; left > 0; {
		step := min(left, 10*time.Millisecond)
		time.Sleep(step)
		left -= step
		if !claim() {
			break
		}
		if w.extendNow(r) {
			d := pick(r, o.TTL/2, o.TTL, 2*o.TTL)
			for _, h := range hs {
				w.chk.extending(h, d)
			}
			ctx, cancel := opCtx(r)
			err := m.Extend(ctx, d)
			cancel()
			w.tr.Add("%s extended %v to %v: %v", g, keys, d, err)
		}
	}
	for _, h := range hs {
		w.chk.releasing(h)
	}
	ctx, cancel = opCtx(r)
	err = m.Release(ctx)
	cancel()
	w.tr.Add("%s released %v: %v", g, keys, err)
	if err == nil {
		for _, h := range hs {
			w.chk.released(h)
		}
	}
}

// checkClosed checks, as an operation of Locker li ends, that it did not
// go on after the Locker was closed: once Close returned, an operation
// may still wait for the replies of commands it sent (the fault layer
// says when the client's last command returned), then ends at once.
func (w *world) checkClosed(li int, g, what string) {
	c := time.Duration(w.closedAt[li].Load())
	if c == 0 {
		return
	}
	now := w.chk.now()
	from := c
	for _, h := range w.lhooks[li] {
		if d := h.LastDone(); !d.IsZero() {
			from = max(from, d.Sub(w.tr.Start()))
		}
	}
	if now-from > closeSlack {
		w.chk.fail(invStuck, now, "%s: %s went on %v after its Locker was closed at %.3fs and its client's last reply at %.3fs", g, what, now-from, c.Seconds(), from.Seconds())
	}
}

// coarseTick is the step in which commands reach the server in a run
// whose TIME repeats (explore.Plan.Align).
const coarseTick = time.Millisecond

// closeSlack is how long an operation of a closed Locker may go on after
// the later of Close's return and its client's last reply: on the
// bubble's clock nothing else takes time.
const closeSlack = time.Millisecond

// work holds h for a while, checking it before each small step of its
// work (every 10ms at most); a lock found lost is watched for renewals
// that must not come.
func (w *world) work(r *rand.Rand, h *hold, ttl time.Duration, li int) {
	edge := r.IntN(2) == 0
	scale := ttl
	if w.fleet {
		scale = w.ttl // holds as long as other runs', under longer leases
	}
	left := time.Duration(1+r.IntN(2*int(scale/time.Millisecond))) * time.Millisecond
	if w.hot {
		left = time.Duration(pick(r, 1, 2, 4)) * time.Millisecond
	}
	// TTL now and then (drawn apart, so that the other runs keep their
	// randomness): Redis answers for the holder's token alone.
	probe := w.rng(-100000 - h.id)
	for left > 0 {
		if h.kind == "mutex" && !w.redlock && probe.IntN(4) == 0 {
			w.askTTL(h)
		}
		step := min(left, 10*time.Millisecond)
		if until := time.Until(h.lk.ValidUntil()); edge && until > 0 && until < left {
			// Check at the very moment the trust runs out, when the
			// watchdog wakes too: which goes first is up to the scheduler.
			step = until
		}
		time.Sleep(step)
		left -= step
		if !w.chk.claim(h) {
			w.watchLost(h, ttl, li)
			return
		}
		switch {
		case (w.fam == "extend" || w.fam == "redlock") && r.IntN(2) == 0:
			// Two lease changes of the holder's own at once, a short
			// and a long one, racing each other and the renewals.
			// Mostly the long one first, so that the short one is the
			// later change, which Redis keeps if it runs.
			ds := []time.Duration{w.lease(pick(r, 2*ttl, 3*ttl)), pick(r, ttl/4, ttl/3, ttl/2)}
			if r.IntN(4) == 0 || w.redlock && r.IntN(3) == 0 {
				// The short one first: on Redlock, its copy reaching a
				// node after the long one must change nothing there.
				ds[0], ds[1] = ds[1], ds[0]
			}
			w.chk.extending(h, ds...)
			var eg sync.WaitGroup
			for i, d := range ds {
				ctx, cancel := opCtx(r)
				eg.Go(func() {
					defer cancel()
					time.Sleep(time.Duration(i) * time.Microsecond)
					err := h.lk.Extend(ctx, d)
					w.tr.Add("%s extended %s#%d to %v: %v", h.g, h.kind, h.id, d, err)
				})
			}
			eg.Wait()
			// Work on under the longer lease: a holder that trusts it
			// while Redis keeps the shorter one is caught by the next.
			left += ds[0] + ds[1]
		case w.extendNow(r):
			// A lease change of the holder's own, maybe shorter, while
			// renewals come and go.
			d := w.lease(pick(r, ttl/3, ttl/2, ttl, 2*ttl))
			w.chk.extending(h, d)
			ctx, cancel := opCtx(r)
			err := h.lk.Extend(ctx, d)
			cancel()
			w.tr.Add("%s extended %s#%d to %v: %v", h.g, h.kind, h.id, d, err)
		}
	}
}

// watchLost checks, for a mutex whose Err says it was lost while the key
// still carries its token, that the key is not kept alive afterwards:
// a lease change already in flight may still land (it was sent before the
// lock was judged lost), but by the time every such change could have
// landed and run out (the longest delay of the fault layer, plus the
// longest lease any of them asked for) the key must be gone, or at least
// no longer pushed out.
func (w *world) watchLost(h *hold, ttl time.Duration, li int) {
	if w.srv == nil || h.kind != "mutex" || !errors.Is(h.lk.Err(), padlock.ErrLockLost) || w.isClosed(li) {
		return
	}
	rk := w.lockers[li].RedisKey(h.key)
	// The latest end of the key under the holder's token, on any node.
	expiry := func() (time.Time, bool) {
		var end time.Time
		for _, s := range w.serversOf(rk) {
			v, err := s.M.Get(rk)
			if err != nil || !strings.Contains(v, h.lk.Token()) {
				continue
			}
			end = latest(end, time.Now().Add(s.M.TTL(rk)))
		}
		return end, !end.IsZero()
	}
	t0 := time.Now()
	e0, ok := expiry()
	if !ok {
		return
	}
	w.tr.Add("%s watches %s#%d: lost, its key expires at %.3fs", h.g, h.kind, h.id, e0.Sub(w.tr.Start()).Seconds())
	// The longest lease a change in flight may set: the lock's own, or
	// one an Extend asked for (the extend family asks for up to 3 leases).
	window := maxInFlight + 2*w.chk.longestLease(h, ttl)
	for end := t0.Add(window); time.Now().Before(end); {
		time.Sleep(10 * time.Millisecond)
		if _, ok := expiry(); !ok {
			return
		}
	}
	if e, ok := expiry(); ok && e.After(e0) && !w.pausedIn(t0.Add(-maxInFlight), time.Now()) && !w.isClosed(li) {
		w.chk.fail(invRenewedLost, t0.Sub(w.tr.Start()), "%s: Err reported lost at %.3fs with the key to expire at %.3fs; %v later the key is still held, to expire at %.3fs",
			h, t0.Sub(w.tr.Start()).Seconds(), e0.Sub(w.tr.Start()).Seconds(), window, e.Sub(w.tr.Start()).Seconds())
	}
}

// maxInFlight bounds how late the fault layer lets a command run after it
// was sent (explore.Plan: stalls up to 750ms, delays up to 1s), pauses
// aside.
const maxInFlight = 2 * time.Second

// letGo ends h: Release, sometimes with a context that ends
// mid-operation, or (mutex families) ReleaseAfter, or (resume) Detach,
// the Ownership resumed by one goroutine or two (a job delivered twice).
// Now and then its holder calls Extend at once (it may pass its check
// before the release and send after it), or after: a released handle
// changes nothing.
func (w *world) letGo(r *rand.Rand, h *hold, li int, o padlock.Options) {
	ctx, cancel := opCtx(r)
	defer cancel()
	from := w.chk.now()
	w.chk.releasing(h)
	var racing sync.WaitGroup
	defer racing.Wait()
	raced := r.IntN(5) == 0
	if raced {
		d := w.lease(pick(r, o.TTL/2, 2*o.TTL))
		w.chk.extending(h, d)
		ectx, ecancel := opCtx(r)
		racing.Go(func() {
			defer ecancel()
			err := h.lk.Extend(ectx, d)
			w.tr.Add("%s extended %s#%d to %v as it let go: %v", h.g, h.kind, h.id, d, err)
		})
	}
	defer func() {
		if r.IntN(4) != 0 {
			return
		}
		racing.Wait()
		d := w.lease(pick(r, o.TTL/2, 2*o.TTL))
		if err := h.lk.Extend(ctx, d); err == nil {
			w.chk.fail(invReleasedHandle, w.chk.now(), "%s: Extend(%v) of the handle let go returned nil", h, d)
		}
	}()
	if w.fam == "resume" && h.kind == "mutex" && r.IntN(2) == 0 {
		own, err := h.lk.Detach()
		w.tr.Add("%s detached %s#%d: %v", h.g, h.kind, h.id, err)
		if err != nil {
			return
		}
		w.chk.released(h)
		for range 1 + r.IntN(3)/2 {
			a := int(w.actors.Add(1))
			lj, wait := r.IntN(len(w.lockers)), time.Duration(r.IntN(int(o.TTL/2)))
			w.wg.Go(func() { w.resumer(a, lj, own, h, wait) })
		}
		if lr := w.rng(-700 - h.id); lr.IntN(3) == 0 {
			// A job delivered again long after: the lease has run out,
			// or another delivery took the lock over and let it go.
			a := int(w.actors.Add(1))
			lj := lr.IntN(len(w.lockers))
			wait := maxInFlight + w.chk.longestLease(h, o.TTL) + time.Duration(lr.IntN(int(o.TTL)))
			w.wg.Go(func() { w.resumer(a, lj, own, h, wait) })
		}
		return
	}
	if (w.fam == "keep" || (w.fam == "fair" || w.fam == "cluster" || w.redlock) && r.IntN(4) == 0) && h.lk.Err() == nil {
		d := w.lease(pick(r, 200*time.Millisecond, time.Second, 3*time.Second))
		err := h.lk.ReleaseAfter(ctx, d)
		w.tr.Add("%s ReleaseAfter(%v) %s#%d: %v", h.g, d, h.kind, h.id, err)
		if err == nil {
			w.chk.releasedAfter(h, from, d)
		}
		return
	}
	if lr := w.rng(-600 - h.id); o.NoRenew && h.lk.Err() != nil && lr.IntN(2) == 0 {
		// A holder that comes back late to let go of a fixed lease it
		// lost: by now the lease has run out in Redis too.
		time.Sleep(time.Until(w.tr.Start().Add(h.start + o.TTL + time.Duration(1+lr.IntN(20))*time.Millisecond)))
	}
	valid, held := h.lk.ValidUntil(), h.lk.Err() == nil
	calledAt := w.chk.now()
	err := h.lk.Release(ctx)
	w.tr.Add("%s released %s#%d: %v", h.g, h.kind, h.id, err)
	if err == nil {
		w.chk.released(h)
		w.chk.releasedTruthfully(h, calledAt, o.TTL)
	}
	// A release that returned before the lock's trust ran out ran every
	// copy of its commands while the token held the lock (the lease in
	// Redis outlasts the trust; only copies whose reply was lost run
	// later, and those end in an error): it must not report that it
	// found the lock gone. (Not when an Extend raced it: a shorter one
	// lowers the trust after it was read.)
	// On Redlock, a restart dropped the lock from a node, and renewals
	// reach only the others: a second restart, up to a max lease later,
	// leaves too few nodes holding it.
	now := w.chk.now()
	window := from - maxInFlight
	if w.redlock {
		window -= exploreMaxLease
	}
	if errors.Is(err, padlock.ErrNotHeld) && held && !raced && time.Now().Before(valid) && !w.restartIn(window, now) {
		w.chk.fail(invReleaseNotHeld, now, "%s: Release called at %.3fs, trusted until %.3fs, returned %v", h, from.Seconds(), valid.Sub(w.tr.Start()).Seconds(), err)
	}
}

// resumer resumes own, which h's holder detached, on Locker li after
// wait, then holds it and lets it go as any holder does.
func (w *world) resumer(actor, li int, own padlock.Ownership, h *hold, wait time.Duration) {
	r := w.rng(actor)
	g := fmt.Sprintf("r%d@L%d", actor, li)
	time.Sleep(wait)
	if w.isClosed(li) || !time.Now().Before(w.end) {
		return
	}
	o := padlock.Options{TTL: pick(r, w.ttl, w.ttl, 300*time.Millisecond, 2*time.Second), NoRenew: r.IntN(8) == 0}
	ctx, cancel := opCtx(r)
	began := w.chk.now()
	lk, err := w.lockers[li].Resume(ctx, own, o)
	w.checkCancelled(li, g, "Resume of "+h.String(), ctx, err)
	cancel()
	w.checkClosed(li, g, "Resume of "+h.String())
	w.tr.Add("%s resumed %s: %v", g, h, err)
	w.refused(g, err)
	if err != nil {
		return
	}
	rh := w.chk.grant(g, "mutex", h.key, lk.Fence(), lk, nil, 1, began, h)
	w.chk.asked(rh, o.TTL)
	w.resumed(h, rh, began)
	w.work(r, rh, o.TTL, li)
	w.letGo(r, rh, li, o)
}

// candidate campaigns in the run's election, leads for a while,
// proclaims new values (sometimes while resigning) and resigns
// (sometimes twice at once).
func (w *world) candidate(actor, li int) {
	r := w.rng(actor)
	g := fmt.Sprintf("c%d@L%d", actor, li)
	l := w.lockers[li]
	ttl := pick(r, w.ttl, w.ttl, w.ttl, 2*time.Second)
	e := l.Election("el", padlock.Options{TTL: ttl})
	for n := 0; time.Now().Before(w.end) && !w.isClosed(li); n++ {
		value := fmt.Sprintf("%s.%d", g, n)
		ctx, cancel := context.WithTimeout(context.Background(), time.Duration(100+r.IntN(6000))*time.Millisecond)
		began := w.chk.now()
		// The value is published inside Campaign: the checker learns whose
		// it is from the term.
		pending := &hold{fence: -1, kind: "term", key: "el", g: g, released: -1, resigned: -1, ended: -1}
		w.chk.publish(value, pending)
		ctx, op := withOp(ctx)
		tm, err := e.Campaign(ctx, value)
		if err == nil {
			w.recorded(g, "Campaign", op)
		}
		w.checkCancelled(li, g, "Campaign", ctx, err)
		cancel()
		w.checkClosed(li, g, "Campaign")
		if err != nil {
			w.tr.Add("%s campaign: %v", g, err)
			time.Sleep(time.Duration(r.IntN(50)) * time.Millisecond)
			continue
		}
		h := w.chk.grant(g, "term", "el", tm.Fence(), nil, tm, 1, began, nil)
		w.chk.publish(value, h)
		w.publishing(h, value)
		var side sync.WaitGroup
		steps := 1 + r.IntN(4)
		for i := range steps {
			time.Sleep(time.Duration(1+r.IntN(int(ttl/time.Millisecond)/2)) * time.Millisecond)
			if !w.chk.claim(h) {
				break
			}
			if r.IntN(2) == 0 {
				v := fmt.Sprintf("%s.%d.%d", g, n, i)
				w.chk.publish(v, h)
				w.publishing(h, v)
				side.Go(func() {
					ctx, op := withOp(context.Background())
					called := w.chk.now()
					err := tm.Proclaim(ctx, v)
					w.tr.Add("%s proclaimed %q: %v", g, v, err)
					if err == nil {
						w.recorded(g, "Proclaim", op)
						w.proclaimed(h, v, called)
					}
				})
			}
		}
		resign := func(ctx context.Context, cancel context.CancelFunc) {
			defer cancel()
			err := tm.Resign(ctx)
			w.tr.Add("%s resigned term#%d: %v", g, h.id, err)
			w.chk.resigned(h, err)
		}
		if r.IntN(4) == 0 {
			ctx, cancel := opCtx(r)
			side.Go(func() { resign(ctx, cancel) })
		}
		resign(opCtx(r))
		side.Wait()
	}
}

// observer reads the election's leader, and watches Observe, until the
// run ends.
func (w *world) observer(actor, li int) {
	g := fmt.Sprintf("o%d@L%d", actor, li)
	l := w.lockers[li]
	e := l.Election("el", padlock.Options{})
	ctx, cancel := context.WithDeadline(context.Background(), w.end)
	defer cancel()
	// Observe reads through a client without faults: while its reader
	// sleeps in a faulted Leader, notices fill its PubSub's channel, and
	// miniredis blocks in PUBLISH holding its lock, which on the bubble's
	// clock never lets the sleep end (real Redis buffers its output).
	var late sync.WaitGroup
	oc, closeOC := w.quietClient(100, "obs", &late)
	ol := padlock.NewUnchecked(oc) // without ContextTimeoutEnabled, as quietClient makes it
	defer func() { _ = ol.Close(); closeOC() }()
	var wg sync.WaitGroup
	wg.Go(func() {
		var last padlock.Leader
		for ld := range ol.Election("el", padlock.Options{}).Observe(ctx) {
			w.reported(ld)
			w.tr.Add("%s observed %q fence %d", g, ld.Value, ld.Fence)
			if ld.Fence < last.Fence {
				w.chk.fail(invLeaderFence, w.chk.now(), "%s: Observe sent %q fence %d after %q fence %d", g, ld.Value, ld.Fence, last.Value, last.Fence)
			}
			last = ld
		}
	})
	for time.Now().Before(w.end) && !w.isClosed(li) {
		from := w.chk.now()
		ld, err := e.Leader(ctx)
		s := leaderSeen{g: g, from: from, to: w.chk.now(), ld: ld}
		switch {
		case errors.Is(err, padlock.ErrNoLeader):
			s.none = true
			w.chk.leader(s)
		case err == nil:
			w.tr.Add("%s leader %q fence %d", g, ld.Value, ld.Fence)
			w.chk.leader(s)
		}
		time.Sleep(20 * time.Millisecond)
	}
	wg.Wait()
}

// watchQueues checks, every few milliseconds until the run ends, that
// no fair queue holds one waiter's place twice: a place queued twice
// stays behind when its waiter is served, and holds the key for a
// waiter that is gone.
func (w *world) watchQueues() {
	// Through a client of its own to each server (on a Cluster, each
	// queue is on the master of its key's slot), without faults
	// (miniredis hands out its lists themselves, not copies).
	var cs []*redis.Client
	for _, s := range w.srvs {
		c := redis.NewClient(&redis.Options{Addr: s.Addr, Dialer: s.Dial, DisableIdentity: true, Protocol: 2})
		defer c.Close()
		cs = append(cs, c)
	}
	ctx := context.Background()
	seen := map[string]bool{}
	for time.Now().Before(w.end) {
		time.Sleep(5 * time.Millisecond)
		for i, c := range cs {
			w.checkQueues(ctx, w.srvs[i].Name, c, seen)
		}
	}
}

// checkQueues checks the fair queues of the server c reaches.
func (w *world) checkQueues(ctx context.Context, srv string, c *redis.Client, seen map[string]bool) {
	keys, _ := c.Keys(ctx, "*:queue").Result()
	w.queuesGone(srv, keys)
	for _, k := range keys {
		entries, err := c.LRange(ctx, k, 0, -1).Result()
		if err != nil {
			continue
		}
		w.snapshotQueue(srv, k, entries)
		if w.fam == "semfair" && strings.HasSuffix(k, ":sem:queue") {
			w.snapshotSem(ctx, c, srv, k, semPermits)
		}
		n := map[string]int{}
		for _, e := range entries {
			n[queuedPlace(e)]++
		}
		for place, cnt := range n {
			if cnt > 1 && !seen[k+place] {
				seen[k+place] = true
				w.chk.fail(invQueuedTwice, w.chk.now(), "queue %q holds place %q %d times: %v", k, place, cnt, entries)
			}
		}
	}
}

// checkKeys finds keys left without expiry once every lease ran out,
// other than the fence counters (bounded by the hash slots) and the
// election records (one per election name).
func (w *world) checkKeys() {
	for _, s := range w.srvs {
		for _, k := range s.Keys() {
			if s.M.TTL(k) == 0 && !strings.Contains(k, "fence") && !strings.HasSuffix(k, ":leader") {
				w.chk.fail(invKeyLeak, w.chk.now(), "key %q (%s) on %s left without expiry", k, s.M.Type(k), s.Name)
			}
		}
	}
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
