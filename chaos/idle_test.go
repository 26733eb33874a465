//go:build chaos

package chaos_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/padlockgo/padlock/chaos/internal/record"
)

// The key's idle time after a fault, on real processes: "nobody holds for
// nobody". A fleet of worker processes contends for one key with the
// default options (TTL 30s, Wait 5×TTL); the test kills waiters while they
// wait, or holders while they hold, with SIGKILL, starts a replacement for
// each so the fleet stays whole, and measures from the workers' records how
// long the key then sat free of any live holder while a live waiter waited.
//
// A killed waiter leaves a bid (or, fair, a queue entry with a bid) that a
// release may grant: the grant holds the key for the claim window (500ms)
// unless claimed, and a bid 2s old is no longer granted. So a killed waiter
// may cost the next live waiter the claim window and its look again (the
// waiters of other Lockers are told when the grant ends; they look again
// at the latest after the 1s recheck), never a lease. A killed holder
// costs its remaining lease, as with every lease-based lock, and no more
// than a look again after it.

// Bounds the test asserts, from the package's documented numbers (claim
// window 500ms, notice recheck 1s, bid life 2s) with room for a loaded
// machine: a grant that held the key for a lease (30s) breaks them by far.
const (
	// idleAfterWaiter bounds every stretch the key sits free of a live
	// holder while a live waiter waits, in runs that kill waiters.
	idleAfterWaiter = 2 * time.Second
	// idleAfterLease bounds how long after a killed holder's lease ends
	// a live waiter holds the key.
	idleAfterLease = time.Second
	// faultReach is how long after a waiter's kill its bid can still be
	// granted (bid life, 2s), and the grant hold the key (claim window,
	// 500ms): the idle stretches that start then are the fault's.
	faultReach = 2500 * time.Millisecond
	// claimHit is the idle time above which a stretch is counted as a
	// grant to the killed waiter running out: a grant a live waiter
	// claims, or a free key it takes, takes it milliseconds.
	claimHit = 250 * time.Millisecond
)

// idleKind is one kind of fault whose cost in idle time is measured.
type idleKind struct {
	name, about string
	fair        bool
	ttl         time.Duration
	hold        time.Duration
	faults      int  // per run
	holders     bool // kill holders, not waiters
}

// idleKinds returns the kinds measured. PADLOCK_CHAOS_HOLDER_TTL sets the
// killed holders' TTL (default 3s; the library's default, 30s, makes each
// of those faults cost the run 20 to 30s).
func idleKinds(t *testing.T) []idleKind {
	holderTTL := 3 * time.Second
	if v := os.Getenv("PADLOCK_CHAOS_HOLDER_TTL"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d < time.Second {
			t.Fatalf("PADLOCK_CHAOS_HOLDER_TTL=%q: want a duration of 1s or more", v)
		}
		holderTTL = d
	}
	return []idleKind{
		{name: "killed-waiter", about: "waiter SIGKILLed while it waits, default mode, TTL 30s",
			ttl: 30 * time.Second, hold: 200 * time.Millisecond, faults: 6},
		{name: "killed-waiter-fair", about: "waiter SIGKILLed while it waits, Fair, TTL 30s", fair: true,
			ttl: 30 * time.Second, hold: 200 * time.Millisecond, faults: 6},
		// A shorter TTL than the default: each fault costs the run the
		// holder's whole remaining lease.
		{name: "killed-holder", about: fmt.Sprintf("holder SIGKILLed while it holds, default mode, TTL %v", holderTTL),
			ttl: holderTTL, hold: time.Second, faults: 3, holders: true},
	}
}

// idleFleet is the number of worker processes that contend for the key.
const idleFleet = 4

// idleSample is one fault's cost: how long the key sat idle after it.
type idleSample struct {
	idle time.Duration
	// lease: a killed holder's remaining lease at its kill, after which
	// idle is counted.
	lease time.Duration
}

