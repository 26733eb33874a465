//go:build chaos

package chaos_test

import (
	"cmp"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/padlockgo/padlock/chaos/internal/fenced"
	"github.com/padlockgo/padlock/chaos/internal/record"
)

// scenario is one way of trying to break the lock, and what the design
// says must survive it.
type scenario struct {
	name  string
	about string // the fault, for the table
	claim string // what is claimed, for the table

	mode       string // single, redlock or sentinel
	workers    int    // processes
	goroutines int    // workers per process, sharing its Locker (0: 1)
	ttl, hold  time.Duration
	unchecked  bool // workers write without checking the lock's context
	spin       int  // CPU-burning goroutines per worker, under GOMAXPROCS=1
	replicaAck int  // WithReplicaAck replicas (sentinel)
	proxy      bool // each process reaches Redis through its own fault proxy (single)
	fair       bool // Options.Fair
	// redisRetries is go-redis's MaxRetries (single mode; 0: -1, each
	// command sent once). Retries resend a command whose reply was lost.
	redisRetries int
	extends      string        // -extend: TTLs the holder Extends to, two at once, all along
	wait         time.Duration // Acquire's Wait (0: 5×TTL)
	starved      bool          // the whole run is a starved-runtime window
	// slowMaster: the last key's Cluster master is slowed; no lock on
	// another key may be reported lost.
	slowMaster bool
	// primitive is what the workers take: "" or "lock", "multi"
	// (AcquireAll on the keys, each worker listing them in its own order),
	// "election" (a term is the critical section), "semaphore" (of
	// permits per key) or "rwlock" (reads percent readers). For the last
	// two, "overlap" means more holders than the primitive admits
	// (holds.go).
	primitive      string
	permits, reads int

	fault  func(e *env) // injects the faults, on the test goroutine
	settle time.Duration

	exclusion    bool // zero overlapping critical sections
	fenced       bool // zero stale writes accepted, zero fence regressions
	wantLost     bool // every fault that hit a holder fired its lock-lost signal
	wantRejected bool // the fence turned away stale writes
	// closeWithin: an Acquire under way when its Locker is closed returns
	// within this (0: not checked).
	closeWithin time.Duration
	// noRunOut: no Acquire gives up because its whole Wait ran out, and
	// the key never sits unheld for over TTL+1s while an Acquire waits
	// through the whole gap: a waiter gets a free key.
	noRunOut bool
	// awaits names the engine fix a scenario needs to pass: until it is
	// merged the scenario fails, and says so.
	awaits string
}

// outcome is what one or more runs of a scenario counted.
type outcome struct {
	runs, faults, sections, overlaps, stale, rejected, lost, slipped, regressions, notLinear int
	heldAtOnce, excused, lateClose, ranOut, healthyLost, stalls                              int
	// starvedOverlaps are the overlaps a loaded machine excuses
	// (apartMachineStarved), not counted in overlaps.
	starvedOverlaps                       int
	maxOverlap, maxHeldAtOnce, maxExcused time.Duration
}

func (o *outcome) add(p outcome) {
	o.runs += p.runs
	o.faults += p.faults
	o.sections += p.sections
	o.overlaps += p.overlaps
	o.stale += p.stale
	o.rejected += p.rejected
	o.lost += p.lost
	o.slipped += p.slipped
	o.regressions += p.regressions
	o.notLinear += p.notLinear
	o.heldAtOnce += p.heldAtOnce
	o.excused += p.excused
	o.lateClose += p.lateClose
	o.ranOut += p.ranOut
	o.healthyLost += p.healthyLost
	o.stalls += p.stalls
	o.starvedOverlaps += p.starvedOverlaps
	o.maxOverlap = max(o.maxOverlap, p.maxOverlap)
	o.maxHeldAtOnce = max(o.maxHeldAtOnce, p.maxHeldAtOnce)
	o.maxExcused = max(o.maxExcused, p.maxExcused)
}

