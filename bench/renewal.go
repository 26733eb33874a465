package main

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/bsm/redislock"
	"github.com/go-redsync/redsync/v4"
	rsredis "github.com/go-redsync/redsync/v4/redis"
	rsgoredis "github.com/go-redsync/redsync/v4/redis/goredis/v9"
	"github.com/padlockgo/padlock"
	"github.com/redis/go-redis/v9"
)

// acquirers is how many goroutines take (and let go of) the held locks;
// takeTries bounds the attempts for one.
const (
	acquirers = 16
	takeTries = 5
)

// forEach runs f(i) for i in [0, n) on acquirers goroutines and returns the
// first error.
func forEach(n int, f func(i int) error) error {
	var (
		next  atomic.Int64
		first error
		once  sync.Once
		wg    sync.WaitGroup
	)
	for range acquirers {
		wg.Go(func() {
			for {
				i := int(next.Add(1) - 1)
				if i >= n {
					return
				}
				if err := f(i); err != nil {
					once.Do(func() { first = err })
					return
				}
			}
		})
	}
	wg.Wait()
	return first
}

// holder holds cfg.locks locks on one server for one library and keeps them
// renewed its own way.
type holder interface {
	// start prepares renewing, before the first take; renewals counts
	// the renewals sent. A holder that leaves renewals at zero renews by
	// pipeline, and each pipelined command is one renewal.
	start(ctx context.Context, renewals *atomic.Int64)
	// take acquires lock i and starts renewing it.
	take(ctx context.Context, i int, key string) error
	// lost counts the locks no longer held.
	lost() int
	// release lets every lock go and stops the renewals.
	release(ctx context.Context)
}

func runRenewal(ctx context.Context, cfg *config) ([]result, error) {
	type rcase struct {
		library, setup string
		peer           bool
		window         time.Duration
		locks          int
		ttl            time.Duration
		atScale        bool
		masters        int // on a Cluster of this many masters (0: one server)
		build          func(c redis.UniversalClient) holder
	}
	all := []rcase{{libPadlock, fmt.Sprintf("%d locks, TTL %v, watchdog renews every TTL/3, 1 Locker", cfg.locks, cfg.renewTTL), false, cfg.renewWindow,
		cfg.locks, cfg.renewTTL, false, 0, func(c redis.UniversalClient) holder { return newPadlockHolder(c, cfg.locks, cfg.renewTTL) }}}
	if cfg.renewPeers && !cfg.skipPeers {
		all = append(all,
			rcase{libRedsync, fmt.Sprintf("expiry %v, ExtendContext every TTL/3, goroutine per lock", cfg.renewTTL), true, cfg.renewWindow,
				cfg.locks, cfg.renewTTL, false, 0, func(c redis.UniversalClient) holder { return newRedsyncHolder(c.(*redis.Client), cfg) }},
			rcase{libRedislock, fmt.Sprintf("TTL %v, Refresh every TTL/3, goroutine per lock", cfg.renewTTL), true, cfg.renewWindow,
				cfg.locks, cfg.renewTTL, false, 0, func(c redis.UniversalClient) holder { return newRedislockHolder(c.(*redis.Client), cfg) }},
		)
	}
	if n := cfg.renewScale; n > 0 {
		ttl := cfg.renewScaleTTL
		all = append(all, rcase{libPadlock, fmt.Sprintf("%d locks, TTL %v, watchdog renews every TTL/3, 1 Locker", n, ttl), false, max(cfg.renewWindow, ttl/3+5*time.Second),
			n, ttl, true, 0, func(c redis.UniversalClient) holder { return newPadlockHolder(c, n, ttl) }})
	}
	if n := cfg.renewScale; n > 0 && !cfg.skipPeers {
		ttl := cfg.renewScaleTTL
		all = append(all, rcase{libFloor, fmt.Sprintf("%d keys, TTL %v, bare PEXPIRE every TTL/3 in pipelines of %d, one after another, no owner check", n, ttl, renewBatch), false, max(cfg.renewWindow, ttl/3+5*time.Second),
			n, ttl, true, 0, func(c redis.UniversalClient) holder { return newFloorHolder(c, n, ttl) }})
	}
	if m := cfg.renewCluster; m > 0 {
		n, ttl, window := cfg.locks, cfg.renewTTL, cfg.renewWindow
		if cfg.renewScale > 0 {
			n, ttl, window = cfg.renewScale, cfg.renewScaleTTL, max(cfg.renewWindow, cfg.renewScaleTTL/3+5*time.Second)
		}
		all = append(all, rcase{libPadlock, fmt.Sprintf("%d locks, TTL %v, watchdog renews every TTL/3, 1 Locker, Cluster of %d masters", n, ttl, m), false, window,
			n, ttl, false, m, func(c redis.UniversalClient) holder { return newPadlockHolder(c, n, ttl) }})
	}
	var cases []rcase
	for _, c := range all {
		if cfg.wantLib(c.library) {
			cases = append(cases, c)
		}
	}
	var out []result
	for _, c := range cases {
		cfg.progress("renewal: %s holds %d locks (%s)", c.library, c.locks, c.setup)
		r, err := renewOnFreshServer(ctx, cfg, c.build, c.locks, c.ttl, c.window, c.masters)
		if err != nil {
			return out, fmt.Errorf("renewal %s: %w", c.library, err)
		}
		r.Scenario, r.Library, r.Setup, r.Peer, r.atScale, r.Masters = scRenewal, c.library, c.setup, c.peer, c.atScale, c.masters
		out = append(out, r)
	}
	return out, nil
}

