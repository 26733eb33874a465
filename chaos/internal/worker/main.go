// Command worker is one contender of the chaos suite: a process that takes
// a padlock lock on a key again and again, does its work under it and
// writes to the fenced store with the lock's fence, recording every step
// (see package record) so the suite can check what happened when it
// paused, killed or starved the worker or the Redis servers under it.
//
// Each iteration: Acquire (waiting up to -wait); claim the store with the
// fence (a first write, as the example app claims an order); work for
// -hold, stopping early if the lock's context ends; read the store; write
// the result with the fence; Release. With -check-ctx (the default) the
// worker skips a write once its lock's context has ended, as a correct
// user does; -check-ctx=false writes anyway, leaving it to the fence.
//
// With -goroutines N, N such contenders run in the process, sharing its
// Locker, each recording under its own worker id.
//
// While a worker holds a lock, a sampler polls the lock's Err() every
// millisecond and records the last time it was nil (record.HeldSample):
// the suite checks that no two locks reported held at once. With -extend
// the holder also calls Extend twice at once, again and again, with TTLs
// picked from the list, racing the watchdog. -fair makes every Acquire
// fair. -primitive semaphore takes permits of a semaphore of -permits
// instead of the lock, and -primitive rwlock read holds (-reads percent of
// the iterations, which only read the store) or write holds. SIGUSR1 closes the Locker under the workers; each stops once its
// Acquire says the Locker is closed.
//
// The worker runs at most -iterations iterations and stops after
// -duration, whichever comes first, or at SIGTERM once the iteration under
// way is done.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"os/signal"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/padlockgo/padlock"
	"github.com/padlockgo/padlock/chaos/internal/fenced"
	"github.com/padlockgo/padlock/chaos/internal/record"
)

type flags struct {
	id         int
	mode       string
	addrs      string
	master     string
	key        string
	ttl        time.Duration
	wait       time.Duration
	hold       time.Duration
	gap        time.Duration
	iterations int
	duration   time.Duration
	store      string
	out        string
	checkCtx   bool
	spin       int
	replicaAck int
	ackTimeout time.Duration
	maxLease   time.Duration
	nodeTO     time.Duration
	goroutines int
	fair       bool
	extends    []time.Duration
	retries    int
	primitive  string // lock, multi, election, semaphore or rwlock
	permits    int    // semaphore: permits per key
	reads      int    // rwlock: percent of iterations that read
}