// TestIdle measures the key's idle time per fault, PADLOCK_CHAOS_RUNS
// runs of each kind, and fails when it breaks the bounds above.
func TestIdle(t *testing.T) {
	n := runs(t)
	var table strings.Builder
	table.WriteString("| Fault | Runs | Faults | Claim window ran out | p50 | p99 | max | Bound asserted |\n")
	table.WriteString("|---|---:|---:|---:|---:|---:|---:|---|\n")
	for _, k := range idleKinds(t) {
		var all []idleSample
		t.Run(k.name, func(t *testing.T) {
			for i := range n {
				t.Run(fmt.Sprintf("run%d", i+1), func(t *testing.T) { all = append(all, runIdle(t, k)...) })
			}
		})
		if len(all) == 0 {
			continue
		}
		idle := make([]time.Duration, len(all))
		hits := 0
		for i, s := range all {
			idle[i] = s.idle
			if s.idle > claimHit {
				hits++
			}
		}
		slices.Sort(idle)
		bound := fmt.Sprintf("every idle stretch ≤ %v", idleAfterWaiter)
		ran := fmt.Sprintf("%d", hits)
		if k.holders {
			bound = fmt.Sprintf("≤ %v after the lease ends", idleAfterLease)
			ran = "n/a"
		}
		fmt.Fprintf(&table, "| %s: %s | %d | %d | %s | %s | %s | %s | %s |\n", k.name, k.about, n, len(all), ran,
			ms(percentile(idle, 50)), ms(percentile(idle, 99)), ms(idle[len(idle)-1]), bound)
	}
	t.Logf("the key's idle time per fault (%d run(s) per kind, %d worker processes):\n%s", n, idleFleet, table.String())
	if path := os.Getenv("PADLOCK_CHAOS_IDLE_REPORT"); path != "" {
		head := fmt.Sprintf("Measured %s, %d run(s) per kind:\n\n", time.Now().UTC().Format("2006-01-02"), n)
		if err := os.WriteFile(path, []byte(head+table.String()), 0o644); err != nil {
			t.Errorf("writing %s: %v", path, err)
		}
	}
}

// runIdle runs one fleet, injects k.faults faults of kind k, and returns
// each fault's idle time.
func runIdle(t *testing.T, k idleKind) []idleSample {
	sc := scenario{name: k.name, mode: "single", workers: idleFleet, ttl: k.ttl, hold: k.hold, fair: k.fair}
	e := newEnv(t, sc)
	for range sc.workers {
		e.start()
	}
	if id := e.awaitHolder(0, 30*time.Second); id == 0 {
		t.Fatalf("no worker took the lock within 30s; worker 1 says: %s", e.logTail(1))
	}
	var kills []int64
	var leases []lease
	if k.holders {
		leases = killHolders(e, k.faults)
	} else {
		kills = killWaiters(e, k.faults)
	}
	time.Sleep(time.Second)
	e.stop(3*sc.ttl + 10*time.Second)

	evs := e.events()
	e.mu.Lock()
	died := e.died
	e.mu.Unlock()
	secs := record.Sections(evs, died)
	for _, ov := range record.Overlaps(secs) {
		t.Errorf("PROMISE BROKEN, overlapping critical sections (%v): %s and %s", time.Duration(ov.Nanos), describe(ov.A), describe(ov.B))
	}
	for _, ev := range evs {
		// Only an Acquire that waited its whole Wait (5×TTL): a long run's
		// workers end theirs at their -duration.
		if ranOut(ev) && time.Duration(ev.T-ev.T0) >= 5*sc.ttl {
			t.Errorf("PROMISE BROKEN, worker %d: Acquire waited %v and gave up: %s", ev.Worker, time.Duration(ev.T-ev.T0).Round(time.Millisecond), ev.Err)
		}
	}
	gaps := idleGaps(evs, secs)
	var out []idleSample
	if k.holders {
		out = holderIdle(t, gaps, leases)
	} else {
		out = waiterIdle(t, gaps, kills)
	}
	if t.Failed() {
		for id := 1; id < e.nextID; id++ {
			t.Logf("worker %d log: %s", id, e.logTail(id))
		}
	}
	return out
}

