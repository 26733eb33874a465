package padlock

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/padlockgo/padlock/internal/redistest"
	"github.com/redis/go-redis/v9"
)

// electionBackends are the deployments the election tests run on: a
// Locker per candidate process, made by locker, and a client to look at
// Redis.
func electionBackends() []struct {
	name  string
	start func(t *testing.T) (locker func(opts ...LockerOption) *Locker, rdb redis.UniversalClient, hook func(redis.Hook) redis.UniversalClient)
} {
	type backend = struct {
		name  string
		start func(t *testing.T) (locker func(opts ...LockerOption) *Locker, rdb redis.UniversalClient, hook func(redis.Hook) redis.UniversalClient)
	}
	return []backend{
		{"single", func(t *testing.T) (func(...LockerOption) *Locker, redis.UniversalClient, func(redis.Hook) redis.UniversalClient) {
			srv := redistest.Start(t)
			client := func(h redis.Hook) redis.UniversalClient {
				c := srv.Client(t)
				if h != nil {
					c.AddHook(h)
				}
				return c
			}
			return lockerMaker(t, client), srv.Client(t), client
		}},
		{"cluster", func(t *testing.T) (func(...LockerOption) *Locker, redis.UniversalClient, func(redis.Hook) redis.UniversalClient) {
			c := redistest.StartCluster(t, 3)
			client := func(h redis.Hook) redis.UniversalClient {
				cc := c.Client(t)
				if h != nil {
					cc.AddHook(h)
				}
				return cc
			}
			return lockerMaker(t, client), c.Client(t), client
		}},
	}
}

// electionTest is what an election test runs on one deployment: a
// Locker per candidate process, made by locker, a client to look at
// Redis, and a client carrying a hook.
type electionTest = func(t *testing.T, locker func(opts ...LockerOption) *Locker, rdb redis.UniversalClient, client func(redis.Hook) redis.UniversalClient)

// electionRun is a deployment an election test runs on.
type electionRun struct {
	name string
	run  func(t *testing.T, f electionTest)
}

// onRedis runs a test on the real deployments named.
func onRedis(names ...string) []electionRun {
	var runs []electionRun
	for _, be := range electionBackends() {
		if slices.Contains(names, be.name) {
			runs = append(runs, electionRun{be.name, func(t *testing.T, f electionTest) {
				locker, rdb, client := be.start(t)
				f(t, locker, rdb, client)
			}})
		}
	}
	return runs
}

// inMemory runs a test in a bubble, on one server or a 3-master Cluster in
// memory (whose waiters wake on their timers), as named.
func inMemory(names ...string) []electionRun {
	var runs []electionRun
	for _, be := range bubbleBackends {
		if slices.Contains(names, be.name) {
			runs = append(runs, electionRun{be.name, func(t *testing.T, f electionTest) {
				inBubble(t, func(t *testing.T, b *bubble) {
					newClient := be.start(b)
					client := func(h redis.Hook) redis.UniversalClient {
						c := newClient()
						if h != nil {
							c.AddHook(h)
						}
						return c
					}
					locker := func(opts ...LockerOption) *Locker { return b.locker(client(nil), opts...) }
					f(t, locker, newClient(), client)
				})
			}})
		}
	}
	return runs
}

func lockerMaker(t *testing.T, client func(redis.Hook) redis.UniversalClient) func(...LockerOption) *Locker {
	return func(opts ...LockerOption) *Locker {
		l := mustNew(t, client(nil), opts...)
		t.Cleanup(func() { l.Close() })
		return l
	}
}

