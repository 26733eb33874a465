package main

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/go-redsync/redsync/v4"
	"github.com/padlockgo/padlock"
	"github.com/redis/go-redis/v9"
)

// startRedlockServers starts the Redlock nodes at the beginning of the run:
// padlock counts a node's votes only once it has been up for the max lease
// (its delayed-restart rule), so they must be old enough by the time the
// scenario runs.
func startRedlockServers(ctx context.Context, cfg *config) error {
	servers, err := cfg.launcher.start(ctx, cfg.nodes)
	if err != nil {
		return err
	}
	cfg.redlockServer = servers
	return nil
}

func runRedlock(ctx context.Context, cfg *config) ([]result, error) {
	servers := cfg.redlockServer
	// INFO's uptime is in whole seconds: wait a second more.
	oldest := servers[0].started
	for _, s := range servers {
		if s.started.After(oldest) {
			oldest = s.started
		}
	}
	if d := time.Until(oldest.Add(cfg.redlockTTL + 1500*time.Millisecond)); d > 0 {
		cfg.progress("redlock: waiting %v until the nodes have been up for the max lease", d.Round(100*time.Millisecond))
		if !sleepCtx(ctx, d) {
			return nil, ctx.Err()
		}
	}
	smp := newSampler(servers)
	defer smp.close()
	ttl := cfg.redlockTTL
	single := fmt.Sprintf("1 node, TTL %v", ttl)
	quorum := fmt.Sprintf("%d nodes, TTL %v", len(servers), ttl)
	type rcase struct {
		library, setup string
		peer           bool
		nodes          int
		build          func(nodes []redis.UniversalClient) (contender, error)
	}
	cases := []rcase{
		{libPadlock, "New, " + single, false, 1, func(n []redis.UniversalClient) (contender, error) {
			return &padlockLib{lockers: []*padlock.Locker{newLocker(n[0])}, opts: padlock.Options{TTL: ttl}}, nil
		}},
		{libPadlock, "NewRedlock, WithMaxLease(TTL), " + quorum, false, len(servers), func(n []redis.UniversalClient) (contender, error) {
			l, err := padlock.NewRedlock(n, padlock.WithMaxLease(ttl))
			if err != nil {
				return nil, err
			}
			return &padlockLib{lockers: []*padlock.Locker{l}, opts: padlock.Options{TTL: ttl}}, nil
		}},
	}
	if !cfg.skipPeers {
		cases = append(cases,
			rcase{libRedsync, "1 pool, WithExpiry(TTL), " + single, true, 1, func(n []redis.UniversalClient) (contender, error) {
				return newRedsync([][]redis.UniversalClient{n}, redsync.WithExpiry(ttl)), nil
			}},
			rcase{libRedsync, fmt.Sprintf("%d pools, WithExpiry(TTL), ", len(servers)) + quorum, true, len(servers), func(n []redis.UniversalClient) (contender, error) {
				return newRedsync([][]redis.UniversalClient{n}, redsync.WithExpiry(ttl)), nil
			}},
		)
	}
	cases = slices.DeleteFunc(cases, func(c rcase) bool { return !cfg.wantLib(c.library) })
	nets := []time.Duration{0}
	if cfg.redlockRTT > 0 {
		nets = append(nets, cfg.redlockRTT)
	}
	var out []result
	for _, rtt := range nets {
		network := ""
		addrs := make([]string, len(servers))
		for i, s := range servers {
			addrs[i] = s.addr
		}
		var px proxies
		if rtt > 0 {
			network = fmt.Sprintf("+%v RTT (delay proxy)", rtt)
			for i := range addrs {
				p, err := startDelayProxy(addrs[i], rtt)
				if err != nil {
					px.close()
					return out, err
				}
				px = append(px, p)
				addrs[i] = p.addr
			}
		}
		rs, err := inRounds(cfg.rounds, len(cases), func(i int) (result, error) {
			c := cases[i]
			cfg.progress("redlock: %s (%s) %s", c.library, c.setup, network)
			if err := smp.reset(ctx); err != nil {
				return result{}, err
			}
			settleBeforeRow(ctx, cfg)
			hook := &roundTrips{}
			clients := make([]redis.UniversalClient, c.nodes)
			for i := range clients {
				// NewRedlock needs context deadlines to reach the socket.
				cl := redis.NewClient(&redis.Options{Addr: addrs[i], ContextTimeoutEnabled: true})
				cl.AddHook(hook)
				clients[i] = cl
			}
			defer func() {
				for _, cl := range clients {
					cl.Close()
				}
			}()
			lib, err := c.build(clients)
			if err != nil {
				return result{}, fmt.Errorf("redlock %s: %w", c.library, err)
			}
			r, err := measureVia(ctx, lib, hook, smp, px.first(c.nodes), workload{
				workers: 1,
				key:     func(int) string { return "bench:redlock" },
				warmup:  cfg.warmup,
				window:  cfg.window,
			})
			lib.close()
			if err != nil {
				return result{}, fmt.Errorf("redlock %s: %w", c.library, err)
			}
			r.Scenario, r.Library, r.Setup, r.Peer, r.Variant, r.Nodes, r.RTT = scRedlock, c.library, c.setup, c.peer, network, c.nodes, rtt
			return r, nil
		})
		px.close()
		out = append(out, rs...)
		if err != nil {
			return out, err
		}
	}
	if cfg.procs > 1 {
		rs, err := runRedlockFleet(ctx, cfg, smp)
		out = append(out, rs...)
		if err != nil {
			return out, err
		}
	}
	return out, nil
}

