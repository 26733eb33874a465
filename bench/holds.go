package main

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/padlockgo/padlock"
)

// The semaphore and read-write scenarios: padlock alone (its peers offer
// neither), against the targets of the primitives.
const (
	scSemaphore = "semaphore"
	scRWLock    = "rwlock"
)

// semPermits is the semaphore's size in the semaphore rows.
const semPermits = 8

// holdRow is one semaphore or read-write row.
type holdRow struct {
	scenario, setup string
	workers         int
	fair            bool
	reads           int // rwlock: percent of acquisitions that read
}

func holdRows(cfg *config) []holdRow {
	return []holdRow{
		{scenario: scSemaphore, setup: fmt.Sprintf("%d permits, 1 worker (uncontended)", semPermits), workers: 1},
		{scenario: scSemaphore, setup: fmt.Sprintf("%d permits, %d workers", semPermits, cfg.workers), workers: cfg.workers},
		{scenario: scSemaphore, setup: fmt.Sprintf("%d permits, %d workers, Fair", semPermits, cfg.workers), workers: cfg.workers, fair: true},
		{scenario: scRWLock, setup: fmt.Sprintf("%d workers, 90%% reads", cfg.workers), workers: cfg.workers, reads: 90},
	}
}

func runHolds(ctx context.Context, cfg *config) ([]result, error) {
	var out []result
	for _, row := range holdRows(cfg) {
		cfg.progress("%s: %s", row.scenario, row.setup)
		r, err := measureHold(ctx, cfg, row)
		if err != nil {
			return out, err
		}
		out = append(out, r)
	}
	return out, nil
}

// measureHold runs row on a fresh server: its workers take permits (or
// read and write holds) of one key through one Locker, hold each
// cfg.hold, and release, again and again; it counts acquisitions, the
// wait for each, round trips and server commands, and every moment the
// primitive's bound was broken.
func measureHold(ctx context.Context, cfg *config, row holdRow) (result, error) {
	settleBeforeRow(ctx, cfg)
	servers, err := cfg.launcher.start(ctx, 1)
	if err != nil {
		return result{}, err
	}
	defer cfg.launcher.stop(servers[0])
	smp := newSampler(servers)
	defer smp.close()
	hook := &roundTrips{}
	client := newClient(servers[0].addr, hook, row.workers+2)
	defer client.Close()
	locker, err := padlock.New(client)
	if err != nil {
		return result{}, err
	}
	defer locker.Close()
	sem, err := locker.Semaphore(semPermits)
	if err != nil {
		return result{}, err
	}
	o := padlock.Options{Wait: cfg.wait, Fair: row.fair}

	var (
		phase                     atomic.Int32
		inside, writers           atomic.Int64
		violations, gaveUp, errsN atomic.Int64
		firstErr                  atomic.Value
		mu                        sync.Mutex
		lat                       []time.Duration
		held                      time.Duration
		ops, writes               int64
		wg                        sync.WaitGroup
	)
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	for range row.workers {
		wg.Go(func() {
			for runCtx.Err() == nil {
				write := row.scenario == scRWLock && rand.IntN(100) >= row.reads
				start := time.Now()
				var (
					lk  *padlock.Lock
					err error
				)
				switch {
				case row.scenario == scSemaphore:
					lk, err = sem.Acquire(runCtx, "hot", o)
				case write:
					lk, err = locker.AcquireWrite(runCtx, "hot", o)
				default:
					lk, err = locker.AcquireRead(runCtx, "hot", o)
				}
				if err != nil {
					if runCtx.Err() != nil {
						return
					}
					if phase.Load() == phaseMeasure {
						if errors.Is(err, padlock.ErrNotAcquired) {
							gaveUp.Add(1)
						} else {
							errsN.Add(1)
							firstErr.CompareAndSwap(nil, err.Error())
						}
					}
					continue
				}
				got := time.Now()
				n := inside.Add(1)
				if write {
					writers.Add(1)
				}
				switch {
				case row.scenario == scSemaphore && n > semPermits:
					violations.Add(1)
				case row.scenario == scRWLock && writers.Load() > 0 && n > 1:
					violations.Add(1)
				}
				if cfg.hold > 0 {
					time.Sleep(cfg.hold)
				}
				if write {
					writers.Add(-1)
				}
				inside.Add(-1)
				rctx, rcancel := context.WithTimeout(context.WithoutCancel(runCtx), 5*time.Second)
				rerr := lk.Release(rctx)
				rcancel()
				end := time.Now()
				if phase.Load() != phaseMeasure {
					continue
				}
				if rerr != nil {
					errsN.Add(1)
					firstErr.CompareAndSwap(nil, "release: "+rerr.Error())
				}
				mu.Lock()
				ops++
				if write {
					writes++
				}
				held += end.Sub(got)
				lat = append(lat, got.Sub(start))
				mu.Unlock()
			}
		})
	}
	stop := func() { phase.Store(phaseDone); cancel(); wg.Wait() }
	warmup := cfg.warmup
	if row.workers > 1 {
		warmup = max(warmup, time.Second)
	}
	if !sleepCtx(ctx, warmup) {
		stop()
		return result{}, ctx.Err()
	}
	before, err := smp.sample(ctx)
	if err != nil {
		stop()
		return result{}, err
	}
	h0, m0, t0 := hook.load(), markCPU(), time.Now()
	phase.Store(phaseMeasure)
	ok := sleepCtx(ctx, cfg.window)
	phase.Store(phaseDone)
	h1, m1, t1 := hook.load(), markCPU(), time.Now()
	after, serr := smp.sample(context.WithoutCancel(ctx))
	stop()
	if !ok {
		return result{}, ctx.Err()
	}
	if serr != nil {
		return result{}, serr
	}
	r := result{Scenario: row.scenario, Library: libPadlock, Setup: row.setup, Workers: row.workers,
		Seconds: t1.Sub(t0).Seconds(), Ops: ops, Violations: violations.Load(), GaveUp: gaveUp.Load(), Errors: errsN.Load()}
	if s, ok := firstErr.Load().(string); ok {
		r.FirstError = s
	}
	d := diff(before, after)
	fillCounts(&r, h1.sub(h0), d, m1.self-m0.self)
	r.OtherLoad, _ = otherLoad(m0, m1, d.cpu)
	r.P50, r.P99, r.Mean = percentiles(lat)
	if len(lat) > 0 {
		r.Extra = append(r.Extra, "longest wait "+ms(lat[len(lat)-1])) // percentiles sorted lat
	}
	if ops > 0 {
		r.MeanHeld = held / time.Duration(ops)
		// FIFO: a newcomer waits behind the others that wait, and is
		// granted after workers-permits grants (readers go in together,
		// so the read-write rows have no such bound). As the mutex's
		// bound (scenarios.go), it counts one grant more: with 1 permit
		// it is workers × the mean gap between grants.
		if row.scenario == scSemaphore && row.workers > semPermits {
			gap := time.Duration(r.Seconds / float64(ops) * float64(time.Second))
			r.FIFOBound = time.Duration(row.workers-semPermits+1) * gap
			r.Extra = append(r.Extra, fmt.Sprintf("FIFO bound %s (p99 %.2fx)", ms(r.FIFOBound), float64(r.P99)/float64(r.FIFOBound)))
		}
		if row.scenario == scRWLock {
			r.Extra = append(r.Extra, fmt.Sprintf("%.0f%% writes", 100*float64(writes)/float64(ops)))
		}
	}
	return r, nil
}