// gap is a stretch in which the key was free of any live holder while a
// live waiter waited: from the end of a critical section (the holder's
// Release call, or its death) to the next Acquire's return.
type gap struct{ from, to int64 }

func (g gap) d() time.Duration { return time.Duration(g.to - g.from) }

// idleGaps returns the gaps between the critical sections secs, sorted by
// start, that a waiter waited through: an Acquire called before the gap
// and returned after its start (a killed waiter's never returned, so is not
// in the record).
func idleGaps(evs []record.Event, secs []record.Section) []gap {
	type span struct{ from, to int64 }
	var waits []span
	for _, ev := range evs {
		if ev.Kind == record.Acquire || ev.Kind == record.AcquireFailed {
			waits = append(waits, span{ev.T0, ev.T})
		}
	}
	var out []gap
	end := int64(0) // the end of the union of the sections so far
	for i, s := range secs {
		if i > 0 && s.Start > end && slices.ContainsFunc(waits, func(w span) bool { return w.from <= end && w.to >= end }) {
			out = append(out, gap{end, s.Start})
		}
		end = max(end, s.End)
	}
	return out
}

// killWaiters kills n waiters, one at a time at random moments while they
// wait, starting a new worker for each, and returns when it killed them.
// The next kill waits until this one is spent: its grant ran out (an idle
// stretch over claimHit began after it), or its bid grew too old to be
// granted (faultReach), so that each fault's idle time is its own.
func killWaiters(e *env, n int) []int64 {
	var kills []int64
	for len(kills) < n {
		time.Sleep(time.Duration(rand.Int64N(int64(500 * time.Millisecond))))
		id := e.pickWaiter(50 * time.Millisecond)
		if id == 0 {
			continue
		}
		e.kill(id)
		kill := record.Now()
		kills = append(kills, kill)
		e.start()
		for deadline := kill + int64(faultReach); record.Now() < deadline; time.Sleep(20 * time.Millisecond) {
			evs := e.events()
			if slices.ContainsFunc(idleGaps(evs, record.Sections(evs, nil)), func(g gap) bool {
				return g.from >= kill && g.d() > claimHit
			}) {
				break
			}
		}
	}
	return kills
}

// pickWaiter returns a random live worker that has been waiting in
// Acquire for at least since (its last event a Release that returned
// that long ago, the next Acquire under way: its first attempt, which
// bids, is sent), or 0 if none.
func (e *env) pickWaiter(since time.Duration) int {
	last := map[int]record.Event{}
	for _, ev := range e.events() {
		last[ev.Worker] = ev
	}
	now := record.Now()
	var ids []int
	for id, ev := range last {
		if ev.Kind == record.Released && now-ev.T >= int64(since) && e.alive(id) {
			ids = append(ids, id)
		}
	}
	if len(ids) == 0 {
		return 0
	}
	return ids[rand.IntN(len(ids))]
}

// lease is a killed holder's lease in Redis: its kill, and when the lease
// ended (from the key's PTTL read just after the kill).
type lease struct{ kill, end int64 }

// killHolders kills n holders inside their critical sections, starting a
// new worker for each, and returns their leases. A kill that finds the
// worker just out of its section is not counted.
func killHolders(e *env, n int) []lease {
	rdb := e.servers[0].Client(e.t)
	ctx := context.Background()
	var out []lease
	for attempt := 0; len(out) < n; attempt++ {
		if attempt > 5*n {
			e.t.Fatalf("killed %d holders in %d attempts", len(out), attempt)
		}
		id := e.awaitHolder(record.Now(), 20*time.Second)
		if id == 0 {
			e.t.Fatalf("no lock holder to kill")
		}
		time.Sleep(time.Duration(rand.Int64N(int64(e.sc.hold / 2))))
		e.kill(id)
		kill := record.Now()
		pttl, err := rdb.PTTL(ctx, lockKey).Result()
		read := record.Now()
		e.start()
		if !e.stillHolding(id, kill) || err != nil || pttl <= 0 {
			time.Sleep(time.Second) // it had let go: not a holder's kill
			continue
		}
		out = append(out, lease{kill: kill, end: read + int64(pttl)})
		// The next holder, once the lease ends.
		if e.awaitHolder(kill, pttl+10*time.Second) == 0 {
			e.t.Fatalf("nobody took the key within %v of the killed holder's lease end", 10*time.Second)
		}
		time.Sleep(time.Duration(rand.Int64N(int64(time.Second))))
	}
	return out
}

