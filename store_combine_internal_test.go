package padlock

import (
	"context"
	"errors"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/padlockgo/padlock/internal/redistest"
	"github.com/redis/go-redis/v9"
)

// TestHandOffsFallingDueTogetherShareOneRoundTrip releases locks on
// several keys of one Locker, each with a waiter, while the first
// hand-offs take every flight: the others must go together as one
// pipeline once one is answered, and each must still be its own grant, handed to
// its own waiter with the next fence. With the server's scripts flushed
// meanwhile, every script of the batch must be sent again on its own
// (NOSCRIPT: it did not run) and the hand-offs still happen. With the
// batch's replies lost after the server ran it, each batched release
// must say Redis did not answer and none is a hand-off: the key goes
// back to Redis, and each waiter takes it there, with a higher fence.
func TestHandOffsFallingDueTogetherShareOneRoundTrip(t *testing.T) {
	for _, mode := range []string{"answered", "scripts flushed", "replies lost"} {
		t.Run(mode, func(t *testing.T) {
			srv := redistest.Start(t)
			hook, l := steppedLocker(t, srv)
			ctx := context.Background()
			const n = 5

			holders := make([]*Lock, n)
			waiters := make([]<-chan handed, n)
			for i := range n {
				key := "due-together-" + string(rune('a'+i))
				lk, err := l.Acquire(ctx, key, Options{Wait: time.Second}) // reserves a block
				if err != nil {
					t.Fatal(err)
				}
				holders[i] = lk
				// Asleep until handed the lock: one awake for a retry is
				// not handed it.
				waiters[i] = queueWaiters(t, l, key, 1, Options{Wait: 30 * time.Second, Retry: LinearBackoff(time.Hour)})
			}

			// The first hand-offs stall on their way until the others queue.
			st := newStall(maxFlights)
			hook.onProcess(func(ctx context.Context, cmd redis.Cmder, next redis.ProcessHook) error {
				if args := cmd.Args(); len(args) > 1 && args[1] == handoverScript.sha {
					st.hold()
				}
				return next(ctx, cmd)
			})
			pipes := make(chan int, 100)
			hook.onPipeline(func(ctx context.Context, cmds []redis.Cmder, next redis.ProcessPipelineHook) error {
				handovers := 0
				for _, c := range cmds {
					if args := c.Args(); len(args) > 1 && args[1] == handoverScript.sha {
						handovers++
					}
				}
				if handovers == 0 { // go-redis's own (a new connection's CLIENT SETINFO)
					return next(ctx, cmds)
				}
				pipes <- handovers
				err := next(ctx, cmds)
				if mode == "replies lost" { // after the server ran them
					for _, c := range cmds {
						c.SetErr(errBatchLost)
					}
					return errBatchLost
				}
				return err
			})

			errs := make([]error, n)
			var released sync.WaitGroup
			fillFlights(t, st, l.store.(single).handovers, n, func(i int) {
				released.Go(func() { errs[i] = holders[i].Release(ctx) })
			})
			if mode == "scripts flushed" {
				if err := srv.Client(t).ScriptFlush(ctx).Err(); err != nil {
					t.Fatal(err)
				}
			}
			st.release()
			released.Wait()

			for i := range n {
				h := <-waiters[i]
				if h.lk == nil {
					t.Fatalf("key %d: the waiter did not get the lock", i)
				}
				held, err := srv.Client(t).Get(ctx, h.lk.id.lockKey()).Result()
				if err != nil || tokenOf(held) != h.lk.id.token {
					t.Fatalf("key %d: Redis holds %q (%v), want the new grant's token %q", i, held, err, h.lk.id.token)
				}
				if mode == "replies lost" && i >= maxFlights {
					// A batched hand-off whose reply was lost is not a
					// hand-off: the release says Redis did not answer, the
					// key goes back to Redis and the waiter takes it there,
					// above every fence before.
					if !errors.Is(errs[i], ErrUnavailable) {
						t.Fatalf("key %d: Release = %v after its batch's reply was lost, want ErrUnavailable", i, errs[i])
					}
					if h.lk.lease == holders[i].lease || h.lk.Fence() <= holders[i].Fence() {
						t.Fatalf("key %d: fence %d after %d, handed on: %v; want the key taken from Redis",
							i, h.lk.Fence(), holders[i].Fence(), h.lk.lease == holders[i].lease)
					}
					if err := h.lk.Release(ctx); err != nil {
						t.Fatal(err)
					}
					continue
				}
				if errs[i] != nil {
					t.Fatalf("key %d: release: %v", i, errs[i])
				}
				if h.lk.lease != holders[i].lease || h.lk.Fence() != holders[i].Fence()+1 {
					t.Fatalf("key %d: fence %d after %d, handed on: %v; want a hand-off with the next fence",
						i, h.lk.Fence(), holders[i].Fence(), h.lk.lease == holders[i].lease)
				}
				if h.lk.Token() == holders[i].Token() {
					t.Fatalf("key %d: the hand-off kept the releasing grant's token", i)
				}
				if err := h.lk.Release(ctx); err != nil {
					t.Fatal(err)
				}
			}
			if handovers := <-pipes; handovers != n-maxFlights {
				t.Fatalf("the first pipeline carried %d hand-offs, want the %d that queued", handovers, n-maxFlights)
			}
		})
	}
}