// renewOnFreshServer measures one renewal row on a server started for it,
// or on a Cluster of masters started for it (masters > 0). On a Cluster
// the other client pings the first master.
func renewOnFreshServer(ctx context.Context, cfg *config, build func(redis.UniversalClient) holder, locks int, ttl time.Duration, window time.Duration, masters int) (result, error) {
	settleBeforeRow(ctx, cfg)
	var (
		servers []*server
		err     error
		client  redis.UniversalClient
	)
	hook := &roundTrips{}
	if masters > 0 {
		servers, err = cfg.launcher.startCluster(ctx, masters)
	} else {
		servers, err = cfg.launcher.start(ctx, 1)
	}
	if err != nil {
		return result{}, err
	}
	for _, s := range servers {
		defer cfg.launcher.stop(s)
	}
	if masters > 0 {
		client = newClusterClient(servers, hook, 64)
	} else {
		client = newClient(servers[0].addr, hook, 64)
	}
	defer client.Close()
	smp := newSampler(servers)
	defer smp.close()

	// Another client's latency, with nothing but the probe running and
	// then while the locks are renewed.
	probe, err := newProbe(servers[0].addr)
	if err != nil {
		return result{}, err
	}
	defer probe.close()
	idle, err := probe.run(ctx, probeIdle)
	if err != nil {
		return result{}, err
	}
	heap0 := heapInUse()

	h := build(client)
	var renewals atomic.Int64
	defer h.release(context.WithoutCancel(ctx))
	h.start(ctx, &renewals)
	takeStart := time.Now()
	if err := forEach(locks, func(i int) error {
		// A loaded machine can fail a take (redsync gives SET NX 5% of
		// the expiry): try again, a few times, before giving up the row.
		var err error
		for range takeTries {
			if err = h.take(ctx, i, heldKey(i)); err == nil || ctx.Err() != nil {
				break
			}
		}
		return err
	}); err != nil {
		return result{}, err
	}
	took := time.Since(takeStart)
	perLock := float64(heapInUse()-heap0) / float64(locks)
	if cfg.memProfile != "" {
		if err := writeHeapProfile(cfg.memProfile); err != nil {
			return result{}, err
		}
	}
	// Let the first renewals go out, so the window sees the steady state.
	if !sleepCtx(ctx, ttl*2/3) {
		return result{}, ctx.Err()
	}
	before, err := smp.sample(ctx)
	if err != nil {
		return result{}, err
	}
	hook.slowest.Store(0)
	if _, err := probe.mark(); err != nil {
		return result{}, err
	}
	h0, m0, n0, t0 := hook.load(), markCPU(), renewals.Load(), time.Now()
	// Watch for lost locks while the window runs, to say when they went.
	var firstLoss time.Duration
	watch := time.NewTicker(100 * time.Millisecond)
	for end := t0.Add(window); time.Now().Before(end); {
		select {
		case <-ctx.Done():
			watch.Stop()
			return result{}, ctx.Err()
		case <-watch.C:
		}
		if firstLoss == 0 && h.lost() > 0 {
			firstLoss = time.Since(t0)
		}
	}
	watch.Stop()
	h1, m1, n1, t1 := hook.load(), markCPU(), renewals.Load(), time.Now()
	during, err := probe.mark()
	if err != nil {
		return result{}, err
	}
	after, err := smp.sample(ctx)
	if err != nil {
		return result{}, err
	}
	hc := h1.sub(h0)
	r := result{Workers: locks, Seconds: t1.Sub(t0).Seconds(), Ops: n1 - n0, Violations: int64(h.lost())}
	if r.Ops == 0 {
		r.Ops = hc.piped
	}
	d := diff(before, after)
	cpu := m1.self - m0.self
	fillCounts(&r, hc, d, cpu)
	r.OtherLoad, _ = otherLoad(m0, m1, d.cpu)
	secs := r.Seconds
	tick := ttl / 3
	r.PipelinesPerTick = float64(hc.pipelines) / secs * tick.Seconds()
	r.OtherRoundTrips = hc.commands + d.pubsub
	r.Extra = append(r.Extra,
		fmt.Sprintf("%.0f round trips/s", float64(hc.commands+hc.pipelines+d.pubsub)/secs),
		fmt.Sprintf("%.2f pipelines per %v tick", r.PipelinesPerTick, tick),
		fmt.Sprintf("%.0f commands/s", float64(d.commands)/secs),
		fmt.Sprintf("client CPU %.1f%%", 100*cpu.Seconds()/secs),
		fmt.Sprintf("redis CPU %.1f%%", 100*d.cpu.Seconds()/secs),
		fmt.Sprintf("%d locks taken in %v", locks, took.Round(time.Millisecond)),
	)
	r.ProbeIdleP99, r.ProbeP99, r.BytesPerLock = idle, during, perLock
	r.Extra = append(r.Extra, fmt.Sprintf("another client's PING p99 %v during renewal, %v idle", us(during), us(idle)),
		fmt.Sprintf("client heap %.0f B per held lock", perLock))
	if hc.pipelines > 0 {
		r.SlowestBatch = time.Duration(hook.slowest.Load())
		r.Extra = append(r.Extra, fmt.Sprintf("%.0f renewals per pipeline, slowest pipeline %v", float64(hc.piped)/float64(hc.pipelines),
			r.SlowestBatch.Round(100*time.Microsecond)))
	}
	if r.Violations > 0 {
		r.Extra = append(r.Extra, fmt.Sprintf("%d locks lost, the first %v into the window", r.Violations, firstLoss.Round(100*time.Millisecond)))
	}
	return r, nil
}