func main() {
	var f flags
	flag.IntVar(&f.id, "id", 0, "worker id, recorded with every event")
	flag.StringVar(&f.mode, "mode", "single", "single | redlock | sentinel | cluster")
	flag.StringVar(&f.addrs, "addrs", "", "comma-separated Redis addresses (sentinel: the sentinels')")
	flag.StringVar(&f.master, "master", "mymaster", "sentinel: the master's name")
	flag.StringVar(&f.key, "key", "chaos", "the lock key, also the store register; several, comma-separated: the g-th goroutine takes the (g mod n)-th")
	flag.DurationVar(&f.ttl, "ttl", time.Second, "lock lease")
	flag.DurationVar(&f.wait, "wait", 5*time.Second, "how long Acquire waits")
	flag.DurationVar(&f.hold, "hold", 200*time.Millisecond, "work time under the lock")
	flag.DurationVar(&f.gap, "gap", 5*time.Millisecond, "at most this long (random) between a release and the next Acquire")
	flag.IntVar(&f.iterations, "iterations", 1000, "at most this many iterations")
	flag.DurationVar(&f.duration, "duration", 10*time.Second, "stop after this long")
	flag.StringVar(&f.store, "store", "", "fenced store URL")
	flag.StringVar(&f.out, "out", "", "file to append the record to")
	flag.BoolVar(&f.checkCtx, "check-ctx", true, "skip writes once the lock's context ended")
	flag.IntVar(&f.spin, "spin", 0, "goroutines that burn CPU for the whole run (watchdog starvation)")
	flag.IntVar(&f.replicaAck, "replica-ack", 0, "sentinel/single: WithReplicaAck replicas (0: off)")
	flag.DurationVar(&f.ackTimeout, "ack-timeout", 200*time.Millisecond, "WithReplicaAck timeout")
	flag.DurationVar(&f.maxLease, "max-lease", 0, "redlock: WithMaxLease (0: the TTL)")
	flag.DurationVar(&f.nodeTO, "node-timeout", 250*time.Millisecond, "redlock: WithNodeTimeout")
	flag.IntVar(&f.goroutines, "goroutines", 1, "workers in this process, sharing its Locker; the g-th (from 0) records as id+g*"+strconv.Itoa(record.GoroutineStride))
	flag.BoolVar(&f.fair, "fair", false, "Options.Fair")
	flag.IntVar(&f.retries, "redis-retries", -1, "go-redis MaxRetries (single): -1 sends each command once, so a fault shows; go-redis's default is 3")
	flag.StringVar(&f.primitive, "primitive", "lock", "lock | multi (AcquireAll on every -key, listed in this worker's own order) | election (Campaign on the key; a term is a critical section) | semaphore (-permits per key) | rwlock (-reads percent readers, the rest writers)")
	flag.IntVar(&f.permits, "permits", 2, "semaphore: permits per key")
	flag.IntVar(&f.reads, "reads", 75, "rwlock: percent of iterations that take a read hold")
	var extends string
	flag.StringVar(&extends, "extend", "", "comma-separated TTLs: while holding, call Extend twice at once with TTLs picked from these, again and again, racing each other and the watchdog")
	flag.Parse()
	for _, v := range strings.Split(extends, ",") {
		if v == "" {
			continue
		}
		d, err := time.ParseDuration(v)
		if err != nil {
			fmt.Fprintf(os.Stderr, "worker %d: -extend %q: %v\n", f.id, v, err)
			os.Exit(2)
		}
		f.extends = append(f.extends, d)
	}
	if err := run(f); err != nil {
		fmt.Fprintf(os.Stderr, "worker %d: %v\n", f.id, err)
		os.Exit(1)
	}
}

func run(f flags) error {
	if f.out == "" || f.store == "" || f.addrs == "" {
		return errors.New("-out, -store and -addrs are required")
	}
	rec, err := record.Create(f.out, f.id)
	if err != nil {
		return err
	}
	defer rec.Close()

	locker, closeRedis, err := newLocker(f)
	if err != nil {
		return err
	}
	defer closeRedis()
	defer locker.Close()

	// SIGTERM ends the run after the current iteration: the lock held
	// then is released as usual.
	ctx, cancel := context.WithTimeout(context.Background(), f.duration)
	defer cancel()
	ctx, stop := signal.NotifyContext(ctx, syscall.SIGTERM, os.Interrupt)
	defer stop()
	for range f.spin {
		go burn(ctx)
	}
	if f.spin > 0 {
		go meterCPU(ctx, rec)
	}
	// SIGUSR1 closes the Locker under the workers, waiters and holder
	// alike; each worker stops once Acquire says the Locker is closed.
	usr1 := make(chan os.Signal, 1)
	signal.Notify(usr1, syscall.SIGUSR1)
	defer signal.Stop(usr1)
	var closer sync.WaitGroup
	defer closer.Wait()
	closeCtx, stopCloser := context.WithCancel(ctx)
	defer stopCloser()
	closer.Go(func() {
		select {
		case <-usr1:
			rec.Add(record.Event{Kind: record.Closed})
			_ = locker.Close()
		case <-closeCtx.Done():
		}
	})
	// Several goroutines in one process share its Locker, as the handlers
	// of one service do: the Locker hands the lock from one to the next.
	var wg sync.WaitGroup
	for g := range max(f.goroutines, 1) {
		keys := strings.Split(f.key, ",")
		w := &worker{f: f, key: keys[g%len(keys)], keys: keys, rec: rec.As(f.id + g*record.GoroutineStride), locker: locker,
			store: fenced.Client{Base: f.store, HTTP: &http.Client{Timeout: 2 * time.Second}}}
		if f.primitive == "semaphore" {
			if w.sem, err = locker.Semaphore(f.permits); err != nil {
				return err
			}
		}
		wg.Go(func() {
			w.rec.Add(record.Event{Kind: record.Start})
			for n := 0; n < f.iterations && ctx.Err() == nil; n++ {
				if !w.iteration(ctx, n) {
					break
				}
				sleep(ctx, time.Duration(rand.Int64N(int64(f.gap)+1)))
			}
			w.rec.Add(record.Event{Kind: record.Exit})
		})
	}
	wg.Wait()
	return nil
}

