package main

import (
	"fmt"
	"io"
	"strings"
	"time"
)

// renewBatch is the most renewals padlock's watchdog sends in one
// pipeline (maxRenewBatch in the engine).
const renewBatch = 250

// target is one of the goals, checked against the measured rows.
type target struct {
	Goal     string `json:"goal"`
	Measured string `json:"measured"`
	Pass     bool   `json:"pass"`
}

func bestPeerOn(rs []result, variant, scenario string) (result, bool) {
	return bestPeerOf(rs, variant, scenario, 0)
}

// bestPeerOf is bestPeerOn for rows on nodes nodes (Redlock; 0 elsewhere).
func bestPeerOf(rs []result, variant, scenario string, nodes int) (result, bool) {
	return bestPeerWhere(rs, variant, scenario, func(r result) bool { return r.Nodes == nodes })
}

// bestPeerWhere is the fastest peer row of scenario and variant for which
// keep holds.
func bestPeerWhere(rs []result, variant, scenario string, keep func(result) bool) (result, bool) {
	var best result
	found := false
	for _, r := range rs {
		if r.Variant == variant && r.Scenario == scenario && keep(r) && r.Peer && r.Ops > 0 && (!found || r.OpsPerSec > best.OpsPerSec) {
			best, found = r, true
		}
	}
	return best, found
}

// bestClassicPeer is the best redsync or redislock row of scenario and
// variant: the peers the one-key targets are set against (rueidislock is
// reported beside them).
func bestClassicPeer(rs []result, variant, scenario string) (result, bool) {
	var best result
	found := false
	for _, r := range rs {
		if r.Variant == variant && r.Scenario == scenario && r.Nodes == 0 && r.Peer && r.Ops > 0 &&
			(r.Library == libRedsync || r.Library == libRedislock) && (!found || r.OpsPerSec > best.OpsPerSec) {
			best, found = r, true
		}
	}
	return best, found
}

// besideRueidis says how row r compares with the best rueidislock row of
// its scenario and variant, for a target set against the other peers.
func besideRueidis(rs []result, r result) string {
	var best result
	for _, q := range rs {
		if q.Variant == r.Variant && q.Scenario == r.Scenario && q.Library == libRueidislock && q.Ops > 0 && q.OpsPerSec > best.OpsPerSec {
			best = q
		}
	}
	if best.Ops == 0 {
		return ""
	}
	return fmt.Sprintf("; rueidislock %.0f (%.2fx)", best.OpsPerSec, r.OpsPerSec/best.OpsPerSec)
}

func find(rs []result, scenario, library, setupPrefix string) (result, bool) {
	return findOn(rs, "", scenario, library, setupPrefix)
}

// findOn finds the row of the given variant (see result.Variant).
func findOn(rs []result, variant, scenario, library, setupPrefix string) (result, bool) {
	for _, r := range rs {
		if r.Variant == variant && r.Scenario == scenario && r.Library == library && strings.HasPrefix(r.Setup, setupPrefix) {
			return r, true
		}
	}
	return result{}, false
}

