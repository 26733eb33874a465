package padlock

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/padlockgo/padlock/internal/redistest"
	"github.com/redis/go-redis/v9"
)

// TestHandOffsFallingDueTogetherShareOneRoundTrip releases locks on
// several keys of one Locker, each with a waiter, while the first
// hand-off is on its way: the others must go together as one pipeline
// once it is answered, and each must still be its own grant, handed to
// its own waiter with the next fence. With the server's scripts flushed
// meanwhile, every script of the batch must be sent again on its own
// (NOSCRIPT: it did not run) and the hand-offs still happen.
func TestHandOffsFallingDueTogetherShareOneRoundTrip(t *testing.T) {
	for _, flush := range []bool{false, true} {
		name := "answered"
		if flush {
			name = "scripts flushed"
		}
		t.Run(name, func(t *testing.T) {
			srv := redistest.Start(t)
			rdb := srv.Client(t)
			hook := &stepHook{}
			rdb.AddHook(hook)
			l := New(rdb)
			defer l.Close()
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
				waiters[i] = queueWaiters(t, l, key, 1, Options{Wait: 30 * time.Second})
			}

			// The first hand-off stalls on its way until the others queue.
			stalled, resume := make(chan struct{}), make(chan struct{})
			var once sync.Once
			hook.proc = (func(ctx context.Context, cmd redis.Cmder, next redis.ProcessHook) error {
				if args := cmd.Args(); len(args) > 1 && args[1] == handoverScript.sha {
					first := false
					once.Do(func() { first = true })
					if first {
						close(stalled)
						<-resume
					}
				}
				return next(ctx, cmd)
			})
			var (
				mu    sync.Mutex
				pipes []int
			)
			hook.pipe = (func(ctx context.Context, cmds []redis.Cmder, next redis.ProcessPipelineHook) error {
				handovers := 0
				for _, c := range cmds {
					if args := c.Args(); len(args) > 1 && args[1] == handoverScript.sha {
						handovers++
					}
				}
				if handovers > 0 { // not go-redis's own (a new connection's CLIENT SETINFO)
					mu.Lock()
					pipes = append(pipes, handovers)
					mu.Unlock()
				}
				return next(ctx, cmds)
			})

			errs := make(chan error, n)
			release := func(i int) { errs <- holders[i].Release(ctx) }
			go release(0)
			<-stalled
			for i := 1; i < n; i++ {
				go release(i)
			}
			cb := l.store.(single).handovers
			deadline := time.Now().Add(30 * time.Second)
			for {
				cb.mu.Lock()
				queued := len(cb.queue)
				cb.mu.Unlock()
				if queued == n-1 {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("%d hand-offs queued behind the one on its way, want %d", queued, n-1)
				}
				time.Sleep(time.Millisecond)
			}
			if flush {
				if err := srv.Client(t).ScriptFlush(ctx).Err(); err != nil {
					t.Fatal(err)
				}
			}
			close(resume)

			for range n {
				if err := <-errs; err != nil {
					t.Fatalf("release: %v", err)
				}
			}
			for i := range n {
				h := <-waiters[i]
				if h.lk == nil {
					t.Fatalf("key %d: the waiter did not get the lock", i)
				}
				if h.lk.lease != holders[i].lease || h.lk.Fence() != holders[i].Fence()+1 {
					t.Fatalf("key %d: fence %d after %d, handed on: %v; want a hand-off with the next fence",
						i, h.lk.Fence(), holders[i].Fence(), h.lk.lease == holders[i].lease)
				}
				if h.lk.Token() == holders[i].Token() {
					t.Fatalf("key %d: the hand-off kept the releasing grant's token", i)
				}
				held, err := srv.Client(t).Get(ctx, h.lk.id.lockKey()).Result()
				if err != nil || tokenOf(held) != h.lk.id.token {
					t.Fatalf("key %d: Redis holds %q (%v), want the new grant's token %q", i, held, err, h.lk.id.token)
				}
				if err := h.lk.Release(ctx); err != nil {
					t.Fatal(err)
				}
			}
			mu.Lock()
			defer mu.Unlock()
			if len(pipes) != 1 || pipes[0] != n-1 {
				t.Fatalf("pipelines of %v hand-offs, want one of %d: those that queued go together", pipes, n-1)
			}
		})
	}
}

// stepHook is a go-redis hook that runs proc and pipe, set before the
// client is used, around what it sends.
type stepHook struct {
	proc func(ctx context.Context, cmd redis.Cmder, next redis.ProcessHook) error
	pipe func(ctx context.Context, cmds []redis.Cmder, next redis.ProcessPipelineHook) error
}

func (h *stepHook) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *stepHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if h.proc != nil {
			return h.proc(ctx, cmd, next)
		}
		return next(ctx, cmd)
	}
}

func (h *stepHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		if h.pipe != nil {
			return h.pipe(ctx, cmds, next)
		}
		return next(ctx, cmds)
	}
}