// burn spins until ctx ends, taking a CPU from whatever else the process
// would run: with GOMAXPROCS=1, the watchdog.
func burn(ctx context.Context) {
	x := uint64(1)
	for i := 0; i&0xfffff != 0 || ctx.Err() == nil; i++ {
		x = x*6364136223846793005 + 1442695040888963407
	}
	runtime.KeepAlive(x)
}

// meterCPU records when the machine withholds the CPU the process's
// spinning goroutines ask for: every 50ms it compares the process's CPU
// time (user and system, every thread) with the time passed, and records
// a record.Starved span when the process ran less than a third of it.
// At GOMAXPROCS=1 with goroutines that never stop, a process the
// operating system serves runs the whole time (two thirds of it when the
// suite's three spinning workers share two CPUs); one that runs less than
// a third shares its CPU with many other processes, which no lock design
// can help.
func meterCPU(ctx context.Context, rec *record.Writer) {
	t := time.NewTicker(50 * time.Millisecond)
	defer t.Stop()
	wall, cpu := record.Now(), processCPU()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		nowWall, nowCPU := record.Now(), processCPU()
		if nowCPU < 0 || cpu < 0 {
			return // no CPU clock: nothing to say
		}
		if 3*(nowCPU-cpu) < nowWall-wall {
			rec.Add(record.Event{Kind: record.Starved, T0: wall, T: nowWall})
		}
		wall, cpu = nowWall, nowCPU
	}
}

// processCPU is the CPU time the process has used, in nanoseconds, or -1
// when the system does not say.
func processCPU() int64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return -1
	}
	return ru.Utime.Nano() + ru.Stime.Nano()
}

func newLocker(f flags) (*padlock.Locker, func(), error) {
	addrs := strings.Split(f.addrs, ",")
	defaults := padlock.WithDefaults(padlock.Options{TTL: f.ttl})
	opts := []padlock.LockerOption{defaults}
	switch f.mode {
	case "single":
		o := clientOptions(addrs[0])
		o.MaxRetries = f.retries
		c := redis.NewClient(o)
		if f.replicaAck > 0 {
			opts = append(opts, padlock.WithReplicaAck(f.replicaAck, f.ackTimeout))
		}
		return lockerOn(c, opts...)
	case "sentinel":
		c := redis.NewFailoverClient(&redis.FailoverOptions{
			MasterName:            f.master,
			SentinelAddrs:         addrs,
			DialTimeout:           time.Second,
			DialerRetries:         1,
			ReadTimeout:           time.Second,
			WriteTimeout:          time.Second,
			PoolTimeout:           2 * time.Second,
			MaxRetries:            -1,
			ContextTimeoutEnabled: true,
		})
		if f.replicaAck > 0 {
			opts = append(opts, padlock.WithReplicaAck(f.replicaAck, f.ackTimeout))
		}
		return lockerOn(c, opts...)
	case "cluster":
		c := redis.NewClusterClient(&redis.ClusterOptions{
			Addrs:                 addrs,
			DialTimeout:           time.Second,
			DialerRetries:         1,
			ReadTimeout:           time.Second,
			WriteTimeout:          time.Second,
			PoolTimeout:           2 * time.Second,
			MaxRetries:            -1,
			ContextTimeoutEnabled: true,
		})
		return lockerOn(c, opts...)
	case "redlock":
		clients := make([]redis.UniversalClient, len(addrs))
		for i, a := range addrs {
			clients[i] = redis.NewClient(clientOptions(a))
		}
		maxLease := f.maxLease
		if maxLease == 0 {
			maxLease = f.ttl
		}
		l, err := padlock.NewRedlock(clients, defaults, padlock.WithMaxLease(maxLease), padlock.WithNodeTimeout(f.nodeTO))
		closeAll := func() {
			for _, c := range clients {
				_ = c.Close()
			}
		}
		if err != nil {
			closeAll()
			return nil, nil, err
		}
		return l, closeAll, nil
	}
	return nil, nil, fmt.Errorf("-mode %q: want single, redlock, sentinel or cluster", f.mode)
}

