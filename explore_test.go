package padlock_test

import (
	"fmt"
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
// mid-operation and close a Locker mid-operation (explore_world_test.go;
// the actors are in explore_work_test.go). The checker
// (explore_check_test.go) then checks each primitive's invariants. See
// "The explorer" in RELIABILITY.md.
//
//	PADLOCK_EXPLORE_SEEDS=N   how many seeds (default exploreSeeds; CI runs ciExploreSeeds)
//	PADLOCK_EXPLORE_FIRST=n   the first seed (default 1)
//	PADLOCK_EXPLORE_SEED=n    one seed, with its whole trace on failure (a fleet seed too: fleetSeedBase and up)
//	PADLOCK_EXPLORE_REPLAY=k  run each seed k times, and report how often it failed
//	PADLOCK_EXPLORE_FAMILY=f  only scenarios of family f (mutex, fair, rw, election, sem, semfair, keep, extend, resume, multi, redlock, schedule)
//	PADLOCK_EXPLORE_DEPLOYMENT=d  only runs on deployment d: single (one node), cluster (a Redis
//	                          Cluster in memory: one seed in three of every family but redlock), redlock
//	PADLOCK_EXPLORE_STOP=1    stop at the first failing seed
//	PADLOCK_EXPLORE_IGNORE=a,b  do not report invariants a and b (to look past a known break)
//	PADLOCK_EXPLORE_COMMANDS=1  trace every command the Lockers send, with its reply

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

// Fleet seeds: every seed from fleetSeedBase is a fleet run (mutex or
// fair: fleetFamilies, by seed), whatever its draws; TestExplore runs one
// after every fleetEvery-th seed below the base (after seed s, the fleet
// seed fleetSeedBase+s/fleetEvery), so a budget of N seeds holds N/2 of
// them beside the plain seeds' own fleets (one mutex run in three, one
// fair run in three), which are too few to meet the rarer ways a key may
// stall: a late copy that replaces a bid, a line's bids left behind.
// Fleet runs are cheap: their operations wait on the virtual clock.
const (
	fleetSeedBase = 1 << 20
	fleetEvery    = 2
)

var fleetFamilies = []string{"mutex", "fair", "mutex"}

// seedFamily returns seed's family, and whether it is a fleet seed.
func seedFamily(seed uint64) (fam string, fleet bool) {
	if seed >= fleetSeedBase {
		return fleetFamilies[seed%uint64(len(fleetFamilies))], true
	}
	return families[seed%uint64(len(families))], false
}

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
	// The seeds to run: each of the n from first, and after every
	// fleetEvery-th of them a fleet seed (fleetSeed).
	var seeds []uint64
	for i := 0; i < n; i++ {
		seed := uint64(first + i)
		seeds = append(seeds, seed)
		if seed < fleetSeedBase && seed%fleetEvery == 0 && !verbose {
			seeds = append(seeds, fleetSeedBase+seed/fleetEvery)
		}
	}
	for _, seed := range seeds {
		fam, _ := seedFamily(seed)
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

func exploreSeed(t *testing.T, seed uint64, fam string) ([]violation, *explore.Trace) {
	tr := explore.NewTrace()
	w := &world{t: t, seed: seed, fam: fam, tr: tr, tokens: newTokenSends(), copies: newCopiesSeen(), sets: newSets(), order: newOrderSeen()}
	_, fleetSeed := seedFamily(seed)
	w.fleetSeed = fleetSeed
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
	if sr := w.rng(-820); fam == "mutex" && sr.IntN(3) == 0 && !fleetSeed {
		w.plan.Rate, w.plan.ConnRate, w.noticesStarved = 0, 0, true
	}
	// Drawn apart: half the other mutex runs on one node or the Cluster
	// are a fleet, and a fair run in three.
	if fr := w.rng(-840); (fam == "mutex" && fr.IntN(2) == 0 || fam == "fair" && fr.IntN(3) == 0 || fleetSeed) && !w.redlock && !w.noticesStarved {
		w.plan.Rate, w.plan.ConnRate, w.fleet = 0, 0, true
		// AcquireAlls among its waiters: in every mutex fleet, and in
		// one fair fleet in two, which then mixes the modes.
		w.fleetSets = fam == "mutex" || w.rng(-845).IntN(2) == 0
		// Command faults in one fleet in two (three in four of the
		// fleet seeds'): a fault stalls the key only as long as it
		// lasts (explore_fleetfault_test.go).
		if fr := w.rng(-850); fr.IntN(2) == 0 || fleetSeed && fr.IntN(2) == 0 {
			w.plan.Rate, w.plan.RefuseRate, w.fleetFaults = fleetFaultRate, fleetRefuseRate, true
		}
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
			c, h := explore.NewClient(i, fmt.Sprintf("L%d", i), w.srv, w.planOf(i), tr, &w.late)
			if i == w.doomed {
				c.AddHook(killer{&w.dead})
				h.Gone = w.dead.Load
			}
			w.watchTokens(h)
			w.watchFaults(h, i)
			w.lateCopies(h, i)
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
	w.closedAt, w.closingAt = make([]atomic.Int64, nLockers), make([]atomic.Int64, nLockers)
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
	if w.fleet {
		// Fleet runs are few (one mutex run in six, one fair run in
		// three) and cheap on the virtual clock: longer ones meet more give-ups, kills and
		// grants at release (the idle and claimed invariants).
		run *= 4
	}
	w.end = time.Now().Add(run)
	tr.Add("seed %d: %s, %d Lockers, keys %v, fault rate %.2f, connection fault rate %.2f, late watchdogs %v, drift %v+%v, %v of operations, hot keys %v, commands in steps of %v, notices starved %v, fleet %v", seed, fam, nLockers, w.keys, w.plan.Rate, w.plan.ConnRate, lateWatchdog, drift, fixed, run, w.hot, w.plan.Align, w.noticesStarved, w.fleet)
	if w.fleet {
		tr.Add("fleet: leases of %v, L%d killed at %.0f%% of the run (-1: none), grant notices lost %v, AcquireAlls among the waiters %v, command faults %v, L%d impatient (-1: none), its commands faultless %v, quitting at %.0f%% of the run (0: never)", w.fleetTTL, w.doomed, 100*w.killShare, w.grantsLost, w.fleetSets, w.fleetFaults, w.impatient, w.impatientHonest, 100*w.quitShare)
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
			w.closingAt[i].Store(int64(w.chk.now()))
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
	wg.Go(w.watchBids)
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
		if w.redlock {
			// Every operation goes to every node: fewer goroutines keep
			// a seed's cost near the others'.
			ng = nLockers * (2 + r.IntN(2))
		}
		lockerOf := func(i int) int { return i % nLockers }
		if w.fleet {
			// Lines of one to four waiters, drawn apart per Locker: the
			// last to leave a line withdraws what it holds (the claimed
			// invariant), and a Locker alone in line bids for itself.
			var of []int
			for li := range nLockers {
				n := 1 + w.rng(-870-li).IntN(4)
				if li == w.impatient {
					// Two at least: its give-ups leave bids passed to
					// the line (impatientBeat).
					n = max(n, 2)
				}
				for range n {
					of = append(of, li)
				}
			}
			ng, lockerOf = len(of), func(i int) int { return of[i] }
		}
		for i := range ng {
			li := lockerOf(i)
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