// runs is how often each scenario runs: PADLOCK_CHAOS_RUNS, default 1.
func runs(t *testing.T) int {
	v := os.Getenv("PADLOCK_CHAOS_RUNS")
	if v == "" {
		return 1
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 {
		t.Fatalf("PADLOCK_CHAOS_RUNS=%q: want a positive integer", v)
	}
	return n
}

func TestChaos(t *testing.T) {
	n := runs(t)
	var rows []row
	for _, sc := range append(scenarios(), holdScenarios()...) {
		var total outcome
		t.Run(sc.name, func(t *testing.T) {
			for i := range n {
				var o outcome
				t.Run(fmt.Sprintf("run%d", i+1), func(t *testing.T) { o = runScenario(t, sc) })
				total.add(o)
			}
		})
		if total.runs > 0 {
			rows = append(rows, row{sc: sc, o: total})
		}
	}
	if len(rows) == 0 {
		return
	}
	table := markdownTable(rows)
	t.Logf("chaos results (%d run(s) per scenario):\n%s", n, table)
	if path := os.Getenv("PADLOCK_CHAOS_REPORT"); path != "" {
		head := fmt.Sprintf("Measured %s, %d run(s) per scenario:\n\n", time.Now().UTC().Format("2006-01-02"), n)
		if err := os.WriteFile(path, []byte(head+table), 0o644); err != nil {
			t.Errorf("writing %s: %v", path, err)
		}
	}
}

// runScenario runs sc once and checks its claims.
func runScenario(t *testing.T, sc scenario) outcome {
	e := newEnv(t, sc)
	for range sc.workers {
		e.start()
	}
	// Let the workers get going before any fault.
	if id := e.awaitHolder(0, 30*time.Second); id == 0 {
		t.Fatalf("no worker took the lock within 30s; worker 1 says: %s", e.logTail(1))
	}
	if sc.fault != nil {
		sc.fault(e)
	}
	time.Sleep(sc.settle)
	e.stop(3*sc.ttl + 10*time.Second)

	evs := e.events()
	if dir := os.Getenv("PADLOCK_CHAOS_RECORDS"); dir != "" {
		dumpEvents(t, filepath.Join(dir, strings.ReplaceAll(t.Name(), "/", "_")+".jsonl"), evs)
	}
	e.mu.Lock()
	died := e.died
	faults := e.faults
	hits := e.caught
	windows := e.windows
	e.mu.Unlock()
	if sc.starved {
		windows = append(windows, record.Whole("starved runtime"))
	}
	secs := record.Sections(evs, died)
	overlaps := record.Overlaps(secs)
	if sc.crowded() {
		overlaps = nil // holds share the key by design: holdChecks counts their crowds
	}
	// A scenario that starves the Go runtime claims what holds when the
	// machine serves the process; the overlaps of a section whose process
	// the machine itself held back are counted apart (its Err still may
	// not report held past the lease: the held check below excuses none).
	overlaps, machineStarved := apartMachineStarved(overlaps, evs, sc.ttl)
	for _, ov := range machineStarved {
		t.Logf("overlap of %v with the machine starving the first holder's process (it ran under half the CPU it asked for): %s and %s",
			time.Duration(ov.Nanos), describe(ov.A), describe(ov.B))
	}
	log := e.store.Log()
	o := outcome{
		runs:            1,
		faults:          faults,
		sections:        len(secs),
		overlaps:        len(overlaps),
		stale:           fenced.StaleAccepted(log),
		rejected:        fenced.Rejected(log),
		lost:            record.Count(evs, record.Lost),
		slipped:         record.SlippedWrites(evs),
		regressions:     len(record.FenceRegressions(secs)),
		starvedOverlaps: len(machineStarved),
	}
	if sc.spin > 0 || sc.extends != "" {
		o.faults = o.sections // every one ran starved, or raced its Extends
	}
	if sc.crowded() {
		holdChecks(t, sc, evs, secs, windows, &o)
	}
	// The invariant of every scenario: no two locks report held at once,
	// outside the windows the faults opened.
	for _, ov := range record.HeldOverlaps(record.HeldIntervals(evs), windows) {
		if sc.crowded() {
			break // checked as crowds instead
		}
		d := time.Duration(ov.Nanos())
		if ov.Excused != "" {
			o.excused++
			o.maxExcused = max(o.maxExcused, d)
			if o.excused <= 3 { // the rest are counted
				t.Logf("two locks held at once, excused: %v", ov)
			}
			continue
		}
		o.heldAtOnce++
		o.maxHeldAtOnce = max(o.maxHeldAtOnce, d)
		t.Errorf("PROMISE BROKEN, two locks reported held at once: %v%s", ov, extendsOf(evs, ov.A))
	}
	if sc.closeWithin > 0 {
		o.lateClose = lateAfterClose(t, evs, sc.closeWithin)
	}
	if sc.noRunOut {
		o.stalls = stalls(t, evs, secs, sc.ttl+time.Second)
	}
	if sc.slowMaster {
		o.healthyLost = lostElsewhere(t, evs, e.keys[len(e.keys)-1], sc.ttl)
	}
	for _, ev := range evs {
		if ranOut(ev) {
			o.ranOut++
			if sc.noRunOut {
				t.Logf("worker %d: Acquire waited %v and gave up: %s", ev.Worker, time.Duration(ev.T-ev.T0).Round(time.Millisecond), ev.Err)
			}
		}
	}
	for _, ov := range overlaps {
		d := time.Duration(ov.Nanos)
		o.maxOverlap = max(o.maxOverlap, d)
		t.Logf("overlap of %v: %s and %s", d, describe(ov.A), describe(ov.B))
	}
	for _, r := range record.FenceRegressions(secs) {
		t.Errorf("PROMISE BROKEN, fence regression: worker %d got fence %d, then worker %d, asking later, got %d (its lock reported lost: %v)",
			r[0].Worker, r[0].Fence, r[1].Worker, r[1].Fence, r[1].Lost)
	}

	ops := record.Operations(evs)
	res, info := fenced.Check(ops, time.Minute)
	if res != porcupine.Ok {
		o.notLinear = 1
		t.Errorf("the fenced store's history (%d operations) is not linearizable: %v", len(ops), res)
		if f, err := os.CreateTemp("", "padlock-chaos-"+sc.name+"-*.html"); err == nil {
			if porcupine.Visualize(fenced.Model, info, f) == nil {
				t.Logf("visualization: %s", f.Name())
			}
			f.Close()
		}
	}

	t.Logf("%d critical sections, %d faults hit a holder, %d overlaps (longest %v), %d lock-lost signals, "+
		"%d stale writes accepted, %d rejected, %d writes after the lock was lost, %d store operations checked; "+
		"two locks held at once: %d outside any window (longest %v), %d inside one (longest %v); "+
		"%d waits ran out, %d Acquires slow to see Close",
		o.sections, o.faults, o.overlaps, o.maxOverlap, o.lost, o.stale, o.rejected, o.slipped, len(ops),
		o.heldAtOnce, o.maxHeldAtOnce, o.excused, o.maxExcused, o.ranOut, o.lateClose)

	switch {
	case o.sections < 3:
		t.Errorf("only %d critical sections: the workers hardly ran", o.sections)
	case sc.fault != nil && o.faults == 0:
		t.Errorf("no fault hit a lock holder inside its critical section: the run proved nothing")
	}
	if sc.exclusion && o.overlaps > 0 {
		t.Errorf("%d overlapping critical sections, want 0: %s claims exclusion", o.overlaps, sc.name)
	}
	if sc.fenced && o.stale > 0 {
		t.Errorf("the store accepted %d stale writes, want 0", o.stale)
	}
	if sc.wantLost {
		// A holder a fault caught learns it lost the lock: from Done, or,
		// when its section ends before a renewal could tell it, from its
		// Release, which does not say it released the lock: ErrNotHeld,
		// or, when its first copy met a connection the restart closed and
		// the copy sent again found the key gone, ErrUnavailable (the
		// first copy may have run). Faults whose holder is not named are
		// counted against the lost signals left.
		told, untold := told(evs, hits)
		if len(hits) > 0 {
			t.Logf("of %d holders caught: %d told by Done, %d by Release", len(hits), told.lost, told.release)
		}
		for _, c := range untold {
			t.Errorf("worker %d, caught inside its section at %d, was told of the loss neither by Done nor by Release: %s",
				c.id, c.at, iterationOf(evs, c))
		}
		if rest := o.lost - told.lost; rest < o.faults-len(hits) {
			t.Errorf("%d lock-lost signals for %d faults that hit a holder, want one each at least", rest, o.faults-len(hits))
		}
	}
	if sc.wantRejected && o.rejected == 0 {
		t.Errorf("the fence rejected no write, want the paused holder's stale writes rejected")
	}
	if sc.noRunOut && o.ranOut > 0 {
		t.Errorf("PROMISE BROKEN, %d Acquires waited their whole Wait (%v) and gave up, want 0: a waiter gets a free key", o.ranOut, sc.wait)
	}
	if o.stalls > 0 {
		t.Errorf("PROMISE BROKEN, the key sat unheld for over %v %d times while an Acquire waited through it, want 0: a waiter gets a free key", sc.ttl+time.Second, o.stalls)
	}
	if o.lateClose > 0 {
		t.Errorf("PROMISE BROKEN, %d Acquires under way at Close returned later than %v after it (or with a lock), want 0", o.lateClose, sc.closeWithin)
	}
	if o.healthyLost > 0 {
		t.Errorf("PROMISE BROKEN, %d locks on healthy masters reported lost while one master was slow, want 0", o.healthyLost)
	}
	if t.Failed() && sc.awaits != "" {
		t.Logf("%s checks %s: it fails until that is fixed", sc.name, sc.awaits)
	}
	if t.Failed() {
		for id := 1; id < e.nextID; id++ {
			t.Logf("worker %d log: %s", id, e.logTail(id))
		}
	}
	return o
}

// apartMachineStarved splits overlaps into those no fault of the machine
// excuses and those whose first section (the one that ran on past its
// lease) belongs to a process the machine starved while its lease needed
// renewing: record.Starved spans of that process adding up to a third of
// the TTL or more in the TTL before the second section began (its lease
// lapsed there, every renewal that might have kept it unsent or
// unanswered in time). The spans are the worker's own measure of its CPU
// time, so a machine that serves the workers excuses nothing.
func apartMachineStarved(overlaps []record.Overlap, evs []record.Event, ttl time.Duration) (kept, starved []record.Overlap) {
	spans := starvedSpans(evs)
	for _, ov := range overlaps {
		if spans.starved(ov.A.Worker, ov.B.Start, ttl) {
			starved = append(starved, ov)
			continue
		}
		kept = append(kept, ov)
	}
	return kept, starved
}

// processSpans are the record.Starved spans of each worker process.
type processSpans map[int][][2]int64

func starvedSpans(evs []record.Event) processSpans {
	spans := processSpans{}
	for _, ev := range evs {
		if ev.Kind == record.Starved {
			p := ev.Worker % record.GoroutineStride
			spans[p] = append(spans[p], [2]int64{ev.T0, ev.T})
		}
	}
	return spans
}

// starved reports whether worker's process measured itself starved for a
// third of ttl or more in the ttl before at: its lease needed renewing
// then, and every renewal that might have kept it may have gone unsent
// or unanswered in time.
func (spans processSpans) starved(worker int, at int64, ttl time.Duration) bool {
	from := at - int64(ttl)
	var d int64
	for _, s := range spans[worker%record.GoroutineStride] {
		d += max(0, min(s[1], at)-max(s[0], from))
	}
	return d >= int64(ttl)/3
}

// describe says what a critical section was, for logs.
func describe(s record.Section) string {
	how := "released"
	if s.ReleaseErr != "" {
		how = "Release: " + s.ReleaseErr
	}
	switch {
	case s.Died:
		how = "died"
	case s.Lost:
		how = "lost"
	}
	return fmt.Sprintf("worker %d (iteration %d, fence %d: Acquire took %v, then held %v, %s)", s.Worker, s.N, s.Fence,
		time.Duration(s.Start-s.Call).Round(time.Millisecond), time.Duration(s.End-s.Start).Round(time.Millisecond), how)
}

// stalls counts the gaps longer than bound in which no worker held the
// lock while some Acquire waited from before the gap to after it; each
// is logged.
func stalls(t *testing.T, evs []record.Event, secs []record.Section, bound time.Duration) int {
	type span struct{ from, to int64 }
	var waits []span
	for _, ev := range evs {
		if ev.Kind == record.Acquire || ev.Kind == record.AcquireFailed {
			waits = append(waits, span{ev.T0, ev.T})
		}
	}
	n := 0
	end := int64(0) // the end of the union of sections so far
	for i, s := range secs {
		if i > 0 && s.Start-end > int64(bound) {
			for _, w := range waits {
				if w.from <= end && w.to >= s.Start {
					n++
					t.Logf("the key sat unheld for %v while an Acquire waited (%v in all)",
						time.Duration(s.Start-end).Round(time.Millisecond), time.Duration(w.to-w.from).Round(time.Millisecond))
					break
				}
			}
		}
		end = max(end, s.End)
	}
	// After the last section: a waiter that waited on past it for longer
	// than bound, until it gave up or the run ended.
	for _, w := range waits {
		if len(secs) > 0 && w.from <= end && w.to-end > int64(bound) {
			n++
			t.Logf("the key sat unheld for %v after the last critical section while an Acquire waited (%v in all)",
				time.Duration(w.to-end).Round(time.Millisecond), time.Duration(w.to-w.from).Round(time.Millisecond))
			break
		}
	}
	return n
}

// ranOut reports whether ev is an Acquire that gave up because its Wait
// ran out: not one cut short by the worker's SIGTERM.
func ranOut(ev record.Event) bool {
	return ev.Kind == record.AcquireFailed && strings.Contains(ev.Err, "padlock: not acquired") &&
		!strings.Contains(ev.Err, "signal received") && !strings.Contains(ev.Err, "context canceled")
}

// dumpEvents writes every worker's events to path, sorted by time, for a
// look at what happened (PADLOCK_CHAOS_RECORDS names the directory).
func dumpEvents(t *testing.T, path string, evs []record.Event) {
	sorted := slices.Clone(evs)
	slices.SortStableFunc(sorted, func(a, b record.Event) int { return cmp.Compare(a.T, b.T) })
	var b strings.Builder
	for _, ev := range sorted {
		j, _ := json.Marshal(ev)
		b.Write(j)
		b.WriteByte('\n')
	}
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		t.Errorf("PADLOCK_CHAOS_RECORDS: %v", err)
	}
}