// lockerOn returns a Locker on c and what closes c; when New refuses c,
// it closes c and returns the error.
func lockerOn(c redis.UniversalClient, opts ...padlock.LockerOption) (*padlock.Locker, func(), error) {
	l, err := padlock.New(c, opts...)
	if err != nil {
		_ = c.Close()
		return nil, nil, err
	}
	return l, func() { _ = c.Close() }, nil
}

// clientOptions are short timeouts, one dial attempt and no retries, so a
// fault shows on the first command, as in the library's own tests, and
// ContextTimeoutEnabled, as padlock.New and NewRedlock require.
func clientOptions(addr string) *redis.Options {
	return &redis.Options{
		Addr:                  addr,
		DialTimeout:           time.Second,
		DialerRetries:         1,
		ReadTimeout:           time.Second,
		WriteTimeout:          time.Second,
		PoolTimeout:           2 * time.Second,
		MaxRetries:            -1,
		ContextTimeoutEnabled: true,
	}
}

type worker struct {
	f      flags
	sem    *padlock.Semaphore // -primitive semaphore
	key    string             // the lock key and store register of this worker
	keys   []string           // -multi: every key
	rec    *record.Writer
	locker *padlock.Locker
	store  fenced.Client
	op     int
}

// iteration runs one Acquire, critical section and Release; it reports
// false once the Locker is closed.
func (w *worker) iteration(ctx context.Context, n int) bool {
	call := record.Now()
	tk, err := w.take(ctx)
	if err != nil {
		w.rec.Add(record.Event{Kind: record.AcquireFailed, N: n, T0: call, Err: err.Error()})
		if errors.Is(err, padlock.ErrClosed) {
			return false
		}
		// Redis may be down or failing over: don't spin on it.
		sleep(ctx, 20*time.Millisecond+time.Duration(rand.Int64N(int64(30*time.Millisecond))))
		return true
	}
	lk := tk.h
	w.rec.Add(record.Event{Kind: record.Acquire, N: n, T0: call, Fence: tk.fence, Key: tk.key, Value: tk.role})
	held := w.sample(lk, n)
	defer held()
	stopExtends := func() {}
	if len(w.f.extends) > 0 && tk.lock != nil {
		stopExtends = w.extend(tk.lock, n)
	}

	// The lost signal is recorded the moment Done fires, from its own
	// goroutine, whatever the worker is doing then.
	var watch sync.WaitGroup
	watch.Go(func() {
		<-lk.Done()
		if errors.Is(lk.Err(), padlock.ErrLockLost) {
			w.rec.Add(record.Event{Kind: record.Lost, N: n})
		}
	})
	lctx := lk.Context(context.WithoutCancel(ctx))

	fence := tk.fence
	writes := tk.role != record.RoleRead // a reader only reads
	if writes {
		w.write(lctx, n, tk.key, fence, fmt.Sprintf("w%d-%d:claim", w.f.id, n))
	}
	for _, o := range tk.others {
		// The set's other keys, each with its own fence.
		w.write(lctx, n, o.key, o.fence, fmt.Sprintf("w%d-%d:claim", w.f.id, n))
	}
	if w.f.checkCtx {
		sleep(lctx, w.f.hold)
	} else {
		sleep(ctx, w.f.hold)
	}
	w.read(lctx, n, tk.key)
	if writes {
		w.write(lctx, n, tk.key, fence, fmt.Sprintf("w%d-%d:commit", w.f.id, n))
	}
	stopExtends()

	w.rec.Add(record.Event{Kind: record.Release, N: n})
	rctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	err = tk.release(rctx)
	cancel()
	e := record.Event{Kind: record.Released, N: n}
	if err != nil {
		e.Err = err.Error()
	}
	w.rec.Add(e)
	watch.Wait()
	return true
}