// Candidates in three processes campaign over and over: never two leaders
// at once, every term's fence above the last, and Leader reports the term
// in office.
// One server's case runs on redis-server; the Cluster's in memory.
func TestElectionOneLeaderAtATime(t *testing.T) {
	for _, be := range append(onRedis("single"), inMemory("cluster")...) {
		t.Run(be.name, func(t *testing.T) {
			be.run(t, func(t *testing.T, locker func(opts ...LockerOption) *Locker, _ redis.UniversalClient, _ func(redis.Hook) redis.UniversalClient) {
				ctx := ctxFor(t)
				lockers := []*Locker{locker(), locker(), locker()}
				var (
					inOffice   atomic.Int32
					unresigned atomic.Int32
					mu         sync.Mutex
					lastFence  int64
					terms      int
					wg         sync.WaitGroup
					errs       = make(chan error, 100)
				)
				for c := range 6 {
					wg.Go(func() {
						e := lockers[c%3].Election("leader", Options{TTL: 5 * time.Second})
						for round := range 4 {
							value := fmt.Sprintf("candidate-%d/%d", c, round)
							term, err := e.Campaign(ctx, value)
							if err != nil {
								errs <- fmt.Errorf("Campaign: %w", err)
								return
							}
							if n := inOffice.Add(1); n != 1 {
								errs <- fmt.Errorf("%d leaders in office at once", n)
							}
							mu.Lock()
							if term.Fence() <= lastFence {
								errs <- fmt.Errorf("term fence %d, want > the last term's %d", term.Fence(), lastFence)
							}
							lastFence = term.Fence()
							terms++
							mu.Unlock()
							ld, err := e.Leader(ctx)
							if err != nil || ld != (Leader{Value: value, Fence: term.Fence()}) {
								errs <- fmt.Errorf("Leader() = %+v, %v; want %q with fence %d", ld, err, value, term.Fence())
							}
							time.Sleep(2 * time.Millisecond)
							inOffice.Add(-1)
							// A Resign Redis did not answer in time (a
							// loaded machine) leaves the term to its
							// lease: the next leader waits for it.
							if err := term.Resign(ctx); errors.Is(err, ErrUnavailable) {
								unresigned.Add(1)
							} else if err != nil {
								errs <- fmt.Errorf("Resign: %w", err)
							}
						}
					})
				}
				wg.Wait()
				close(errs)
				for err := range errs {
					t.Error(err)
				}
				if terms != 24 {
					t.Errorf("terms = %d, want 24", terms)
				}
				if n := unresigned.Load(); n > 0 {
					t.Logf("%d Resigns got no answer in time: their terms end with their leases", n)
				} else if _, err := lockers[0].Election("leader", Options{}).Leader(ctx); !errors.Is(err, ErrNoLeader) {
					t.Errorf("Leader() after every candidate resigned = %v, want ErrNoLeader", err)
				}
			})
		})
	}
}

// Observe reports the leader in office, then each new term and value.
// One server's case runs on redis-server; the Cluster's in memory.
func TestElectionObserveSeesChanges(t *testing.T) {
	for _, be := range append(onRedis("single"), inMemory("cluster")...) {
		t.Run(be.name, func(t *testing.T) {
			be.run(t, func(t *testing.T, locker func(opts ...LockerOption) *Locker, _ redis.UniversalClient, _ func(redis.Hook) redis.UniversalClient) {
				ctx := ctxFor(t)
				a, b, watcher := locker(), locker(), locker()
				ta, err := a.Election("svc", Options{}).Campaign(ctx, "10.0.0.1:80")
				if err != nil {
					t.Fatal(err)
				}
				octx, stop := context.WithCancel(ctx)
				defer stop()
				seen := watcher.Election("svc", Options{}).Observe(octx)
				next := func(want string) Leader {
					t.Helper()
					select {
					case ld := <-seen:
						if ld.Value != want {
							t.Fatalf("observed %q, want %q", ld.Value, want)
						}
						return ld
					case <-time.After(10 * time.Second):
						t.Fatalf("observed nothing in 10s, want %q", want)
					}
					return Leader{}
				}
				first := next("10.0.0.1:80")
				if first.Fence != ta.Fence() {
					t.Errorf("observed fence %d, want the term's %d", first.Fence, ta.Fence())
				}
				if again, err := a.Election("svc", Options{}).Campaign(ta.Context(ctx), "x"); !errors.Is(err, ErrInvalid) {
					t.Errorf("Campaign inside a term's context = %v, %v; want ErrInvalid", again, err)
				}
				if err := ta.Proclaim(ctx, "10.0.0.1:81"); err != nil {
					t.Fatal(err)
				}
				next("10.0.0.1:81")
				won := make(chan *Term, 1)
				go func() {
					tb, err := b.Election("svc", Options{}).Campaign(ctx, "10.0.0.2:80")
					if err != nil {
						t.Error(err)
					}
					won <- tb
				}()
				if err := ta.Resign(ctx); err != nil {
					t.Fatal(err)
				}
				second := next("10.0.0.2:80")
				if second.Fence <= first.Fence {
					t.Errorf("new term's fence %d, want > %d", second.Fence, first.Fence)
				}
				tb := <-won
				if tb != nil {
					tb.Resign(ctx)
				}
				stop()
				for range seen { // closed when the context ends
				}
			})
		})
	}
}