// holdTargets checks the semaphore rows against the primitive's targets:
// a permit costs 2 round trips uncontended, waiting at most 1 more per
// acquisition, and in fair mode the p99 wait is at most twice the FIFO
// bound.
func holdTargets(rs []result) []target {
	var ts []target
	for _, r := range rs {
		if r.Scenario != scSemaphore || r.Ops == 0 {
			continue
		}
		switch {
		case r.Workers == 1:
			ts = append(ts, target{Goal: "semaphore: a permit costs 2 round trips uncontended (acquire + release)",
				Measured: fmt.Sprintf("%.2f round trips/acquisition", r.RoundTripsOp), Pass: r.RoundTripsOp <= 2.05})
		default:
			ts = append(ts, target{Goal: fmt.Sprintf("semaphore (%s): waiting costs at most 1 extra round trip per acquisition", r.Setup),
				Measured: fmt.Sprintf("%.2f round trips/acquisition", r.RoundTripsOp), Pass: r.RoundTripsOp <= 3.05})
			if r.Setup != "" && r.FIFOBound > 0 && containsFair(r.Setup) {
				ratio := float64(r.P99) / float64(r.FIFOBound)
				ts = append(ts, target{Goal: "semaphore, Fair: p99 wait at most 2x the FIFO bound",
					Measured: fmt.Sprintf("p99 %s, bound %s (%.2fx)", ms(r.P99), ms(r.FIFOBound), ratio), Pass: ratio <= 2})
			}
		}
	}
	return ts
}

func containsFair(setup string) bool {
	return len(setup) >= 4 && setup[len(setup)-4:] == "Fair"
}