// annotate fills in the ratios and notes that compare rows.
func annotate(rs []result) {
	for i := range rs {
		r := &rs[i]
		if best, ok := bestPeerOf(rs, r.Variant, r.Scenario, r.Nodes); ok && r.Scenario != scRenewal {
			r.VsBestPeer = r.OpsPerSec / best.OpsPerSec
		}
		switch r.Scenario {
		case scUncontended:
			if f, ok := findOn(rs, r.Variant, scUncontended, libFloor, "SET NX PX"); ok && f.OpsPerSec > 0 && r.Setup != f.Setup {
				r.Extra = append(r.Extra, fmt.Sprintf("%.2fx floor", r.OpsPerSec/f.OpsPerSec))
			}
			if f, ok := findOn(rs, r.Variant, scUncontended, libFloor, fencedFloorSetup); ok && f.OpsPerSec > 0 && r.Library == libPadlock {
				r.Extra = append(r.Extra, fmt.Sprintf("%.2fx fenced floor", r.OpsPerSec/f.OpsPerSec))
			}
		case scContended, scHotKeys:
			if r.FIFOBound > 0 {
				r.Extra = append(r.Extra, fmt.Sprintf("p99 = %.1fx FIFO bound (%v)", float64(r.P99)/float64(r.FIFOBound), ms(r.FIFOBound)))
			}
			if r.Keys > 1 {
				r.Extra = append(r.Extra, fmt.Sprintf("each key held %.0f%% of the time", 100*r.Utilization/float64(r.Keys)))
			} else {
				r.Extra = append(r.Extra, fmt.Sprintf("key held %.0f%% of the time", 100*r.Utilization))
			}
			if r.Ops > 0 {
				r.Extra = append(r.Extra, fmt.Sprintf("%.0f%% re-taken by the previous holder", 100*float64(r.Retaken)/float64(r.Ops)))
			}
		case scRedlock:
			if r.Library == libPadlock && strings.HasPrefix(r.Setup, "NewRedlock") {
				if s, ok := findOn(rs, r.Variant, scRedlock, libPadlock, "New,"); ok && s.Mean > 0 {
					r.Extra = append(r.Extra, fmt.Sprintf("vs 1-node padlock: mean %.2fx, p50 %.2fx",
						float64(r.Mean)/float64(s.Mean), float64(r.P50)/float64(s.P50)))
				}
			}
			if r.Library == libRedsync && !strings.HasPrefix(r.Setup, "1 pool") {
				if s, ok := findOn(rs, r.Variant, scRedlock, libRedsync, "1 pool"); ok && s.Mean > 0 {
					r.Extra = append(r.Extra, fmt.Sprintf("vs 1-node redsync: mean %.2fx", float64(r.Mean)/float64(s.Mean)))
				}
			}
			if r.FIFOBound > 0 {
				r.Extra = append(r.Extra, fmt.Sprintf("p99 = %.1fx FIFO bound (%v)", float64(r.P99)/float64(r.FIFOBound), ms(r.FIFOBound)),
					fmt.Sprintf("key held %.0f%% of the time", 100*r.Utilization))
			} else {
				r.Extra = append(r.Extra, "mean "+us(r.Mean))
			}
		}
		if r.ProxyCPUOp > 0 {
			r.Extra = append(r.Extra, fmt.Sprintf("delay proxy CPU %v/op (not in the client's), its chunks written late by p50 %v, p99 %v",
				us(r.ProxyCPUOp), us(r.ProxyLateP50), us(r.ProxyLateP99)))
		}
		if r.Reference && r.Ops > 0 {
			r.Extra = append(r.Extra, fmt.Sprintf("reference, not a Redis peer: in no best-peer ratio; per acquisition %.2f Raft entries, %.2f WAL fsyncs; "+
				"round trips are gRPC requests; CPU: clients + the etcd member's process", r.RaftEntriesOp, r.FsyncsOp))
		}
		if r.OtherLoad >= 0.05 {
			r.Extra = append(r.Extra, loadNote(r.OtherLoad))
		}
		if r.Errors > 0 {
			r.Extra = append(r.Extra, fmt.Sprintf("%d errors, first: %s", r.Errors, r.FirstError))
		}
	}
}