// waiterIdle returns each kill's idle time: the longest gap that starts
// within faultReach of it and before the next kill (0 when none did), and fails the test for every
// gap in the run longer than idleAfterWaiter.
func waiterIdle(t *testing.T, gaps []gap, kills []int64) []idleSample {
	for _, g := range gaps {
		if g.d() > idleAfterWaiter {
			after := "before any kill"
			if i := slices.IndexFunc(kills, func(k int64) bool { return k > g.from }); i != 0 && len(kills) > 0 {
				if i < 0 {
					i = len(kills)
				}
				after = fmt.Sprintf("%v after the last waiter's kill", time.Duration(g.from-kills[i-1]).Round(time.Millisecond))
			}
			t.Errorf("PROMISE BROKEN, the key sat free of any live holder for %v while a live waiter waited, want ≤ %v (from %s)",
				g.d().Round(time.Millisecond), idleAfterWaiter, after)
		}
	}
	out := make([]idleSample, len(kills))
	for i, k := range kills {
		until := k + int64(faultReach)
		if i+1 < len(kills) {
			until = min(until, kills[i+1])
		}
		for _, g := range gaps {
			if g.from >= k && g.from < until {
				out[i].idle = max(out[i].idle, g.d())
			}
		}
	}
	longest := slices.MaxFunc(out, func(a, b idleSample) int { return int(a.idle - b.idle) })
	t.Logf("%d waiters killed; %d idle stretches in the run; the longest after a kill: %v; idle per kill: %v",
		len(kills), len(gaps), longest.idle.Round(time.Millisecond), durations(out))
	return out
}

// holderIdle returns each killed holder's idle time: from its lease's end
// to the next live holder's Acquire, and fails the test for any over
// idleAfterLease.
func holderIdle(t *testing.T, gaps []gap, leases []lease) []idleSample {
	out := make([]idleSample, 0, len(leases))
	for _, l := range leases {
		i := slices.IndexFunc(gaps, func(g gap) bool { return g.from == l.kill || (g.from <= l.kill && g.to > l.kill) })
		if i < 0 {
			t.Errorf("no idle stretch after the holder killed at %d: no waiter waited through its lease", l.kill)
			continue
		}
		next := gaps[i].to
		s := idleSample{idle: max(0, time.Duration(next-l.end)), lease: time.Duration(l.end - l.kill)}
		out = append(out, s)
		if s.idle > idleAfterLease {
			t.Errorf("PROMISE BROKEN, a live waiter held the key %v after the killed holder's lease ended (%v after the kill), want ≤ %v",
				s.idle.Round(time.Millisecond), time.Duration(next-l.kill).Round(time.Millisecond), idleAfterLease)
		}
	}
	left := make([]time.Duration, len(out))
	for i, s := range out {
		left[i] = s.lease.Round(time.Millisecond)
	}
	t.Logf("%d holders killed; the lease left at each kill: %v; idle after each lease: %v", len(leases), left, durations(out))
	return out
}

func durations(s []idleSample) []time.Duration {
	out := make([]time.Duration, len(s))
	for i, v := range s {
		out[i] = v.idle.Round(time.Millisecond)
	}
	return out
}

// percentile returns the p-th percentile of sorted (nearest rank).
func percentile(sorted []time.Duration, p int) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := (p*len(sorted)+99)/100 - 1
	return sorted[max(0, min(i, len(sorted)-1))]
}

func ms(d time.Duration) string {
	return fmt.Sprintf("%d ms", d.Round(time.Millisecond).Milliseconds())
}
