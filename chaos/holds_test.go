//go:build chaos

package chaos_test

import (
	"testing"
	"time"

	"github.com/padlockgo/padlock/chaos/internal/record"
)

// holdScenarios meet the semaphore and the read-write lock with the
// faults the lock meets: a paused holder, a killed holder, a Redis
// restart. Their promise is the lock's, counted in holders: never more
// holders reported at once than the primitive admits (2 permits; one
// writer alone, or readers), outside the windows the faults open.
func holdScenarios() []scenario {
	const ttl = time.Second
	var out []scenario
	for _, p := range []struct {
		prim, what     string
		permits, reads int
	}{
		{"semaphore", "semaphore of 2 permits, 4 processes", 2, 0},
		{"rwlock", "read-write lock, 4 processes, 75% reads", 0, 75},
	} {
		short := map[string]string{"semaphore": "sem", "rwlock": "rw"}[p.prim]
		bound := "never more than 2 permits held at once"
		if p.prim == "rwlock" {
			bound = "never a writer with another holder"
		}
		base := scenario{mode: "single", workers: 4, ttl: ttl, primitive: p.prim, permits: p.permits, reads: p.reads}
		paused := base
		paused.name, paused.about = short+"-paused-holder", p.what+"; a holder SIGSTOPped for 2.5×TTL, then resumed"
		paused.claim = bound + " (held); sections may overlap; lost fires on resume"
		paused.hold, paused.fault, paused.settle, paused.wantLost = 300*time.Millisecond, pauseHolder(2, 5*ttl/2), ttl, true
		killed := base
		killed.name, killed.about = short+"-killed-holder", p.what+"; a holder SIGKILLed, a new worker started"
		killed.claim = bound + " (held and sections)"
		killed.hold, killed.fault, killed.settle, killed.exclusion = 300*time.Millisecond, killHolder(2), 2*ttl, true
		restart := base
		restart.name, restart.about = short+"-redis-restart", p.what+"; redis-server killed and restarted empty under a holder"
		restart.claim = bound + " outside the restart window; lost fires"
		restart.hold, restart.fault, restart.settle, restart.wantLost = 500*time.Millisecond, restartRedis(2), 2*ttl, true
		out = append(out, paused, killed, restart)
	}
	return out
}

// holdChecks counts, for a semaphore or read-write scenario, the crowds
// of its critical sections (as overlaps) and of its held locks (as held
// at once, or excused by a fault's window), failing on an unexcused one.
func holdChecks(t *testing.T, sc scenario, evs []record.Event, secs []record.Section, windows []record.Window, o *outcome) {
	roles := record.Roles(evs)
	n, longest := record.SectionCrowds(secs, roles, sc.permits)
	o.overlaps, o.maxOverlap = n, time.Duration(longest)
	for _, c := range record.Crowds(record.HeldIntervals(evs), roles, sc.permits, windows) {
		d := time.Duration(c.Nanos())
		if c.Excused != "" {
			o.excused++
			o.maxExcused = max(o.maxExcused, d)
			continue
		}
		o.heldAtOnce++
		o.maxHeldAtOnce = max(o.maxHeldAtOnce, d)
		t.Errorf("PROMISE BROKEN, %d holds of %q reported held at once for %v beyond the %s's bound: %+v", len(c.Held), c.Key, d, sc.primitive, c.Held)
	}
}

// crowded reports whether sc's primitive admits more than one holder of a
// key at once (a semaphore, or readers of a read-write lock), so that
// exclusion is checked as crowds beyond its bound rather than as overlaps.
func (sc scenario) crowded() bool {
	return sc.primitive == "semaphore" || sc.primitive == "rwlock"
}