// stepHook is a go-redis hook that runs proc and pipe, when set, around
// what the client sends.
type stepHook struct {
	proc atomic.Pointer[func(ctx context.Context, cmd redis.Cmder, next redis.ProcessHook) error]
	pipe atomic.Pointer[func(ctx context.Context, cmds []redis.Cmder, next redis.ProcessPipelineHook) error]
}

func (h *stepHook) onProcess(f func(ctx context.Context, cmd redis.Cmder, next redis.ProcessHook) error) {
	h.proc.Store(&f)
}

func (h *stepHook) onPipeline(f func(ctx context.Context, cmds []redis.Cmder, next redis.ProcessPipelineHook) error) {
	h.pipe.Store(&f)
}

func (h *stepHook) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *stepHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if f := h.proc.Load(); f != nil {
			return (*f)(ctx, cmd, next)
		}
		return next(ctx, cmd)
	}
}

func (h *stepHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		if f := h.pipe.Load(); f != nil {
			return (*f)(ctx, cmds, next)
		}
		return next(ctx, cmds)
	}
}

// TestFairJoinsFallingDueTogetherShareOneRoundTrip has fair Acquires of
// several busy keys on one Locker ask at once while the first ones'
// attempts take every flight: the others must go together as one pipeline,
// and each waiter must be queued once, under its own place, and get its
// key when its holder lets go.
func TestFairJoinsFallingDueTogetherShareOneRoundTrip(t *testing.T) {
	srv := redistest.Start(t)
	hook, l := steppedLocker(t, srv)
	other := mustNew(t, srv.Client(t))
	defer other.Close()
	ctx := context.Background()
	const n = 4
	keys := make([]string, n)
	holders := make([]*Lock, n)
	for i := range n {
		keys[i] = "fair-together-" + string(rune('a'+i))
		lk, err := other.Acquire(ctx, keys[i], Options{Fair: true})
		if err != nil {
			t.Fatal(err)
		}
		holders[i] = lk
	}

	st := newStall(maxFlights)
	pipes := make(chan int, 100)
	hook.onProcess(func(ctx context.Context, cmd redis.Cmder, next redis.ProcessHook) error {
		if args := cmd.Args(); len(args) > 1 && args[1] == acquireFairScript.sha {
			st.hold()
		}
		return next(ctx, cmd)
	})
	hook.onPipeline(func(ctx context.Context, cmds []redis.Cmder, next redis.ProcessPipelineHook) error {
		joins := 0
		for _, c := range cmds {
			if args := c.Args(); len(args) > 1 && args[1] == acquireFairScript.sha {
				joins++
			}
		}
		if joins > 0 {
			pipes <- joins
		}
		return next(ctx, cmds)
	})

	got := make(chan *Lock, n)
	acquire := func(i int) {
		lk, err := l.Acquire(ctx, keys[i], Options{Fair: true, Wait: 30 * time.Second, Retry: LinearBackoff(time.Hour)})
		if err != nil {
			t.Errorf("key %d: %v", i, err)
		}
		got <- lk
	}
	fillFlights(t, st, l.store.(single).fairAttempts, n, func(i int) { go acquire(i) })
	st.release()
	if joins := <-pipes; joins != n-maxFlights {
		t.Fatalf("the first pipeline carried %d fair attempts, want the %d that queued", joins, n-maxFlights)
	}
	for i := range n {
		_, _, queue := l.keys.lockKeys(keys[i])
		deadline := time.Now().Add(30 * time.Second)
		for {
			entries, err := srv.Client(t).LRange(ctx, queue, 0, -1).Result()
			if err != nil {
				t.Fatal(err)
			}
			if len(entries) == 1 {
				break
			}
			if len(entries) > 1 || time.Now().After(deadline) {
				t.Fatalf("key %d: queue %q, want the waiter queued once", i, entries)
			}
			time.Sleep(time.Millisecond)
		}
	}
	for i := range n {
		if err := holders[i].Release(ctx); err != nil {
			t.Fatal(err)
		}
	}
	for range n {
		lk := <-got
		if lk == nil {
			t.Fatal("a waiter did not get its key")
		}
		if err := lk.Release(ctx); err != nil {
			t.Fatal(err)
		}
	}
}