// lateAfterClose counts the Acquires that were under way when their
// process closed its Locker and returned more than within after it, or
// returned a lock: each is logged.
func lateAfterClose(t *testing.T, evs []record.Event, within time.Duration) int {
	closed := map[int]int64{} // process → when it closed its Locker
	for _, ev := range evs {
		if ev.Kind == record.Closed {
			closed[ev.Worker%record.GoroutineStride] = ev.T
		}
	}
	late := 0
	for _, ev := range evs {
		c, ok := closed[ev.Worker%record.GoroutineStride]
		if !ok || (ev.Kind != record.Acquire && ev.Kind != record.AcquireFailed) || ev.T0 >= c || ev.T < c {
			continue
		}
		switch took := time.Duration(ev.T - c); {
		case ev.Kind == record.Acquire:
			late++
			t.Logf("worker %d: an Acquire under way at Close returned a lock %v after it", ev.Worker, took.Round(time.Millisecond))
		case took > within:
			late++
			t.Logf("worker %d: an Acquire under way at Close returned %v after it (%s)", ev.Worker, took.Round(time.Millisecond), ev.Err)
		}
	}
	return late
}

// extendsOf lists the Extend calls of lock h, for the message of a
// broken promise: which lease changes were in flight.
func extendsOf(evs []record.Event, h record.Held) string {
	var b strings.Builder
	for _, ev := range evs {
		if ev.Kind == record.Extend && ev.Worker == h.Worker && ev.N == h.N {
			res := "ok"
			if ev.Err != "" {
				res = ev.Err
			}
			fmt.Fprintf(&b, "\n\tworker %d Extend(%s) sent %.1fms, returned %.1fms after its Acquire: %s",
				h.Worker, ev.Value, float64(ev.T0-h.Start)/1e6, float64(ev.T-h.Start)/1e6, res)
		}
	}
	return b.String()
}

