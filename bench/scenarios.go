package main

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/bsm/redislock"
	"github.com/go-redsync/redsync/v4"
	"github.com/padlockgo/padlock"
	"github.com/redis/go-redis/v9"
)

// config is what the flags say.
type config struct {
	warmup, window time.Duration
	workers, procs int
	hold, wait     time.Duration
	poll           time.Duration // the tuned peers' retry delay
	rounds         int
	parallel       int             // uncontended: goroutines of the second block
	think          time.Duration   // contended: pause between Release and the next Acquire
	settle         time.Duration   // before each row, wait up to this long for an idle machine
	redlockRTT     time.Duration   // simulated network for the second Redlock block; 0: none
	rtts           []time.Duration // uncontended, contended, hotkeys: round-trip times to measure at (0: loopback)
	rttHotKeys     string          // hotkeys at a round-trip time above 0: KEYSxWORKERS,...

	hotKeys string // KEYSxWORKERS,...

	locks         int
	renewTTL      time.Duration
	renewWindow   time.Duration
	renewPeers    bool
	renewScale    int           // renewal: also hold this many locks with padlock (0: no)
	renewScaleTTL time.Duration // their lease
	memProfile    string        // renewal: heap profile once the locks are taken
	renewCluster  int           // renewal: also hold the locks on a Cluster of this many masters (0: no)
	nodes         int
	redlockTTL    time.Duration
	skipPeers     bool
	libs          map[string]bool // nil: all
	progress      func(format string, args ...any)
	launcher      *launcher
	redlockServer []*server // started early, so they are old enough to vote
}

// Scenario names.
const (
	scUncontended = "uncontended"
	scContended   = "contended"
	scRenewal     = "renewal"
	scRedlock     = "redlock"
)

// rowSpec is one row to measure on a fresh server: how to build the library
// on the run's clients.
type rowSpec struct {
	library, setup string
	peer           bool
	procs          int // clients ("processes") the workers are spread over
	build          func(clients []*redis.Client) contender
}

// onFreshServer starts a server, builds c's library on procs clients that
// count round trips, measures wl, and stops the server.
func onFreshServer(ctx context.Context, cfg *config, scenario string, c rowSpec, wl workload) (result, error) {
	return onFreshServerAt(ctx, cfg, scenario, c, wl, 0)
}

// onFreshServerAt is onFreshServer with every client's connections
// through a delay proxy of round-trip time rtt (none if 0).
func onFreshServerAt(ctx context.Context, cfg *config, scenario string, c rowSpec, wl workload, rtt time.Duration) (result, error) {
	settleBeforeRow(ctx, cfg)
	servers, err := cfg.launcher.start(ctx, 1)
	if err != nil {
		return result{}, err
	}
	defer cfg.launcher.stop(servers[0])
	smp := newSampler(servers)
	defer smp.close()
	addr := servers[0].addr
	var px proxies
	if rtt > 0 {
		p, err := startDelayProxy(addr, rtt)
		if err != nil {
			return result{}, err
		}
		px = proxies{p}
		defer px.close()
		addr = p.addr
	}
	hook := &roundTrips{}
	clients := make([]*redis.Client, max(c.procs, 1))
	for i := range clients {
		clients[i] = newClient(addr, hook, wl.workers+2)
	}
	defer func() {
		for _, cl := range clients {
			cl.Close()
		}
	}()
	lib := c.build(clients)
	r, err := measureVia(ctx, lib, hook, smp, px, wl)
	lib.close()
	if err != nil {
		return result{}, fmt.Errorf("%s %s %s: %w", scenario, c.library, c.setup, err)
	}
	r.Scenario, r.Library, r.Setup, r.Peer, r.Procs, r.RTT = scenario, c.library, c.setup, c.peer, max(c.procs, 1), rtt
	return r, nil
}

// newLocker is padlock.New on a client from newClient or
// newClusterClient, which New does not refuse: an error is a bug of the
// bench, not a measurement.
func newLocker(c redis.UniversalClient, opts ...padlock.LockerOption) *padlock.Locker {
	l, err := padlock.New(c, opts...)
	if err != nil {
		panic(err)
	}
	return l
}

func newLockers(clients []*redis.Client) []*padlock.Locker {
	ls := make([]*padlock.Locker, len(clients))
	for i, c := range clients {
		ls[i] = newLocker(c)
	}
	return ls
}

// redislockClients wraps each go-redis client in a redislock.Client.
func redislockClients(clients []*redis.Client) []*redislock.Client {
	out := make([]*redislock.Client, len(clients))
	for i, c := range clients {
		out[i] = redislock.New(c)
	}
	return out
}

// oneNodeEach gives every "process" its own single-node redsync.
func oneNodeEach(clients []*redis.Client) [][]redis.UniversalClient {
	out := make([][]redis.UniversalClient, len(clients))
	for i, c := range clients {
		out[i] = []redis.UniversalClient{c}
	}
	return out
}

const peerTTL = 30 * time.Second // redislock needs one; padlock's default

// fencedFloorSetup names the floor row whose acquire also takes a fence.
const fencedFloorSetup = "fenced: EVALSHA SET NX PX + fence (TIME, SET GET) + EVALSHA compare-and-delete"