// runRedlockFleet measures one key, contended as in the contended
// scenario (cfg.workers goroutines, each holding it cfg.hold), on the
// Redlock nodes, by cfg.procs processes: padlock's Redlock Lockers, each
// with clients of its own, and redsync's best polling setup with as many
// clients. A Redlock Locker makes no grants at release: a release's
// notice wakes one waiter per Locker, which tries (docs/redlock.md).
func runRedlockFleet(ctx context.Context, cfg *config, smp *sampler) ([]result, error) {
	servers := cfg.redlockServer
	ttl, procs := cfg.redlockTTL, cfg.procs
	variant := fmt.Sprintf("one key, %d goroutines on %d processes, hold %v", cfg.workers, procs, cfg.hold)
	pollTries := max(int(cfg.wait/cfg.poll), 1)
	type fcase struct {
		library, setup string
		peer           bool
		build          func(perProc [][]redis.UniversalClient) (contender, error)
	}
	cases := []fcase{
		{libPadlock, fmt.Sprintf("NewRedlock, Wait %v, %d Lockers", cfg.wait, procs), false, func(pp [][]redis.UniversalClient) (contender, error) {
			lib := &padlockLib{opts: padlock.Options{TTL: ttl, Wait: cfg.wait}}
			for _, nodes := range pp {
				l, err := padlock.NewRedlock(nodes, padlock.WithMaxLease(ttl))
				if err != nil {
					lib.close()
					return nil, err
				}
				lib.lockers = append(lib.lockers, l)
			}
			return lib, nil
		}},
	}
	if !cfg.skipPeers {
		cases = append(cases, fcase{libRedsync, fmt.Sprintf("WithExpiry(TTL), WithRetryDelay(%v), WithTries(%d), %d clients", cfg.poll, pollTries, procs), true,
			func(pp [][]redis.UniversalClient) (contender, error) {
				return newRedsync(pp, redsync.WithExpiry(ttl), redsync.WithRetryDelay(cfg.poll), redsync.WithTries(pollTries)), nil
			}})
	}
	cases = slices.DeleteFunc(cases, func(c fcase) bool { return !cfg.wantLib(c.library) })
	return inRounds(cfg.rounds, len(cases), func(i int) (result, error) {
		c := cases[i]
		cfg.progress("redlock: %s (%s) %s", c.library, c.setup, variant)
		if err := smp.reset(ctx); err != nil {
			return result{}, err
		}
		settleBeforeRow(ctx, cfg)
		hook := &roundTrips{}
		perProc := make([][]redis.UniversalClient, procs)
		for p := range perProc {
			for _, s := range servers {
				cl := redis.NewClient(&redis.Options{Addr: s.addr, ContextTimeoutEnabled: true})
				cl.AddHook(hook)
				perProc[p] = append(perProc[p], cl)
			}
		}
		defer func() {
			for _, nodes := range perProc {
				for _, cl := range nodes {
					cl.Close()
				}
			}
		}()
		lib, err := c.build(perProc)
		if err != nil {
			return result{}, fmt.Errorf("redlock %s: %w", c.library, err)
		}
		r, err := measure(ctx, lib, hook, smp, workload{
			procs:   procs,
			workers: cfg.workers,
			think:   cfg.think,
			key:     func(int) string { return "bench:redlock:contended" },
			hold:    cfg.hold,
			wait:    true,
			warmup:  max(cfg.warmup, time.Second),
			window:  cfg.window,
		})
		lib.close()
		if err != nil {
			return result{}, fmt.Errorf("redlock %s: %w", c.library, err)
		}
		r.Scenario, r.Library, r.Setup, r.Peer, r.Variant, r.Nodes = scRedlock, c.library, c.setup, c.peer, variant, len(servers)
		if r.Ops > 0 {
			cycle := time.Duration(r.Seconds / float64(r.Ops) * float64(time.Second))
			r.FIFOBound = time.Duration(cfg.workers) * cycle
			r.Extra = append(r.Extra, cycleNote("mean cycle", cycle, r))
		}
		return r, nil
	})
}
