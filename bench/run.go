package main

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// result is one row of the table: one library in one scenario.
type result struct {
	Scenario string        `json:"scenario"`
	Library  string        `json:"library"`
	Setup    string        `json:"setup"`
	Peer     bool          `json:"peer"`              // counts as "the best peer" of its scenario
	Variant  string        `json:"variant,omitempty"` // rows compare within a variant: goroutines (uncontended), keys (hotkeys), round-trip time
	RTT      time.Duration `json:"rtt_ns,omitempty"`  // round-trip time the delay proxy added (0: loopback)
	Rounds   int           `json:"rounds,omitempty"`  // rounds measured; the row is the median one
	Nodes    int           `json:"nodes,omitempty"`   // Redlock scenario: nodes the lock lives on
	Masters  int           `json:"masters,omitempty"` // renewal on a Cluster: its masters
	Keys     int           `json:"keys,omitempty"`    // hotkeys scenario: keys the workers are spread over
	Procs    int           `json:"procs,omitempty"`   // clients ("processes": Lockers, pools) the workers are spread over

	// Reference rows are measured beside the peers on a store that is not
	// Redis (etcd): never a peer, no Redis commands.
	Reference bool `json:"reference,omitempty"`

	Workers int     `json:"workers"`
	Seconds float64 `json:"seconds"` // measured window
	Ops     int64   `json:"ops"`     // cycles, acquisitions or renewals in the window

	OpsPerSec      float64            `json:"ops_per_sec"`
	RoundTripsOp   float64            `json:"round_trips_per_op"`
	CommandsOp     float64            `json:"server_commands_per_op"`
	CommandsByName map[string]float64 `json:"server_commands_by_name_per_op,omitempty"`
	P50            time.Duration      `json:"p50_ns"` // wait (contended) or cycle latency
	P99            time.Duration      `json:"p99_ns"`
	Mean           time.Duration      `json:"mean_ns"`
	ClientCPUOp    time.Duration      `json:"client_cpu_per_op_ns"`
	ProxyCPUOp     time.Duration      `json:"proxy_cpu_per_op_ns,omitempty"` // the delay proxy's process, not in the client's figure
	ProxyLateP50   time.Duration      `json:"proxy_late_p50_ns,omitempty"`   // how late the (first) proxy wrote the window's chunks
	ProxyLateP99   time.Duration      `json:"proxy_late_p99_ns,omitempty"`
	ServerCPUOp    time.Duration      `json:"server_cpu_per_op_ns"`

	// etcd only.
	RequestsByName map[string]float64 `json:"requests_by_name_per_op,omitempty"` // etcd: gRPC requests by method
	RaftEntriesOp  float64            `json:"raft_entries_per_op,omitempty"`     // etcd: entries the member applied
	FsyncsOp       float64            `json:"wal_fsyncs_per_op,omitempty"`       // etcd: fsyncs of the member's WAL

	Violations int64  `json:"violations"` // two holders at once, or a held lock lost
	GaveUp     int64  `json:"gave_up"`    // Acquire calls that ran out of wait or tries
	Errors     int64  `json:"errors"`
	FirstError string `json:"first_error,omitempty"`

	// Contended only.
	Retaken     int64         `json:"retaken,omitempty"`         // acquisitions by the previous holder again
	MeanHeld    time.Duration `json:"mean_held_ns,omitempty"`    // from holding to Release returned
	MeanRelease time.Duration `json:"mean_release_ns,omitempty"` // of which Release: from calling it to its return
	Utilization float64       `json:"utilization,omitempty"`     // share of the window the key was held
	FIFOBound   time.Duration `json:"fifo_bound_ns,omitempty"`   // workers × mean cycle
	VsBestPeer  float64       `json:"ops_vs_best_peer"`          // ops/s ÷ the best peer's
	OtherLoad   float64       `json:"other_load"`                // share of the machine's CPU other processes used in the window

	// Renewal only.
	PipelinesPerTick float64       `json:"pipelines_per_tick,omitempty"`
	OtherRoundTrips  int64         `json:"other_round_trips,omitempty"`     // not pipelined
	SlowestBatch     time.Duration `json:"slowest_batch_ns,omitempty"`      // the longest pipeline round trip
	ProbeIdleP99     time.Duration `json:"probe_idle_p99_ns,omitempty"`     // another client's PING p99, nothing else running
	ProbeP99         time.Duration `json:"probe_p99_ns,omitempty"`          // the same, while the locks were renewed
	BytesPerLock     float64       `json:"client_bytes_per_lock,omitempty"` // client heap in use per held lock, after GC

	Extra     []string `json:"notes,omitempty"` // scenario-specific figures
	breakdown string
	atScale   bool // renewal: the -renew-scale row, checked against issue 25's targets
}

// workload says what the workers of one measured run do.
type workload struct {
	procs   int // clients the workers are spread over (worker w uses w % procs); 0 means 1
	workers int
	key     func(w int) string
	hold    time.Duration // time.Sleep inside the critical section
	think   time.Duration // time.Sleep between Release and the next Acquire
	wait    bool          // latency is the wait for the lock, not the cycle
	warmup  time.Duration
	window  time.Duration
}

