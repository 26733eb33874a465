package main

import (
	"context"
	"fmt"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/bsm/redislock"
	"github.com/go-redsync/redsync/v4"
	"github.com/padlockgo/padlock"
	"github.com/redis/go-redis/v9"
)

// scHotKeys measures many contended keys at once: workers spread evenly
// over K keys, each holding its key -hold per acquisition and asking again
// at once, every library on one client (one Locker, one redsync, one
// redislock.Client, one rueidislock Locker), and in the fleet rows on
// -procs of them, as a fleet of service instances would. Where one hot key is bound by
// the hand-off gap, many hot keys are bound by what a lock cycle costs the
// client and Redis.
const scHotKeys = "hotkeys"

// hotSpec is one KEYSxWORKERS of the -hotkeys flag.
type hotSpec struct{ keys, perKey int }

func parseHotKeys(s string) ([]hotSpec, error) {
	var out []hotSpec
	for part := range strings.SplitSeq(s, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		k, w, ok := strings.Cut(part, "x")
		keys, err1 := strconv.Atoi(k)
		perKey, err2 := strconv.Atoi(w)
		if !ok || err1 != nil || err2 != nil || keys < 1 || perKey < 1 {
			return nil, fmt.Errorf("bench: -hotkeys: %q is not KEYSxWORKERS (e.g. 64x4)", part)
		}
		out = append(out, hotSpec{keys, perKey})
	}
	return out, nil
}

func hotKeyCases(cfg *config) []rowSpec {
	pollTries := max(int(cfg.wait/cfg.poll), 1)
	return keep(cfg, append([]rowSpec{
		{libPadlock, fmt.Sprintf("Wait %v, 1 Locker", cfg.wait), false, 1, func(cl []*redis.Client) contender {
			return &padlockLib{lockers: newLockers(cl), opts: padlock.Options{Wait: cfg.wait}}
		}},
		{libPadlock, fmt.Sprintf("Fair, Wait %v, 1 Locker", cfg.wait), false, 1, func(cl []*redis.Client) contender {
			return &padlockLib{lockers: newLockers(cl), opts: padlock.Options{Wait: cfg.wait, Fair: true}}
		}},
		{libPadlock, fmt.Sprintf("Wait %v, %d Lockers", cfg.wait, cfg.procs), false, cfg.procs, func(cl []*redis.Client) contender {
			return &padlockLib{lockers: newLockers(cl), opts: padlock.Options{Wait: cfg.wait}}
		}},
		{libPadlock, fmt.Sprintf("Fair, Wait %v, %d Lockers", cfg.wait, cfg.procs), false, cfg.procs, func(cl []*redis.Client) contender {
			return &padlockLib{lockers: newLockers(cl), opts: padlock.Options{Wait: cfg.wait, Fair: true}}
		}},
		{libRueidislock, fmt.Sprintf("%s, WithContext, wait %v", rueidislockSetup, cfg.wait), true, 1, func(cl []*redis.Client) contender {
			return newRueidislock(cl, cfg.wait, nil)
		}},
		{libRedsync, fmt.Sprintf("WithRetryDelay(%v), WithTries(%d)", cfg.poll, pollTries), true, 1, func(cl []*redis.Client) contender {
			return newRedsync(oneNodeEach(cl), redsync.WithRetryDelay(cfg.poll), redsync.WithTries(pollTries))
		}},
		{libRedislock, fmt.Sprintf("LinearBackoff(%v), deadline %v", cfg.poll, cfg.wait), true, 1, func(cl []*redis.Client) contender {
			return &redislockLib{clients: redislockClients(cl), ttl: peerTTL, wait: cfg.wait,
				retry: func() redislock.RetryStrategy { return redislock.LinearBackoff(cfg.poll) }}
		}},
	}, fleetPeers(cfg)...))
}

// hotVariant names the rows of one KEYSxWORKERS.
func hotVariant(h hotSpec) string { return fmt.Sprintf("%d keys x%d", h.keys, h.perKey) }

func runHotKeys(ctx context.Context, cfg *config) ([]result, error) {
	var out []result
	for _, rtt := range cfg.rtts {
		flagSpecs := cfg.hotKeys
		if rtt > 0 {
			flagSpecs = cfg.rttHotKeys
		}
		specs, err := parseHotKeys(flagSpecs)
		if err != nil {
			return out, err
		}
		rs, err := runHotKeysAt(ctx, cfg, specs, rtt)
		out = append(out, rs...)
		if err != nil {
			return out, err
		}
	}
	return out, nil
}

func runHotKeysAt(ctx context.Context, cfg *config, specs []hotSpec, rtt time.Duration) ([]result, error) {
	cases := hotKeyCases(cfg)
	var out []result
	for _, h := range specs {
		variant := rttVariant(hotVariant(h), rtt)
		rs, err := inRounds(cfg.rounds, len(cases), func(i int) (result, error) {
			c := cases[i]
			cfg.progress("hotkeys %s: %s (%s)", variant, c.library, c.setup)
			r, err := onFreshServerAt(ctx, cfg, scHotKeys, c, workload{
				procs:   c.procs,
				workers: h.keys * h.perKey,
				key:     func(w int) string { return "bench:hot:" + strconv.Itoa(w%h.keys) },
				hold:    cfg.hold,
				wait:    true,
				warmup:  max(cfg.warmup, time.Second),
				window:  cfg.window,
			}, rtt)
			r.Variant, r.Keys = variant, h.keys
			if err != nil || r.Ops == 0 {
				return r, err
			}
			// Each key sees Ops/keys cycles; a fair queue of perKey
			// workers waits perKey cycles at most.
			cycle := time.Duration(r.Seconds * float64(h.keys) / float64(r.Ops) * float64(time.Second))
			r.FIFOBound = time.Duration(h.perKey) * cycle
			limit := float64(h.keys) / r.MeanHeld.Seconds()
			r.Extra = append(r.Extra,
				cycleNote("mean cycle per key", cycle, r),
				fmt.Sprintf("%.0f%% of the limit keys/held = %.0f/s", 100*r.OpsPerSec/limit, limit))
			if cpu := r.ClientCPUOp + r.ServerCPUOp; cpu > 0 {
				// What the machine's CPUs could do at this cost per
				// acquisition, were nothing else running.
				ceiling := float64(runtime.NumCPU()) / cpu.Seconds()
				r.Extra = append(r.Extra, fmt.Sprintf("CPU ceiling %d CPUs / (client+redis CPU per op) = %.0f/s", runtime.NumCPU(), ceiling))
			}
			return r, nil
		})
		out = append(out, rs...)
		if err != nil {
			return out, err
		}
	}
	return out, nil
}