// checkTargets compares the padlock rows with the targets.
func checkTargets(rs []result, workers int) []target {
	var ts []target
	add := func(goal string, pass bool, format string, args ...any) {
		ts = append(ts, target{Goal: goal, Measured: fmt.Sprintf(format, args...), Pass: pass})
	}
	ts = append(ts, rttTargets(rs)...)
	// The checks below are loopback's; rttTargets has those of the rows
	// at a round-trip time.
	for _, p := range rs {
		if p.Scenario != scUncontended || p.Library != libPadlock || !strings.HasPrefix(p.Setup, "New, zero") || p.RTT != 0 {
			continue
		}
		name := p.name()
		if best, ok := bestClassicPeer(rs, p.Variant, scUncontended); ok {
			add(name+": cycles/s >= best of redsync, redislock", p.OpsPerSec >= best.OpsPerSec,
				"%.0f vs %s %.0f (%.2fx)%s", p.OpsPerSec, best.Library, best.OpsPerSec, p.OpsPerSec/best.OpsPerSec, besideRueidis(rs, p))
		}
		add(name+": 2 round trips per cycle", p.RoundTripsOp <= 2.005, "%.2f", p.RoundTripsOp)
	}
	uncontendedCmds := func(fair bool) (float64, bool) {
		prefix := "New, zero"
		if fair {
			prefix = "New, Fair"
		}
		u, ok := find(rs, scUncontended, libPadlock, prefix)
		return u.CommandsOp, ok
	}
	// One key against the peers is checked at 1 ms only (rttTargets): on
	// loopback every library is at the bound the 1 ms sleep sets.
	for _, r := range rs {
		if r.Scenario != scContended || r.Library != libPadlock || r.RTT != 0 {
			continue
		}
		fair := strings.HasPrefix(r.Setup, "Fair")
		name := "contended (" + r.Setup + ")"
		add(name+": <= 4 round trips per acquisition", r.RoundTripsOp <= 4, "%.2f", r.RoundTripsOp)
		if u, ok := uncontendedCmds(fair); ok {
			extra := r.CommandsOp - u
			add(name+": <= 2 server commands per acquisition beyond an uncontended cycle", extra <= 2,
				"%.2f - %.2f = %.2f", r.CommandsOp, u, extra)
		}
		if fair && r.FIFOBound > 0 {
			add(name+fmt.Sprintf(": p99 wait <= 2x FIFO bound (%d x mean cycle)", workers), r.P99 <= 2*r.FIFOBound,
				"p99 %v vs bound %v (%.2fx)", ms(r.P99), ms(r.FIFOBound), float64(r.P99)/float64(r.FIFOBound))
		}
		if r.Procs > 1 {
			ts = append(ts, fleetTargets(rs, r, name)...)
		}
	}
	ts = append(ts, hotKeyTargets(rs)...)
	for _, r := range rs {
		if r.Scenario != scRenewal || r.Library != libPadlock || r.Masters > 0 {
			continue // on a Cluster: measured and reported, no target
		}
		full := float64(min(r.Workers, renewBatch))
		perPipe := 0.0 // renewals per round trip
		if r.RoundTripsOp > 0 {
			perPipe = 1 / r.RoundTripsOp
		}
		add(fmt.Sprintf("renewal of %d locks: pipelined in batches (>= %.0f renewals per pipeline, at most %d), no other round trips", r.Workers, full/2, renewBatch),
			perPipe >= full/2 && r.OtherRoundTrips == 0,
			"%.0f renewals per pipeline, %.2f pipelines per tick, %d other round trips in the window",
			perPipe, r.PipelinesPerTick, r.OtherRoundTrips)
		if !r.atScale {
			continue
		}
		add(fmt.Sprintf("renewal of %d locks: no command batch longer than 50ms", r.Workers), r.SlowestBatch > 0 && r.SlowestBatch <= 50*time.Millisecond,
			"slowest pipeline %v", r.SlowestBatch.Round(100*time.Microsecond))
		floor := ""
		for _, f := range rs {
			if f.Scenario == scRenewal && f.Library == libFloor && f.atScale && f.Workers == r.Workers {
				floor = fmt.Sprintf("; the floor (bare PEXPIRE pipelines, same rate): %v during, %v idle", us(f.ProbeP99), us(f.ProbeIdleP99))
			}
		}
		add(fmt.Sprintf("renewal of %d locks: another client's p99 <= idle + 1ms", r.Workers), r.ProbeP99 <= r.ProbeIdleP99+time.Millisecond,
			"PING p99 %v during renewal, %v idle%s", us(r.ProbeP99), us(r.ProbeIdleP99), floor)
		add(fmt.Sprintf("renewal of %d locks: client memory <= 1 KB per held lock", r.Workers), r.BytesPerLock <= 1024,
			"%.0f B (heap in use after GC, the benchmark's slice of handles included)", r.BytesPerLock)
	}
	for _, q := range rs {
		if q.Scenario != scRedlock || q.Library != libPadlock || !strings.HasPrefix(q.Setup, "NewRedlock") {
			continue
		}
		s, ok := findOn(rs, q.Variant, scRedlock, libPadlock, "New,")
		if !ok || s.Mean == 0 {
			continue
		}
		net := "loopback"
		if q.Variant != "" {
			net = q.Variant
		}
		ratio := float64(q.Mean) / float64(s.Mean)
		add("Redlock Acquire+Release latency <= 1.5x single node ("+net+")", ratio <= 1.5,
			"mean %v vs %v (%.2fx); p50 %v vs %v (%.2fx)", us(q.Mean), us(s.Mean), ratio,
			us(q.P50), us(s.P50), float64(q.P50)/float64(s.P50))
	}
	var viol int64
	for _, r := range rs {
		viol += r.Violations
	}
	add("mutual exclusion: 0 violations (two holders at once, or a held lock lost)", viol == 0, "%d", viol)
	return ts
}

