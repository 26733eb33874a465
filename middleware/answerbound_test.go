package middleware_test

import (
	"context"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/redis/go-redis/v9"

	"github.com/padlockgo/padlock"
	"github.com/padlockgo/padlock/httplock"
	"github.com/padlockgo/padlock/internal/redistest"
	"github.com/padlockgo/padlock/keyfunc"
	"github.com/padlockgo/padlock/lockkey"
	"github.com/padlockgo/padlock/middleware"
)

// No answer takes longer than Wait plus the release bound, even when Redis
// hangs (a paused server) and the client's own read timeout is far longer
// (the client has ContextTimeoutEnabled, so that deadlines reach the
// socket): while the request waits for a busy key, or while its handler
// runs. (It once caught a waiter that gave up but waited, to leave its
// line, behind go-redis's redial of the notice subscription: 41 s.)
func TestLockAnswerBoundedWhenRedisHangs(t *testing.T) {
	t.Parallel() // its cases pause servers of their own
	const (
		wait        = 2 * time.Second
		release     = time.Second
		slack       = 3 * time.Second // a loaded machine
		readTimeout = 20 * time.Second
	)
	tests := []struct {
		name      string
		pauseIn   string // "wait" or "handler"
		wantCodes []int
	}{
		{"hangs while waiting", "wait", []int{http.StatusServiceUnavailable}},
		{"hangs while the handler runs", "handler", []int{http.StatusOK}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel() // a server of its own, which it pauses
			srv := redistest.Start(t)
			rdb := srv.Client(t, func(o *redis.Options) {
				o.ReadTimeout, o.WriteTimeout, o.ContextTimeoutEnabled = readTimeout, readTimeout, true
			})
			l := lockerOn(t, rdb)
			defer srv.Resume(t)
			r := gin.New()
			r.POST("/orders/:id", middleware.Lock(l, keyfunc.Param("id", lockkey.Int(64)),
				httplock.WithLockOptions(padlock.Options{Wait: wait}), httplock.WithReleaseTimeout(release)),
				func(c *gin.Context) {
					if tt.pauseIn == "handler" {
						srv.Pause(t)
					}
					c.Status(http.StatusOK)
				})
			if tt.pauseIn == "wait" {
				lk, err := l.Acquire(context.Background(), "/orders/$id:1", padlock.Options{TTL: time.Minute})
				if err != nil {
					t.Fatal(err)
				}
				defer func() { srv.Resume(t); lk.Release(context.Background()) }()
				// Redis hangs once the request's first attempt found the
				// key busy, so that it hangs while the request waits,
				// however late a loaded machine runs it: its next
				// attempt, at its timer, gets no answer.
				rdb.AddHook(pauseAfterScript{pause: sync.OnceFunc(func() { srv.Pause(t) })})
			}
			start := time.Now()
			w := serve(r, "POST", "/orders/1", "")
			took := time.Since(start)
			if w.Code != tt.wantCodes[0] {
				t.Fatalf("got status %d (%s), want %d", w.Code, w.Body, tt.wantCodes[0])
			}
			if took > wait+release+slack {
				t.Fatalf("got the answer after %v, want at most Wait %v + release %v (+%v slack)", took, wait, release, slack)
			}
			t.Logf("answer after %v", took.Round(time.Millisecond))
		})
	}
}

// pauseAfterScript calls pause after the first script command it sees
// is answered.
type pauseAfterScript struct{ pause func() }

func (pauseAfterScript) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h pauseAfterScript) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		err := next(ctx, cmd)
		if name := cmd.Name(); name == "evalsha" || name == "eval" {
			h.pause()
		}
		return err
	}
}

func (pauseAfterScript) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}