// keep drops the rows of libraries the flags leave out.
func keep(cfg *config, cs []rowSpec) []rowSpec {
	var out []rowSpec
	for _, c := range cs {
		if cfg.wantLib(c.library) && !(c.peer && cfg.skipPeers) {
			out = append(out, c)
		}
	}
	return out
}

func uncontendedCases(cfg *config) []rowSpec {
	cs := []rowSpec{
		{libFloor, "SET NX PX + EVALSHA compare-and-delete", false, 1, func(cl []*redis.Client) contender {
			return &floor{clients: cl, ttl: peerTTL}
		}},
		{libFloor, fencedFloorSetup, false, 1, func(cl []*redis.Client) contender {
			return &floor{clients: cl, ttl: peerTTL, fenced: true}
		}},
		{libPadlock, "New, zero Options (30s lease, renewed)", false, 1, func(cl []*redis.Client) contender {
			return &padlockLib{lockers: newLockers(cl)}
		}},
		{libPadlock, "New, NoRenew (fixed lease: no watchdog)", false, 1, func(cl []*redis.Client) contender {
			return &padlockLib{lockers: newLockers(cl), opts: padlock.Options{NoRenew: true}}
		}},
		{libPadlock, "New, Fair (fair-mode scripts)", false, 1, func(cl []*redis.Client) contender {
			return &padlockLib{lockers: newLockers(cl), opts: padlock.Options{Fair: true}}
		}},
	}
	return keep(cfg, append(cs,
		rowSpec{libRedsync, "1 pool, defaults (8s expiry)", true, 1, func(cl []*redis.Client) contender {
			return newRedsync(oneNodeEach(cl))
		}},
		rowSpec{libRedislock, "Obtain 30s, no retry", true, 1, func(cl []*redis.Client) contender {
			return &redislockLib{clients: redislockClients(cl), ttl: peerTTL}
		}},
		rowSpec{libRueidislock, rueidislockSetup + ", TryWithContext", true, 1, func(cl []*redis.Client) contender {
			return newRueidislock(cl, 0, nil)
		}},
	))
}

func contendedCases(cfg *config) []rowSpec {
	waitOpts := padlock.Options{Wait: cfg.wait}
	fairOpts := padlock.Options{Wait: cfg.wait, Fair: true}
	procs := cfg.procs
	cs := []rowSpec{
		{libPadlock, fmt.Sprintf("Wait %v, 1 Locker", cfg.wait), false, 1, func(cl []*redis.Client) contender {
			return &padlockLib{lockers: newLockers(cl), opts: waitOpts}
		}},
		{libPadlock, fmt.Sprintf("Wait %v, %d Lockers", cfg.wait, procs), false, procs, func(cl []*redis.Client) contender {
			return &padlockLib{lockers: newLockers(cl), opts: waitOpts}
		}},
		{libPadlock, fmt.Sprintf("Fair, Wait %v, 1 Locker", cfg.wait), false, 1, func(cl []*redis.Client) contender {
			return &padlockLib{lockers: newLockers(cl), opts: fairOpts}
		}},
		{libPadlock, fmt.Sprintf("Fair, Wait %v, %d Lockers", cfg.wait, procs), false, procs, func(cl []*redis.Client) contender {
			return &padlockLib{lockers: newLockers(cl), opts: fairOpts}
		}},
	}
	pollTries := max(int(cfg.wait/cfg.poll), 1)
	return append(keep(cfg, append(cs,
		rowSpec{libRedsync, "defaults: 32 tries, delay rand 50-250ms", true, 1, func(cl []*redis.Client) contender {
			return newRedsync(oneNodeEach(cl))
		}},
		rowSpec{libRedsync, fmt.Sprintf("WithRetryDelay(%v), WithTries(%d)", cfg.poll, pollTries), true, 1, func(cl []*redis.Client) contender {
			return newRedsync(oneNodeEach(cl), redsync.WithRetryDelay(cfg.poll), redsync.WithTries(pollTries))
		}},
		rowSpec{libRedislock, fmt.Sprintf("LinearBackoff(100ms), deadline %v", cfg.wait), true, 1, func(cl []*redis.Client) contender {
			return &redislockLib{clients: redislockClients(cl), ttl: peerTTL, wait: cfg.wait,
				retry: func() redislock.RetryStrategy { return redislock.LinearBackoff(100 * time.Millisecond) }}
		}},
		rowSpec{libRedislock, fmt.Sprintf("LinearBackoff(%v), deadline %v", cfg.poll, cfg.wait), true, 1, func(cl []*redis.Client) contender {
			return &redislockLib{clients: redislockClients(cl), ttl: peerTTL, wait: cfg.wait,
				retry: func() redislock.RetryStrategy { return redislock.LinearBackoff(cfg.poll) }}
		}},
		rowSpec{libRueidislock, fmt.Sprintf("%s, WithContext, wait %v", rueidislockSetup, cfg.wait), true, 1, func(cl []*redis.Client) contender {
			return newRueidislock(cl, cfg.wait, nil)
		}},
	)), fleetPeers(cfg)...)
}

