package main

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/padlockgo/padlock"
	"github.com/redis/go-redis/v9"
)

// scMultiKey measures padlock's multi-key lock: one goroutine takes a set
// of n keys and lets them go, with AcquireAll (one script per hash slot:
// one round trip on a single node) and, for comparison, with Acquire key
// by key in sorted order and a Release each.
const scMultiKey = "multikey"

// multiKey is padlock taking n keys per cycle, all at once or one by one.
type multiKey struct {
	l        *padlock.Locker
	n        int
	oneByOne bool
}

func (m *multiKey) keys(key string) []string {
	ks := make([]string, m.n)
	for i := range ks {
		ks[i] = key + ":" + strconv.Itoa(i)
	}
	return ks
}

func (m *multiKey) acquire(ctx context.Context, _ int, key string) (releaseFunc, error) {
	keys := m.keys(key)
	if !m.oneByOne {
		ml, err := m.l.AcquireAll(ctx, keys, padlock.Options{})
		if errors.Is(err, padlock.ErrNotAcquired) {
			return nil, fmt.Errorf("%w: %w", errGaveUp, err)
		}
		if err != nil {
			return nil, err
		}
		return ml.Release, nil
	}
	held := make([]*padlock.Lock, 0, len(keys))
	release := func(ctx context.Context) error {
		var first error
		for _, lk := range held {
			if err := lk.Release(ctx); err != nil && first == nil {
				first = err
			}
		}
		return first
	}
	for _, k := range keys { // sorted already: key:0, key:1, ...
		lk, err := m.l.Acquire(ctx, k, padlock.Options{})
		if err != nil {
			_ = release(ctx)
			if errors.Is(err, padlock.ErrNotAcquired) {
				return nil, fmt.Errorf("%w: %w", errGaveUp, err)
			}
			return nil, err
		}
		held = append(held, lk)
	}
	return release, nil
}

func (m *multiKey) close() { _ = m.l.Close() }

// runMultiKey measures both ways for 2 and 5 keys, each row on a fresh
// server, and notes AcquireAll's ratio to one by one from the same run.
func runMultiKey(ctx context.Context, cfg *config) ([]result, error) {
	if !cfg.wantLib(libPadlock) {
		return nil, nil
	}
	var out []result
	for _, n := range []int{2, 5} {
		variant := fmt.Sprintf("%d keys", n)
		cases := []rowSpec{
			{libPadlock, "AcquireAll + Release", false, 1, func(cl []*redis.Client) contender {
				return &multiKey{l: newLocker(cl[0]), n: n}
			}},
			{libPadlock, "Acquire each (sorted) + Release each", false, 1, func(cl []*redis.Client) contender {
				return &multiKey{l: newLocker(cl[0]), n: n, oneByOne: true}
			}},
		}
		rs, err := inRounds(cfg.rounds, len(cases), func(i int) (result, error) {
			c := cases[i]
			cfg.progress("multikey %s: %s", variant, c.setup)
			r, err := onFreshServer(ctx, cfg, scMultiKey, c, workload{
				workers: 1,
				key:     func(int) string { return "bench:multikey" },
				warmup:  cfg.warmup,
				window:  cfg.window,
			})
			r.Variant = variant
			return r, err
		})
		if len(rs) == 2 && rs[1].OpsPerSec > 0 && rs[1].Mean > 0 {
			rs[0].Extra = append(rs[0].Extra, fmt.Sprintf("vs one by one: ops/s %.2fx, p50 %.2fx, mean %.2fx, round trips %.2fx",
				rs[0].OpsPerSec/rs[1].OpsPerSec, float64(rs[0].P50)/float64(rs[1].P50), float64(rs[0].Mean)/float64(rs[1].Mean), rs[0].RoundTripsOp/rs[1].RoundTripsOp))
		}
		out = append(out, rs...)
		if err != nil {
			return out, err
		}
	}
	return out, nil
}
