package main

import (
	"context"
	"fmt"
	"time"
)

// cpuMark is a moment's CPU counters: the machine's, this process's.
type cpuMark struct {
	busy, total, self time.Duration
	ok                bool
}

func markCPU() cpuMark {
	busy, total, ok := machineCPU()
	return cpuMark{busy: busy, total: total, self: processCPU(), ok: ok}
}

// otherLoad returns the share of the machine's CPU time between a and b
// that neither this process nor the Redis servers (server, from INFO) used:
// other work on the machine, which skews the numbers. ok is false when it
// is not known.
func otherLoad(a, b cpuMark, server time.Duration) (float64, bool) {
	total := b.total - a.total
	if !a.ok || !b.ok || total <= 0 {
		return 0, false
	}
	other := (b.busy - a.busy) - (b.self - a.self) - server
	return max(float64(other)/float64(total), 0), true
}

// settle waits, up to limit, until the machine is nearly idle (less than
// a fifth of its CPU time busy over a quarter second), so that a row is
// not measured while other work runs. It returns the busy share it last
// saw, and false if it gave up waiting.
func settle(ctx context.Context, limit time.Duration) (float64, bool) {
	deadline := time.Now().Add(limit)
	for {
		a := markCPU()
		if !a.ok || !sleepCtx(ctx, 250*time.Millisecond) {
			return 0, false
		}
		b := markCPU()
		share := float64(b.busy-a.busy) / float64(max(b.total-a.total, 1))
		if share < 0.2 {
			return share, true
		}
		if time.Now().After(deadline) || !sleepCtx(ctx, time.Second) {
			return share, false
		}
	}
}

// settleBeforeRow runs settle if the flags ask for it, and says so when
// the machine stayed busy.
func settleBeforeRow(ctx context.Context, cfg *config) {
	if cfg.settle <= 0 {
		return
	}
	if share, ok := settle(ctx, cfg.settle); !ok && ctx.Err() == nil {
		cfg.progress("machine still %.0f%% busy after waiting %v; measuring anyway", 100*share, cfg.settle)
	}
}

func loadNote(share float64) string {
	return fmt.Sprintf("other processes used %.0f%% of the CPUs", 100*share)
}