// stallRenewals holds back every pipeline (the watchdog's renewals) while
// on: a leader process or its network paused.
type stallRenewals struct{ on atomic.Bool }

func (h *stallRenewals) DialHook(next redis.DialHook) redis.DialHook          { return next }
func (h *stallRenewals) ProcessHook(next redis.ProcessHook) redis.ProcessHook { return next }
func (h *stallRenewals) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		if h.on.Load() {
			<-ctx.Done()
			for _, c := range cmds {
				c.SetErr(ctx.Err())
			}
			return ctx.Err()
		}
		return next(ctx, cmds)
	}
}

// A leader whose renewals stall learns it lost the leadership while its
// lock is still in Redis, before its lease can end; only then can a
// candidate elsewhere be elected, with a higher fence.
// It runs in a bubble, on one server and on a Cluster, in memory.
func TestElectionPausedLeaderIsDeposedFirst(t *testing.T) {
	for _, be := range inMemory("single", "cluster") {
		t.Run(be.name, func(t *testing.T) {
			be.run(t, func(t *testing.T, locker func(opts ...LockerOption) *Locker, rdb redis.UniversalClient, client func(redis.Hook) redis.UniversalClient) {
				ctx := ctxFor(t)
				stall := &stallRenewals{}
				// A wide drift margin: the lost signal comes 20% of the lease
				// before its end, room enough to look at Redis on a busy machine.
				la := mustNew(t, client(stall), WithClockDrift(0.2, 0))
				t.Cleanup(func() { la.Close() })
				lb := locker()
				o := Options{TTL: 2 * time.Second}
				ta, err := la.Election("primary", o).Campaign(ctx, "a")
				if err != nil {
					t.Fatal(err)
				}
				leaderCtx := ta.Context(ctx)
				won := make(chan *Term, 1)
				var electedAt time.Time
				go func() {
					tb, err := lb.Election("primary", o).Campaign(ctx, "b")
					electedAt = time.Now()
					if err != nil {
						t.Error(err)
					}
					won <- tb
				}()
				stall.on.Store(true)
				var lostAt time.Time
				select {
				case <-leaderCtx.Done():
					lostAt = time.Now()
				case <-time.After(10 * time.Second):
					t.Fatal("the stalled leader's context still live after 10s")
				}
				// Its lock is still in Redis: deposed before its lease ended.
				v, err := rdb.Get(ctx, la.RedisKey("primary")).Result()
				if err != nil || tokenOf(v) != ta.lock.Token() {
					t.Errorf("lock value when the leader learned of its loss = %q, %v; want its token %q still there", v, err, ta.lock.Token())
				}
				if !errors.Is(context.Cause(leaderCtx), ErrLockLost) {
					t.Errorf("leader context cause = %v, want ErrLockLost", context.Cause(leaderCtx))
				}
				tb := <-won
				if tb == nil {
					t.FailNow()
				}
				defer tb.Resign(ctx)
				if !electedAt.After(lostAt) {
					t.Errorf("new leader elected at %v, before the old one learned of its loss at %v", electedAt, lostAt)
				}
				if tb.Fence() <= ta.Fence() {
					t.Errorf("new term's fence %d, want > the deposed leader's %d", tb.Fence(), ta.Fence())
				}
				if ld, err := lb.Election("primary", o).Leader(ctx); err != nil || ld.Value != "b" {
					t.Errorf("Leader() = %+v, %v; want b", ld, err)
				}
				if err := ta.Resign(ctx); !errors.Is(err, ErrNotHeld) {
					t.Errorf("deposed leader's Resign = %v, want ErrNotHeld", err)
				}
			})
		})
	}
}