// acquireHold takes the semaphore permit or read-write hold that
// -primitive names, and says in what role (one of record's roles).
func (w *worker) acquireHold(ctx context.Context) (*padlock.Lock, string, error) {
	o := padlock.Options{Wait: w.f.wait, Fair: w.f.fair}
	if w.f.primitive == "semaphore" {
		lk, err := w.sem.Acquire(ctx, w.key, o)
		return lk, record.RolePermit, err
	}
	if rand.IntN(100) < w.f.reads {
		lk, err := w.locker.AcquireRead(ctx, w.key, o)
		return lk, record.RoleRead, err
	}
	lk, err := w.locker.AcquireWrite(ctx, w.key, o)
	return lk, record.RoleWrite, err
}

// sample polls lk.Err() every millisecond until it is not nil or the
// returned stop is called, and records the last time it was nil: at once
// the first time, then at least every 100ms, and when it ends. Each sample
// is stamped before Err is called, so the lock surely reported held then.
func (w *worker) sample(lk holding, n int) (stop func()) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		var last, flushed int64
		defer func() {
			if last > flushed {
				w.rec.Add(record.Event{Kind: record.HeldSample, N: n, T: last})
			}
		}()
		tick := time.NewTicker(time.Millisecond)
		defer tick.Stop()
		for {
			t := record.Now()
			if lk.Err() != nil {
				return
			}
			last = t
			if flushed == 0 || last-flushed >= int64(100*time.Millisecond) {
				w.rec.Add(record.Event{Kind: record.HeldSample, N: n, T: last})
				flushed = last
			}
			select {
			case <-done:
				return
			case <-tick.C:
			}
		}
	})
	return func() { close(done); wg.Wait() }
}

// extend calls lk.Extend twice at once, with TTLs picked from -extend,
// again and again until the returned stop is called: two Extends racing
// each other and the watchdog's renewal, as the docs allow.
func (w *worker) extend(lk *padlock.Lock, n int) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() {
		for ctx.Err() == nil && lk.Err() == nil {
			// A pause between pairs: a lease the pair left wrong in Redis
			// stays wrong until the next pair or renewal, long enough for
			// a waiter to find the key free.
			sleep(ctx, time.Duration(rand.Int64N(int64(50*time.Millisecond))))
			var pair sync.WaitGroup
			for range 2 {
				ttl := w.f.extends[rand.IntN(len(w.f.extends))]
				pair.Go(func() {
					ectx, ecancel := context.WithTimeout(ctx, 2*time.Second)
					sent := record.Now()
					err := lk.Extend(ectx, ttl)
					ecancel()
					e := record.Event{Kind: record.Extend, N: n, T0: sent, Value: ttl.String()}
					if err != nil {
						e.Err = err.Error()
					}
					w.rec.Add(e)
				})
			}
			pair.Wait()
		}
	})
	return func() { cancel(); wg.Wait() }
}