func writeMarkdown(w io.Writer, rs []result, ts []target, settings []string) {
	fmt.Fprintln(w, "| scenario | library | setup | ops/s | vs best peer | round trips/op | server cmds/op | p50 | p99 | CPU/op client+redis | violations | gave up | notes |")
	fmt.Fprintln(w, "|---|---|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|---|")
	for _, r := range rs {
		vs := "-"
		if r.VsBestPeer > 0 {
			vs = fmt.Sprintf("%.2fx", r.VsBestPeer)
		}
		p50, p99 := "-", "-"
		if r.Scenario != scRenewal {
			p50, p99 = ms(r.P50), ms(r.P99)
		}
		cmds := fmt.Sprintf("%.2f", r.CommandsOp)
		if r.Reference {
			cmds = "-" // no Redis: its notes say what the etcd member did
		}
		fmt.Fprintf(w, "| %s | %s | %s | %.0f | %s | %.2f | %s | %s | %s | %s + %s | %d | %d | %s |\n",
			r.name(), r.Library, r.Setup, r.OpsPerSec, vs, r.RoundTripsOp, cmds, p50, p99,
			us(r.ClientCPUOp), us(r.ServerCPUOp), r.Violations, r.GaveUp, strings.Join(r.Extra, "; "))
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Server commands per op, by command (INFO commandstats; commands run inside scripts included):")
	fmt.Fprintln(w)
	for _, r := range rs {
		fmt.Fprintf(w, "- %s / %s / %s: %s\n", r.name(), r.Library, r.Setup, r.breakdown)
	}
	if len(ts) > 0 {
		fmt.Fprintln(w)
		fmt.Fprintln(w, "| target | measured | result |")
		fmt.Fprintln(w, "|---|---|---|")
		for _, t := range ts {
			res := "MISSED"
			if t.Pass {
				res = "met"
			}
			fmt.Fprintf(w, "| %s | %s | %s |\n", t.Goal, t.Measured, res)
		}
	}
	fmt.Fprintln(w)
	for _, s := range settings {
		fmt.Fprintln(w, s)
	}
}

// ms formats a latency for the table: milliseconds, with more digits below 10ms.
func ms(d time.Duration) string {
	f := float64(d) / float64(time.Millisecond)
	switch {
	case d == 0:
		return "0"
	case f < 10:
		return fmt.Sprintf("%.3fms", f)
	default:
		return fmt.Sprintf("%.1fms", f)
	}
}

func us(d time.Duration) string {
	return fmt.Sprintf("%.0fµs", float64(d)/float64(time.Microsecond))
}

// name is the scenario as the table shows it.
func (r result) name() string {
	if r.Variant != "" {
		return r.Scenario + " " + r.Variant
	}
	return r.Scenario
}

// hotKeyTargets checks the many-hot-keys rows on loopback: on 64 keys
// padlock's default mode on one Locker does at least 1.3x the best peer
// (rueidislock included); on every
// key count its p99 wait stays within 2x the FIFO bound; and fair mode
// does at least 0.8x the default.
func hotKeyTargets(rs []result) []target {
	var ts []target
	add := func(goal string, pass bool, format string, args ...any) {
		ts = append(ts, target{Goal: goal, Measured: fmt.Sprintf(format, args...), Pass: pass})
	}
	for _, r := range rs {
		if r.Scenario != scHotKeys || r.Library != libPadlock || r.Ops == 0 || r.RTT != 0 {
			continue
		}
		fair := strings.HasPrefix(r.Setup, "Fair")
		name := r.name() + " (" + r.Setup + ")"
		// 64 keys over several Lockers against the peers is checked at
		// 1 ms only (rttTargets): on loopback every key is at the bound
		// the 1 ms sleep sets.
		if !fair && r.Keys == 64 && r.Procs == 1 {
			if best, ok := bestPeerOn(rs, r.Variant, scHotKeys); ok {
				add(name+": acquisitions/s >= 1.3x best peer", r.OpsPerSec >= 1.3*best.OpsPerSec,
					"%.0f vs %s %.0f (%.2fx)", r.OpsPerSec, best.Library, best.OpsPerSec, r.OpsPerSec/best.OpsPerSec)
			}
		}
		if !fair && r.FIFOBound > 0 {
			add(name+": p99 wait <= 2x FIFO bound (workers per key x mean cycle per key)", r.P99 <= 2*r.FIFOBound,
				"p99 %v vs bound %v (%.2fx)", ms(r.P99), ms(r.FIFOBound), float64(r.P99)/float64(r.FIFOBound))
		}
		if fair && r.Keys == 64 {
			if d, ok := findPadlock(rs, r.Variant, scHotKeys, "Wait", r.Procs); ok && d.OpsPerSec > 0 {
				add(name+": acquisitions/s >= 0.8x the default mode", r.OpsPerSec >= 0.8*d.OpsPerSec,
					"%.0f vs %.0f (%.2fx)", r.OpsPerSec, d.OpsPerSec, r.OpsPerSec/d.OpsPerSec)
			}
		}
	}
	return ts
}

// bestPeerWith is bestPeerOn among the peer rows spread over procs
// clients.
func bestPeerWith(rs []result, variant, scenario string, procs int) (result, bool) {
	return bestPeerWhere(rs, variant, scenario, func(r result) bool { return r.Procs == procs })
}

// findPadlock finds padlock's row of scenario and variant whose setup
// starts with setupPrefix, on procs Lockers.
func findPadlock(rs []result, variant, scenario, setupPrefix string, procs int) (result, bool) {
	for _, r := range rs {
		if r.Variant == variant && r.Scenario == scenario && r.Library == libPadlock && r.Procs == procs && strings.HasPrefix(r.Setup, setupPrefix) {
			return r, true
		}
	}
	return result{}, false
}

// fleetTargets checks a contended padlock row spread over several Lockers
// (a fleet of processes on one key): the default mode does at least 0.95x
// its own 1-Locker row with a p99 wait within 1.5x the FIFO bound; fair
// mode at least 0.9x the default mode's row on as many Lockers, in at most
// 2 round trips per acquisition.
func fleetTargets(rs []result, r result, name string) []target {
	var ts []target
	add := func(goal string, pass bool, format string, args ...any) {
		ts = append(ts, target{Goal: goal, Measured: fmt.Sprintf(format, args...), Pass: pass})
	}
	if strings.HasPrefix(r.Setup, "Fair") {
		if d, ok := findPadlock(rs, r.Variant, r.Scenario, "Wait", r.Procs); ok && d.OpsPerSec > 0 {
			add(name+": acquisitions/s >= 0.9x the default mode's row on as many Lockers", r.OpsPerSec >= 0.9*d.OpsPerSec,
				"%.0f vs %.0f (%.2fx)", r.OpsPerSec, d.OpsPerSec, r.OpsPerSec/d.OpsPerSec)
		}
		// To the precision printed: the count takes in one-off round
		// trips too (each Locker's SUBSCRIBE, a rare attempt that is not
		// a join), a few in a window of over a thousand acquisitions.
		add(name+": <= 2 round trips per acquisition", r.RoundTripsOp < 2.005, "%.2f", r.RoundTripsOp)
		return ts
	}
	if one, ok := findPadlock(rs, r.Variant, r.Scenario, "Wait", 1); ok && one.OpsPerSec > 0 {
		add(name+": acquisitions/s >= 0.95x the 1-Locker row", r.OpsPerSec >= 0.95*one.OpsPerSec,
			"%.0f vs %.0f (%.2fx)", r.OpsPerSec, one.OpsPerSec, r.OpsPerSec/one.OpsPerSec)
	}
	if r.FIFOBound > 0 {
		add(name+": p99 wait <= 1.5x FIFO bound", r.P99*2 <= 3*r.FIFOBound,
			"p99 %v vs bound %v (%.2fx)", ms(r.P99), ms(r.FIFOBound), float64(r.P99)/float64(r.FIFOBound))
	}
	return ts
}

// cycleNote splits a contended row's mean cycle into the time a holder
// had the lock (its critical section, then its Release call) and the gap
// before the next holder had it.
func cycleNote(what string, cycle time.Duration, r result) string {
	return fmt.Sprintf("%s %v = held %v (of which Release %v) + handoff gap %v", what, us(cycle), us(r.MeanHeld), us(r.MeanRelease), us(cycle-r.MeanHeld))
}

// targetRTT is the round-trip time the peer targets are set at: what a
// service sees of its Redis across a cloud region.
const targetRTT = time.Millisecond

// rttTargets checks the rows at targetRTT: padlock's default mode on one
// key at least 2x the best peer on as many clients, 1 Locker and
// -procs Lockers, with a p99 wait within 1.5x the FIFO bound; on 64 hot
// keys over -procs Lockers at least 1.3x the best peer on as many
// clients; uncontended at least 0.95x the best peer; fair mode over
// -procs Lockers on one key at least 0.8x the default mode.
func rttTargets(rs []result) []target {
	var ts []target
	add := func(goal string, pass bool, format string, args ...any) {
		ts = append(ts, target{Goal: goal, Measured: fmt.Sprintf(format, args...), Pass: pass})
	}
	vsPeer := func(r result, best result) string {
		return fmt.Sprintf("%.0f vs %s %.0f (%.2fx)", r.OpsPerSec, best.Library, best.OpsPerSec, r.OpsPerSec/best.OpsPerSec)
	}
	for _, r := range rs {
		if r.RTT != targetRTT || r.Library != libPadlock || r.Ops == 0 {
			continue
		}
		fair := strings.HasPrefix(r.Setup, "Fair")
		name := r.name() + " (" + r.Setup + ")"
		switch {
		case r.Scenario == scUncontended && strings.HasPrefix(r.Setup, "New, zero"):
			if best, ok := bestPeerOn(rs, r.Variant, r.Scenario); ok {
				// The medians beside it: on a loaded machine a few stalled
				// cycles move the rate more than the libraries differ.
				add(name+": cycles/s >= 0.95x best peer", r.OpsPerSec >= 0.95*best.OpsPerSec, "%s; p50 cycle %v vs %v",
					vsPeer(r, best), ms(r.P50), ms(best.P50))
			}
		case r.Scenario == scContended && !fair:
			if best, ok := bestPeerWith(rs, r.Variant, r.Scenario, r.Procs); ok {
				add(name+fmt.Sprintf(": acquisitions/s >= 2x best peer on %d client(s)", r.Procs), r.OpsPerSec >= 2*best.OpsPerSec,
					"%s; %s", vsPeer(r, best), cycleNote("padlock's mean cycle", cycleOf(r), r))
			}
			if r.FIFOBound > 0 {
				add(name+": p99 wait <= 1.5x FIFO bound", r.P99*2 <= 3*r.FIFOBound,
					"p99 %v vs bound %v (%.2fx)", ms(r.P99), ms(r.FIFOBound), float64(r.P99)/float64(r.FIFOBound))
			}
		case r.Scenario == scContended && fair && r.Procs > 1:
			if d, ok := findPadlock(rs, r.Variant, r.Scenario, "Wait", r.Procs); ok && d.OpsPerSec > 0 {
				add(name+": acquisitions/s >= 0.8x the default mode on as many Lockers", r.OpsPerSec >= 0.8*d.OpsPerSec,
					"%.0f vs %.0f (%.2fx)", r.OpsPerSec, d.OpsPerSec, r.OpsPerSec/d.OpsPerSec)
			}
		case r.Scenario == scHotKeys && !fair && r.Keys == 64 && r.Procs > 1:
			if best, ok := bestPeerWith(rs, r.Variant, r.Scenario, r.Procs); ok {
				add(name+fmt.Sprintf(": acquisitions/s >= 1.3x best peer on %d clients", r.Procs), r.OpsPerSec >= 1.3*best.OpsPerSec,
					"%s", vsPeer(r, best))
			}
		}
	}
	return ts
}

// cycleOf is a one-key row's mean cycle: the window over its acquisitions.
func cycleOf(r result) time.Duration {
	if r.Ops == 0 {
		return 0
	}
	return time.Duration(r.Seconds / float64(r.Ops) * float64(time.Second))
}