// fleetPeers are the peer rows of the fleet: each peer's best polling
// setup, its workers spread over cfg.procs clients, as padlock's over as
// many Lockers, so that a fleet is compared with a fleet.
func fleetPeers(cfg *config) []rowSpec {
	procs := cfg.procs
	if procs <= 1 {
		return nil
	}
	pollTries := max(int(cfg.wait/cfg.poll), 1)
	return keep(cfg, []rowSpec{
		{libRedsync, fmt.Sprintf("WithRetryDelay(%v), WithTries(%d), %d clients", cfg.poll, pollTries, procs), true, procs, func(cl []*redis.Client) contender {
			return newRedsync(oneNodeEach(cl), redsync.WithRetryDelay(cfg.poll), redsync.WithTries(pollTries))
		}},
		{libRedislock, fmt.Sprintf("LinearBackoff(%v), deadline %v, %d clients", cfg.poll, cfg.wait, procs), true, procs, func(cl []*redis.Client) contender {
			return &redislockLib{clients: redislockClients(cl), ttl: peerTTL, wait: cfg.wait,
				retry: func() redislock.RetryStrategy { return redislock.LinearBackoff(cfg.poll) }}
		}},
		{libRueidislock, fmt.Sprintf("%s, WithContext, wait %v, %d clients", rueidislockSetup, cfg.wait, procs), true, procs, func(cl []*redis.Client) contender {
			return newRueidislock(cl, cfg.wait, nil)
		}},
	})
}

// runUncontended measures lock cycles on keys nobody else wants: from one
// goroutine (each cycle waits on two round trips, so this is latency), and
// from cfg.parallel goroutines on a key each (the client and server CPUs
// are the limit, so this is the cost of a cycle).
func runUncontended(ctx context.Context, cfg *config) ([]result, error) {
	cases := uncontendedCases(cfg)
	var out []result
	for _, rtt := range cfg.rtts {
		goroutines := []int{1}
		if cfg.parallel > 1 {
			goroutines = append(goroutines, cfg.parallel)
		}
		for _, workers := range goroutines {
			variant := ""
			if workers > 1 {
				variant = fmt.Sprintf("x%d goroutines", workers)
			}
			variant = rttVariant(variant, rtt)
			rs, err := inRounds(cfg.rounds, len(cases), func(i int) (result, error) {
				c := cases[i]
				cfg.progress("uncontended %s: %s (%s)", variant, c.library, c.setup)
				r, err := onFreshServerAt(ctx, cfg, scUncontended, c, workload{
					workers: workers,
					key:     func(w int) string { return "bench:uncontended:" + strconv.Itoa(w) },
					warmup:  cfg.warmup,
					window:  cfg.window,
				}, rtt)
				r.Variant = variant
				return r, err
			})
			out = append(out, rs...)
			if err != nil {
				return out, err
			}
		}
	}
	return out, nil
}

func runContended(ctx context.Context, cfg *config) ([]result, error) {
	var out []result
	for _, rtt := range cfg.rtts {
		rs, err := runContendedAt(ctx, cfg, rtt)
		out = append(out, rs...)
		if err != nil {
			return out, err
		}
	}
	return out, nil
}

// runContendedAt measures the contended rows at one round-trip time; the
// etcd rows only on loopback (their clients are not Redis clients, so the
// delay proxy is not in their way).
func runContendedAt(ctx context.Context, cfg *config, rtt time.Duration) ([]result, error) {
	cases := contendedCases(cfg)
	var etcd []etcdSpec
	if rtt == 0 {
		etcd = etcdCases(cfg) // beside the peers, on the fleet rows' load
	}
	variant := rttVariant("", rtt)
	return inRounds(cfg.rounds, len(cases)+len(etcd), func(i int) (result, error) {
		wl := workload{
			procs:   1,
			workers: cfg.workers,
			think:   cfg.think,
			key:     func(int) string { return "bench:contended" },
			hold:    cfg.hold,
			wait:    true,
			warmup:  max(cfg.warmup, time.Second),
			window:  cfg.window,
		}
		var (
			r   result
			err error
		)
		if i < len(cases) {
			c := cases[i]
			cfg.progress("contended %s: %s (%s)", variant, c.library, c.setup)
			wl.procs = c.procs
			r, err = onFreshServerAt(ctx, cfg, scContended, c, wl, rtt)
			r.Variant = variant
		} else {
			c := etcd[i-len(cases)]
			cfg.progress("contended: %s (%s)", libEtcd, c.setup)
			wl.procs = c.procs
			r, err = onFreshEtcd(ctx, cfg, scContended, c, wl)
		}
		if err != nil {
			return r, err
		}
		if r.Ops > 0 {
			cycle := time.Duration(r.Seconds / float64(r.Ops) * float64(time.Second))
			r.FIFOBound = time.Duration(cfg.workers) * cycle
			r.Extra = append(r.Extra, cycleNote("mean cycle", cycle, r))
		}
		return r, nil
	})
}

// wantLib reports whether the flags ask for library's rows.
func (cfg *config) wantLib(library string) bool {
	return cfg.libs == nil || cfg.libs[library]
}