// lostElsewhere counts the locks on keys other than slow whose lock-lost
// signal fired; each is logged.
func lostElsewhere(t *testing.T, evs []record.Event, slow string, ttl time.Duration) int {
	type lock struct{ w, n int }
	keys := map[lock]string{}
	for _, ev := range evs {
		if ev.Kind == record.Acquire {
			keys[lock{ev.Worker, ev.N}] = ev.Key
		}
	}
	spans := starvedSpans(evs)
	n := 0
	for _, ev := range evs {
		if ev.Kind == record.Lost {
			switch k := keys[lock{ev.Worker, ev.N}]; {
			case k == slow:
			case spans.starved(ev.Worker, ev.T, ttl):
				// The machine starved the process while its lease needed
				// renewing (a loaded machine), as apartMachineStarved
				// excuses an overlap.
				t.Logf("worker %d: its lock on %q (a healthy master) was reported lost, its process starved", ev.Worker, k)
			default:
				n++
				t.Logf("worker %d: its lock on %q (a healthy master) was reported lost", ev.Worker, k)
			}
		}
	}
	return n
}

type row struct {
	sc scenario
	o  outcome
}

func markdownTable(rows []row) string {
	var b strings.Builder
	b.WriteString("| Scenario | Claim | Runs | Faults that hit a holder | Critical sections | Overlaps | Held at once, outside windows | Held at once, inside a window | Stale writes accepted | Stale writes rejected | Lock-lost signals fired | Fence regressions | Linearizable |\n")
	b.WriteString("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|\n")
	for _, r := range rows {
		o := r.o
		overlaps := strconv.Itoa(o.overlaps)
		if o.overlaps > 0 {
			overlaps += fmt.Sprintf(" (longest %v)", o.maxOverlap.Round(time.Millisecond))
		}
		if o.starvedOverlaps > 0 {
			overlaps += fmt.Sprintf(" (and %d with the machine starving the process)", o.starvedOverlaps)
		}
		stale, regress := strconv.Itoa(o.stale), strconv.Itoa(o.regressions)
		if !r.sc.fenced {
			stale, regress = "n/a (no fences)", "n/a"
		}
		heldOut, heldIn := strconv.Itoa(o.heldAtOnce), strconv.Itoa(o.excused)
		if o.heldAtOnce > 0 {
			heldOut = fmt.Sprintf("**%d** (longest %v)", o.heldAtOnce, o.maxHeldAtOnce.Round(time.Millisecond))
		}
		if o.excused > 0 {
			heldIn += fmt.Sprintf(" (longest %v)", o.maxExcused.Round(time.Millisecond))
		}
		linear := "yes"
		if o.notLinear > 0 {
			linear = fmt.Sprintf("**no** (%d runs)", o.notLinear)
		}
		claim := r.sc.claim
		if r.sc.noRunOut && o.ranOut > 0 {
			claim += fmt.Sprintf(" (**%d waits ran out**)", o.ranOut)
		}
		if o.stalls > 0 {
			claim += fmt.Sprintf(" (**%d stalls with waiters**)", o.stalls)
		}
		if o.lateClose > 0 {
			claim += fmt.Sprintf(" (**%d Acquires slow to see Close**)", o.lateClose)
		}
		if o.healthyLost > 0 {
			claim += fmt.Sprintf(" (**%d locks lost on healthy masters**)", o.healthyLost)
		}
		fmt.Fprintf(&b, "| %s: %s | %s | %d | %d | %d | %s | %s | %s | %s | %d | %d | %s | %s |\n",
			r.sc.name, r.sc.about, claim, o.runs, o.faults, o.sections, overlaps, heldOut, heldIn, stale, o.rejected, o.lost, regress, linear)
	}
	return b.String()
}