func (w *worker) write(lctx context.Context, n int, key string, fence int64, value string) {
	if w.f.checkCtx && lctx.Err() != nil {
		w.rec.Add(record.Event{Kind: record.Skip, N: n, Fence: fence, Value: value})
		return
	}
	w.op++
	op := w.op
	w.rec.Add(record.Event{Kind: record.Call, N: n, Op: op, Key: key, Write: true, Fence: fence, Value: value,
		CtxErr: lctx.Err() != nil})
	// The store call itself is not cut short by the lock's context: once
	// sent, a write is the fence's business.
	ok, err := w.store.Write(context.Background(), key, fence, value)
	e := record.Event{Kind: record.Return, N: n, Op: op, OK: ok}
	if err != nil {
		e.Err = err.Error()
	}
	w.rec.Add(e)
}

func (w *worker) read(lctx context.Context, n int, key string) {
	if w.f.checkCtx && lctx.Err() != nil {
		return
	}
	w.op++
	op := w.op
	w.rec.Add(record.Event{Kind: record.Call, N: n, Op: op, Key: key})
	fence, value, err := w.store.Read(context.Background(), key)
	e := record.Event{Kind: record.Return, N: n, Op: op, OK: err == nil, Fence: fence, Value: value}
	if err != nil {
		e.Err = err.Error()
	}
	w.rec.Add(e)
}

func sleep(ctx context.Context, d time.Duration) {
	if d <= 0 {
		return
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}

// holding is what a worker holds: a lock, a set of keys or a term.
type holding interface {
	Err() error
	Done() <-chan struct{}
	Context(parent context.Context) context.Context
}

// taken is what an iteration took: its critical section is recorded on
// key with fence; others are a set's other keys, written with their own
// fences.
type taken struct {
	h       holding
	lock    *padlock.Lock // -primitive lock only
	key     string
	fence   int64
	others  []keyFence
	release func(ctx context.Context) error
	role    string // semaphore and rwlock: record.RolePermit, RoleRead or RoleWrite
}

type keyFence struct {
	key   string
	fence int64
}

// take takes what -primitive names, waiting up to -wait.
func (w *worker) take(ctx context.Context) (taken, error) {
	switch w.f.primitive {
	case "multi":
		// Every worker lists the keys in its own order: odd ids backwards.
		keys := slices.Clone(w.keys)
		if len(keys) == 1 {
			keys = append(keys, keys[0]+":b")
		}
		if w.f.id%2 == 1 {
			slices.Reverse(keys)
		}
		m, err := w.locker.AcquireAll(ctx, keys, padlock.Options{Wait: w.f.wait})
		if err != nil {
			return taken{}, err
		}
		sorted := m.Keys()
		tk := taken{h: m, key: sorted[0], fence: m.Fence(sorted[0]), release: m.Release}
		for _, k := range sorted[1:] {
			tk.others = append(tk.others, keyFence{k, m.Fence(k)})
		}
		return tk, nil
	case "election":
		cctx, cancel := context.WithTimeout(ctx, w.f.wait)
		defer cancel()
		term, err := w.locker.Election(w.key, padlock.Options{}).Campaign(cctx, fmt.Sprintf("w%d", w.f.id))
		if err != nil {
			return taken{}, err
		}
		return taken{h: term, key: w.key, fence: term.Fence(), release: term.Resign}, nil
	case "semaphore", "rwlock":
		lk, role, err := w.acquireHold(ctx)
		if err != nil {
			return taken{}, err
		}
		return taken{h: lk, key: w.key, fence: lk.Fence(), release: lk.Release, role: role}, nil
	}
	lk, err := w.locker.Acquire(ctx, w.key, padlock.Options{Wait: w.f.wait, Fair: w.f.fair})
	if err != nil {
		return taken{}, err
	}
	return taken{h: lk, lock: lk, key: w.key, fence: lk.Fence(), release: lk.Release}, nil
}