func TestElectionInvalid(t *testing.T) {
	l, _, _ := startLocker(t)
	ctx := ctxFor(t)
	for _, tc := range []struct {
		name string
		e    *Election
	}{
		{"empty name", l.Election("", Options{})},
		{"no renewal", l.Election("x", Options{NoRenew: true})},
		{"fair", l.Election("x", Options{Fair: true})},
		{"negative TTL", l.Election("x", Options{TTL: -1})},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if term, err := tc.e.Campaign(ctx, "v"); !errors.Is(err, ErrInvalid) {
				t.Errorf("Campaign = %v, %v; want ErrInvalid", term, err)
			}
		})
	}
}

// A leader that dies without resigning leaves its record behind; once its
// lease has run out, the record no longer names a leader. It runs in a
// bubble.
func TestElectionLeaderGoneWithItsLease(t *testing.T) {
	inBubble(t, func(t *testing.T, b *bubble) {
		l1 := b.locker(b.client())
		l2 := b.locker(l1.notifier.client)
		ctx := ctxFor(t)
		term, err := l1.Election("svc", Options{TTL: 500 * time.Millisecond}).Campaign(ctx, "a")
		if err != nil {
			t.Fatal(err)
		}
		e := l2.Election("svc", Options{})
		if ld, err := e.Leader(ctx); err != nil || ld.Value != "a" {
			t.Fatalf("Leader() = %+v, %v; want a", ld, err)
		}
		l1.Close() // the process dies: no renewal, no resignation
		<-term.Done()
		time.Sleep(time.Second)
		if ld, err := e.Leader(ctx); !errors.Is(err, ErrNoLeader) {
			t.Errorf("Leader() after the lease ran out = %+v, %v; want ErrNoLeader", ld, err)
		}
	})
}

// TestElectionOwnerWithColons: an Options.Owner may hold colons, which
// the leader record also uses between its fields; the leader is still
// read as in office, and resigns.
func TestElectionOwnerWithColons(t *testing.T) {
	l1, _, _ := startLocker(t)
	l2 := mustNew(t, l1.notifier.client)
	t.Cleanup(func() { l2.Close() })
	ctx := ctxFor(t)
	term, err := l1.Election("svc", Options{Owner: "host=web:3 pid=7"}).Campaign(ctx, "a:b")
	if err != nil {
		t.Fatal(err)
	}
	e := l2.Election("svc", Options{})
	if ld, err := e.Leader(ctx); err != nil || ld.Value != "a:b" || ld.Fence != term.Fence() {
		t.Fatalf("Leader() = %+v, %v; want a:b with fence %d", ld, err, term.Fence())
	}
	if err := term.Resign(ctx); err != nil {
		t.Fatalf("Resign: %v", err)
	}
	if ld, err := e.Leader(ctx); !errors.Is(err, ErrNoLeader) {
		t.Errorf("Leader() after Resign = %+v, %v; want ErrNoLeader", ld, err)
	}
	if n, err := l1.notifier.client.Exists(ctx, l1.keys.lock("svc")+":leader").Result(); err != nil || n != 0 {
		t.Errorf("leader record after Resign: exists %d, %v; want it deleted", n, err)
	}
}