// workerStats is what one worker saw in the measured window.
type workerStats struct {
	lat      []time.Duration
	ops      int64
	held     time.Duration
	release  time.Duration // in Release
	gaveUp   int64
	errs     int64
	firstErr error
}

const (
	phaseWarmup int32 = iota
	phaseMeasure
	phaseDone
)

// stopGrace bounds how long workers may take to stop after the window.
const stopGrace = 15 * time.Second

// measure runs wl against lib, counting round trips with hook and server
// work with smp, and returns the row (Scenario, Library and Setup are the
// caller's to fill in).
func measure(ctx context.Context, lib contender, hook *roundTrips, smp *sampler, wl workload) (result, error) {
	return measureVia(ctx, lib, hook, smp, nil, wl)
}

// measureVia is measure on clients that reach Redis through px, whose CPU
// is counted apart from the clients' and the servers'.
func measureVia(ctx context.Context, lib contender, hook *roundTrips, smp *sampler, px proxies, wl workload) (result, error) {
	// perKey watches one key: who is inside, who held it last.
	type perKey struct {
		inside     atomic.Int32
		lastHolder atomic.Int64
	}
	var (
		phase      atomic.Int32
		violations atomic.Int64
		retaken    atomic.Int64 // acquisitions by the worker that held the lock last
		stats      = make([]workerStats, wl.workers)
		keys       = map[string]*perKey{}
		wg         sync.WaitGroup
	)
	for w := range wl.workers {
		if keys[wl.key(w)] == nil {
			k := &perKey{}
			k.lastHolder.Store(-1)
			keys[wl.key(w)] = k
		}
	}
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	for w := range wl.workers {
		wg.Go(func() {
			st := &stats[w]
			key := wl.key(w)
			k := keys[key]
			for runCtx.Err() == nil {
				start := time.Now()
				var release releaseFunc
				for release == nil {
					rel, err := lib.acquire(runCtx, w, key)
					if err == nil {
						release = rel
						break
					}
					if runCtx.Err() != nil {
						return
					}
					if phase.Load() == phaseMeasure {
						if errors.Is(err, errGaveUp) {
							st.gaveUp++
						} else {
							st.errs++
							if st.firstErr == nil {
								st.firstErr = err
							}
						}
					}
					if !errors.Is(err, errGaveUp) {
						time.Sleep(time.Millisecond) // don't spin on a failing server
					}
				}
				got := time.Now()
				counted := phase.Load() == phaseMeasure
				if k.inside.Add(1) != 1 {
					violations.Add(1)
				}
				if k.lastHolder.Swap(int64(w)) == int64(w) && counted {
					retaken.Add(1)
				}
				if wl.hold > 0 {
					time.Sleep(wl.hold)
				}
				k.inside.Add(-1)
				rctx, rcancel := context.WithTimeout(context.WithoutCancel(runCtx), 5*time.Second)
				released := time.Now()
				err := release(rctx)
				rcancel()
				end := time.Now()
				if err != nil && counted {
					st.errs++
					if st.firstErr == nil {
						st.firstErr = fmt.Errorf("release: %w", err)
					}
				}
				if wl.think > 0 {
					time.Sleep(wl.think)
				}
				if counted {
					st.ops++
					st.held += end.Sub(got)
					st.release += end.Sub(released)
					if wl.wait {
						st.lat = append(st.lat, got.Sub(start))
					} else {
						st.lat = append(st.lat, end.Sub(start))
					}
				}
			}
		})
	}

	stopped := make(chan struct{})
	go func() { wg.Wait(); close(stopped) }()
	stop := func() error {
		phase.Store(phaseDone)
		cancel()
		select {
		case <-stopped:
			return nil
		case <-time.After(stopGrace):
			return fmt.Errorf("bench: workers did not stop within %v", stopGrace)
		}
	}

	if !sleepCtx(ctx, wl.warmup) {
		_ = stop()
		return result{}, ctx.Err()
	}
	before, err := smp.sample(ctx)
	if err != nil {
		_ = stop()
		return result{}, err
	}
	x0 := px.mark()
	h0, m0, t0 := hook.load(), markCPU(), time.Now()
	phase.Store(phaseMeasure)
	ok := sleepCtx(ctx, wl.window)
	phase.Store(phaseDone)
	h1, m1, t1 := hook.load(), markCPU(), time.Now()
	x1 := px.mark()
	after, serr := smp.sample(context.WithoutCancel(ctx))
	if err := stop(); err != nil {
		return result{}, err
	}
	if !ok {
		return result{}, ctx.Err()
	}
	if serr != nil {
		return result{}, serr
	}

	r := result{Workers: wl.workers, Seconds: t1.Sub(t0).Seconds(), Violations: violations.Load(), Retaken: retaken.Load()}
	var lat []time.Duration
	var held, release time.Duration
	perProc := make([]int64, max(wl.procs, 1))
	for i := range stats {
		st := &stats[i]
		perProc[i%len(perProc)] += st.ops
		r.Ops += st.ops
		r.GaveUp += st.gaveUp
		r.Errors += st.errs
		held += st.held
		release += st.release
		lat = append(lat, st.lat...)
		if st.firstErr != nil && r.FirstError == "" {
			r.FirstError = st.firstErr.Error()
		}
	}
	d := diff(before, after)
	fillCounts(&r, h1.sub(h0), d, m1.self-m0.self)
	r.OtherLoad, _ = otherLoad(m0, m1, d.cpu+x1.cpu-x0.cpu)
	if r.Ops > 0 && len(px) > 0 {
		r.ProxyCPUOp = (x1.cpu - x0.cpu) / time.Duration(r.Ops)
		r.ProxyLateP50, r.ProxyLateP99 = x1.lateP50, x1.lateP99
	}
	r.P50, r.P99, r.Mean = percentiles(lat)
	if len(perProc) > 1 && r.Ops > 0 {
		lo, hi := slices.Min(perProc), slices.Max(perProc)
		r.Extra = append(r.Extra, fmt.Sprintf("acquisitions per client %.0f%%-%.0f%%", 100*float64(lo)/float64(r.Ops), 100*float64(hi)/float64(r.Ops)))
	}
	if r.Ops > 0 {
		r.MeanHeld = held / time.Duration(r.Ops)
		r.MeanRelease = release / time.Duration(r.Ops)
		r.Utilization = held.Seconds() / r.Seconds
	}
	return r, nil
}

