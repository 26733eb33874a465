//go:build chaos

package chaos_test

import (
	"fmt"
	"os"
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

	fault  func(e *env) // injects the faults, on the test goroutine
	settle time.Duration

	exclusion    bool // zero overlapping critical sections
	fenced       bool // zero stale writes accepted, zero fence regressions
	wantLost     bool // every fault that hit a holder fired its lock-lost signal
	wantRejected bool // the fence turned away stale writes
}

// outcome is what one or more runs of a scenario counted.
type outcome struct {
	runs, faults, sections, overlaps, stale, rejected, lost, slipped, regressions, notLinear int
	maxOverlap                                                                               time.Duration
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
	o.maxOverlap = max(o.maxOverlap, p.maxOverlap)
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
	for _, sc := range scenarios() {
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
	e.mu.Lock()
	died := e.died
	faults := e.faults
	e.mu.Unlock()
	secs := record.Sections(evs, died)
	overlaps := record.Overlaps(secs)
	log := e.store.Log()
	o := outcome{
		runs:        1,
		faults:      faults,
		sections:    len(secs),
		overlaps:    len(overlaps),
		stale:       fenced.StaleAccepted(log),
		rejected:    fenced.Rejected(log),
		lost:        record.Count(evs, record.Lost),
		slipped:     record.SlippedWrites(evs),
		regressions: len(record.FenceRegressions(secs)),
	}
	if sc.spin > 0 {
		o.faults = o.sections // every one ran starved
	}
	for _, ov := range overlaps {
		d := time.Duration(ov.Nanos)
		o.maxOverlap = max(o.maxOverlap, d)
		t.Logf("overlap of %v: %s and %s", d, describe(ov.A), describe(ov.B))
	}
	for _, r := range record.FenceRegressions(secs) {
		t.Errorf("fence regression: worker %d got fence %d, then worker %d, asking later, got %d",
			r[0].Worker, r[0].Fence, r[1].Worker, r[1].Fence)
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
		"%d stale writes accepted, %d rejected, %d writes after the lock was lost, %d store operations checked",
		o.sections, o.faults, o.overlaps, o.maxOverlap, o.lost, o.stale, o.rejected, o.slipped, len(ops))

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
	if sc.wantLost && o.lost < o.faults {
		t.Errorf("%d lock-lost signals for %d faults that hit a holder, want one each at least", o.lost, o.faults)
	}
	if sc.wantRejected && o.rejected == 0 {
		t.Errorf("the fence rejected no write, want the paused holder's stale writes rejected")
	}
	if t.Failed() {
		for id := 1; id < e.nextID; id++ {
			t.Logf("worker %d log: %s", id, e.logTail(id))
		}
	}
	return o
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

type row struct {
	sc scenario
	o  outcome
}

func markdownTable(rows []row) string {
	var b strings.Builder
	b.WriteString("| Scenario | Claim | Runs | Faults that hit a holder | Critical sections | Overlaps | Stale writes accepted | Stale writes rejected | Lock-lost signals fired | Fence regressions | Linearizable |\n")
	b.WriteString("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---|\n")
	for _, r := range rows {
		o := r.o
		overlaps := strconv.Itoa(o.overlaps)
		if o.overlaps > 0 {
			overlaps += fmt.Sprintf(" (longest %v)", o.maxOverlap.Round(time.Millisecond))
		}
		stale, regress := strconv.Itoa(o.stale), strconv.Itoa(o.regressions)
		if !r.sc.fenced {
			stale, regress = "n/a (no fences)", "n/a"
		}
		linear := "yes"
		if o.notLinear > 0 {
			linear = fmt.Sprintf("**no** (%d runs)", o.notLinear)
		}
		fmt.Fprintf(&b, "| %s: %s | %s | %d | %d | %d | %s | %s | %d | %d | %s | %s |\n",
			r.sc.name, r.sc.about, r.sc.claim, o.runs, o.faults, o.sections, overlaps, stale, o.rejected, o.lost, regress, linear)
	}
	return b.String()
}