// heldKey names the i-th held lock's key.
func heldKey(i int) string { return "bench:held:" + strconv.Itoa(i) }

// ---- padlock: the watchdog renews in pipelined batches ------------------

type padlockHolder struct {
	locker *padlock.Locker
	ttl    time.Duration
	locks  []*padlock.Lock
	losses *lossCounter
}

func newPadlockHolder(c redis.UniversalClient, locks int, ttl time.Duration) *padlockHolder {
	losses := &lossCounter{}
	return &padlockHolder{locker: newLocker(c, padlock.WithObserver(losses)), ttl: ttl, locks: make([]*padlock.Lock, locks), losses: losses}
}

// lossCounter counts the locks the Locker reports lost, so that the window
// loop learns of losses without looking at every lock (at a million locks,
// asking each one's Err every 100ms takes a CPU). Every other event costs
// it a call that does nothing.
type lossCounter struct {
	padlock.NopObserver
	n atomic.Int64
}

func (o *lossCounter) LockLost(padlock.LockLostEvent) { o.n.Add(1) }

func (p *padlockHolder) take(ctx context.Context, i int, key string) error {
	lk, err := p.locker.Acquire(ctx, key, padlock.Options{TTL: p.ttl})
	p.locks[i] = lk
	return err
}

// start has nothing to do: the watchdog renews from the first Acquire on.
// Its renewals are the commands it pipelines, counted by the run's hook.
func (p *padlockHolder) start(context.Context, *atomic.Int64) {}

// lost counts the locks the observer heard were lost. A lock is lost
// when its Done closes (Lock.Err may say so a moment before the watchdog
// wakes to close it), so the count can trail Err by one watchdog tick.
// Locks not taken at all fail the row in take.
func (p *padlockHolder) lost() int { return int(p.losses.n.Load()) }