// fillCounts sets the rates and per-op figures of r from its ops and window.
func fillCounts(r *result, h hookCounts, d delta, clientCPU time.Duration) {
	if r.Seconds > 0 {
		r.OpsPerSec = float64(r.Ops) / r.Seconds
	}
	if r.Ops == 0 {
		return
	}
	ops := float64(r.Ops)
	r.RoundTripsOp = float64(h.commands+h.pipelines+d.pubsub) / ops
	r.CommandsOp = float64(d.commands) / ops
	r.CommandsByName = map[string]float64{}
	for name, n := range d.calls {
		r.CommandsByName[name] = float64(n) / ops
	}
	r.breakdown = breakdown(d.calls, ops)
	if len(h.named) > 0 {
		r.RequestsByName = map[string]float64{}
		for name, n := range h.named {
			r.RequestsByName[name] = float64(n) / ops
		}
		r.breakdown = strings.TrimPrefix(r.breakdown+"; requests the clients sent: "+breakdown(h.named, ops), "; ")
	}
	r.RaftEntriesOp = float64(d.raftEntries) / ops
	r.FsyncsOp = float64(d.fsyncs) / ops
	r.ClientCPUOp = clientCPU / time.Duration(r.Ops)
	r.ServerCPUOp = d.cpu / time.Duration(r.Ops)
}

func percentiles(lat []time.Duration) (p50, p99, mean time.Duration) {
	if len(lat) == 0 {
		return 0, 0, 0
	}
	slices.Sort(lat)
	var sum time.Duration
	for _, d := range lat {
		sum += d
	}
	at := func(q float64) time.Duration {
		i := int(q*float64(len(lat))+0.5) - 1
		return lat[min(max(i, 0), len(lat)-1)]
	}
	return at(0.50), at(0.99), sum / time.Duration(len(lat))
}

// sleepCtx sleeps d and reports whether ctx is still live.
func sleepCtx(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// inRounds measures n cases rounds times, interleaved (every case once per
// round, so drifting machine load touches all of them alike), and keeps
// each case's median round by ops/s, noting the spread.
func inRounds(rounds, n int, measureCase func(i int) (result, error)) ([]result, error) {
	all := make([][]result, n)
	for range max(rounds, 1) {
		for i := range n {
			r, err := measureCase(i)
			if err != nil {
				return medians(all), err
			}
			all[i] = append(all[i], r)
		}
	}
	return medians(all), nil
}

func medians(all [][]result) []result {
	var out []result
	for _, rs := range all {
		if len(rs) == 0 {
			continue
		}
		sorted := slices.Clone(rs)
		slices.SortFunc(sorted, func(a, b result) int { return cmpFloat(a.OpsPerSec, b.OpsPerSec) })
		m := sorted[(len(sorted)-1)/2]
		if len(rs) > 1 {
			// Safety counts are summed over all rounds, not taken from one.
			m.Violations, m.Errors = 0, 0
			for _, r := range rs {
				m.Violations += r.Violations
				m.Errors += r.Errors
				if m.FirstError == "" {
					m.FirstError = r.FirstError
				}
			}
			m.Rounds = len(rs)
			m.Extra = append(m.Extra, fmt.Sprintf("median of %d rounds (ops/s %.0f-%.0f)", len(rs), sorted[0].OpsPerSec, sorted[len(sorted)-1].OpsPerSec))
		}
		out = append(out, m)
	}
	return out
}

func cmpFloat(a, b float64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}