// toldCount is how the holders a fault caught learned of the loss.
type toldCount struct{ lost, release int }

// told sorts the holders that faults caught by how they learned of the
// loss: Done closed with ErrLockLost (lost), or Release returned an error
// rather than confirm a release; untold are those told by neither. A
// holder whose Release returned before the fault took hold (c.took: a
// process stopped just as it let go, its record written after it
// resumed) was not caught.
func told(evs []record.Event, hits []caught) (n toldCount, untold []caught) {
	for _, c := range hits {
		it, ok := iteration(evs, c)
		if !ok {
			untold = append(untold, c)
			continue
		}
		switch {
		case slices.ContainsFunc(evs, func(ev record.Event) bool {
			return ev.Worker == c.id && ev.N == it && ev.Kind == record.Released && ev.T <= c.took
		}):
		case slices.ContainsFunc(evs, func(ev record.Event) bool {
			return ev.Worker == c.id && ev.N == it && ev.Kind == record.Lost
		}):
			n.lost++
		case slices.ContainsFunc(evs, func(ev record.Event) bool {
			return ev.Worker == c.id && ev.N == it && ev.Kind == record.Released && ev.Err != ""
		}):
			n.release++
		default:
			untold = append(untold, c)
		}
	}
	return n, untold
}

// iteration is the iteration worker c.id was in at c.at: its last
// Acquire at or before then.
func iteration(evs []record.Event, c caught) (int, bool) {
	n, ok := 0, false
	for _, ev := range evs {
		if ev.Worker == c.id && ev.Kind == record.Acquire && ev.T <= c.at {
			n, ok = ev.N, true
		}
	}
	return n, ok
}

// iterationOf describes the events of the iteration c caught, for a
// failure's message.
func iterationOf(evs []record.Event, c caught) string {
	it, ok := iteration(evs, c)
	if !ok {
		return "no Acquire before it"
	}
	var b strings.Builder
	for _, ev := range evs {
		if ev.Worker == c.id && ev.N == it {
			fmt.Fprintf(&b, "%s at %+dms", ev.Kind, (ev.T-c.at)/1e6)
			if ev.Err != "" {
				fmt.Fprintf(&b, " (%s)", ev.Err)
			}
			b.WriteString("; ")
		}
	}
	return b.String()
}