func (p *padlockHolder) release(ctx context.Context) {
	_ = forEach(len(p.locks), func(i int) error {
		_ = p.locks[i].Release(ctx) // safe on nil
		return nil
	})
	p.locker.Close()
}

// ---- peers: one goroutine per lock extends it every TTL/3 ---------------

// tickers runs one renewal loop per lock, each started when its lock was
// taken, until stop.
type tickers struct {
	ttl      time.Duration
	ctx      context.Context
	cancel   context.CancelFunc
	renewals *atomic.Int64
	wg       sync.WaitGroup
	failed   atomic.Int64 // locks whose extension failed: lost
}

func (t *tickers) start(ctx context.Context, renewals *atomic.Int64) {
	t.ctx, t.cancel = context.WithCancel(ctx)
	t.renewals = renewals
}

// spawn renews one lock every TTL/3 with extend.
func (t *tickers) spawn(extend func(ctx context.Context) error) {
	t.wg.Go(func() {
		tk := time.NewTicker(t.ttl / 3)
		defer tk.Stop()
		for {
			select {
			case <-t.ctx.Done():
				return
			case <-tk.C:
			}
			t.renewals.Add(1) // when sent, as the round-trip hook counts it
			if err := extend(t.ctx); err != nil {
				if t.ctx.Err() == nil {
					t.failed.Add(1)
				}
				return
			}
		}
	})
}

func (t *tickers) stop() {
	if t.cancel != nil {
		t.cancel()
	}
	t.wg.Wait()
}

type redsyncHolder struct {
	rs      *redsync.Redsync
	ttl     time.Duration
	mutexes []*redsync.Mutex
	t       tickers
}

func newRedsyncHolder(c *redis.Client, cfg *config) *redsyncHolder {
	return &redsyncHolder{
		rs:      redsync.New([]rsredis.Pool{rsgoredis.NewPool(c)}...),
		ttl:     cfg.renewTTL,
		mutexes: make([]*redsync.Mutex, cfg.locks),
		t:       tickers{ttl: cfg.renewTTL},
	}
}

func (h *redsyncHolder) take(ctx context.Context, i int, key string) error {
	m := h.rs.NewMutex(key, redsync.WithExpiry(h.ttl), redsync.WithTries(1))
	if err := m.LockContext(ctx); err != nil {
		return err
	}
	h.mutexes[i] = m
	h.t.spawn(func(ctx context.Context) error {
		ok, err := m.ExtendContext(ctx)
		if err == nil && !ok {
			err = errors.New("redsync: not extended")
		}
		return err
	})
	return nil
}

func (h *redsyncHolder) start(ctx context.Context, renewals *atomic.Int64) { h.t.start(ctx, renewals) }

func (h *redsyncHolder) lost() int { return int(h.t.failed.Load()) }

func (h *redsyncHolder) release(ctx context.Context) {
	h.t.stop()
	_ = forEach(len(h.mutexes), func(i int) error {
		if m := h.mutexes[i]; m != nil {
			_, _ = m.UnlockContext(ctx)
		}
		return nil
	})
}

type redislockHolder struct {
	c     *redislock.Client
	ttl   time.Duration
	locks []*redislock.Lock
	t     tickers
}

func newRedislockHolder(c *redis.Client, cfg *config) *redislockHolder {
	return &redislockHolder{c: redislock.New(c), ttl: cfg.renewTTL, locks: make([]*redislock.Lock, cfg.locks), t: tickers{ttl: cfg.renewTTL}}
}

func (h *redislockHolder) take(ctx context.Context, i int, key string) error {
	lk, err := h.c.Obtain(ctx, key, h.ttl, nil)
	if err != nil {
		return err
	}
	h.locks[i] = lk
	h.t.spawn(func(ctx context.Context) error { return lk.Refresh(ctx, h.ttl, nil) })
	return nil
}

func (h *redislockHolder) start(ctx context.Context, renewals *atomic.Int64) {
	h.t.start(ctx, renewals)
}

func (h *redislockHolder) lost() int { return int(h.t.failed.Load()) }

func (h *redislockHolder) release(ctx context.Context) {
	h.t.stop()
	_ = forEach(len(h.locks), func(i int) error {
		if lk := h.locks[i]; lk != nil {
			_ = lk.Release(ctx)
		}
		return nil
	})
}