// fillFlights starts n callers of cb's script with start: the first
// maxFlights, held on their way by st, then the others, and returns once
// those queue behind them.
func fillFlights(t *testing.T, st *stall, cb *combiner, n int, start func(i int)) {
	t.Helper()
	for i := range maxFlights {
		start(i)
	}
	st.await()
	for i := maxFlights; i < n; i++ {
		start(i)
	}
	awaitCombined(t, cb, n-maxFlights)
}

// errBatchLost is what a client sees when a reply does not come back in
// time: the command may have run.
var errBatchLost error = &net.OpError{Op: "read", Net: "tcp", Err: os.ErrDeadlineExceeded}

// awaitCombined waits until n scripts queue in cb behind those on their
// way.
func awaitCombined(t *testing.T, cb *combiner, n int) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		cb.mu.Lock()
		queued := len(cb.queue)
		cb.mu.Unlock()
		if queued == n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d scripts queued behind those on their way, want %d", queued, n)
		}
		time.Sleep(time.Millisecond)
	}
}

// stall holds the first n scripts a hook sees until release, so that
// those sent after them find every flight taken.
type stall struct {
	mu      sync.Mutex
	left    int
	held    sync.WaitGroup
	resumed chan struct{}
}

func newStall(n int) *stall {
	st := &stall{left: n, resumed: make(chan struct{})}
	st.held.Add(n)
	return st
}

// hold, called by the hook for a script, holds it if it is among the
// first n.
func (st *stall) hold() {
	st.mu.Lock()
	first := st.left > 0
	st.left--
	st.mu.Unlock()
	if first {
		st.held.Done()
		<-st.resumed
	}
}

// await waits until the first n are held.
func (st *stall) await() { st.held.Wait() }

// release lets them go.
func (st *stall) release() { close(st.resumed) }

// steppedLocker returns a stepHook and a Locker on a client of srv whose
// commands pass through it; the Locker's waiters never recheck the key on
// their own: they wait for a hand-off or a notice alone.
func steppedLocker(t *testing.T, srv *redistest.Server) (*stepHook, *Locker) {
	t.Helper()
	rdb := srv.Client(t)
	hook := &stepHook{}
	rdb.AddHook(hook)
	l := mustNew(t, rdb)
	t.Cleanup(func() { l.Close() })
	l.recheck = time.Hour
	return hook, l
}
