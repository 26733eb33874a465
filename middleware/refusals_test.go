package middleware_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/gin-gonic/gin"
	"github.com/redis/go-redis/v9"

	"github.com/padlockgo/padlock"
	"github.com/padlockgo/padlock/httplock"
	"github.com/padlockgo/padlock/idempotency"
	"github.com/padlockgo/padlock/idempotency/ginidem"
	"github.com/padlockgo/padlock/internal/redistest"
	"github.com/padlockgo/padlock/keyfunc"
	"github.com/padlockgo/padlock/lockkey"
	"github.com/padlockgo/padlock/middleware"
)

// refusalSecret stands for a secret a key is built from: an API key in a
// header, a client's Idempotency-Key.
const refusalSecret = "tok_live_5f0c9a7e"

// seen collects what a face tells anyone about a refused request besides
// its answer: the errors handed to the responder (Problem.Err, and the
// Problem's key), to the Gin context (c.Errors, what a logger reads) and
// to idempotency.WithError.
type seen struct {
	mu  sync.Mutex
	out []string
}

func (s *seen) add(v string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.out = append(s.out, v)
}

func (s *seen) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return strings.Join(s.out, "\n")
}

// responder records the problem, then writes it as the default does.
func (s *seen) responder(w http.ResponseWriter, r *http.Request, p *httplock.Problem) {
	if p.Err != nil {
		s.add(p.Err.Error())
	}
	s.add(p.Key + p.Detail)
	httplock.WriteProblem(w, r, p)
}

// ginErrors records c.Errors after the chain, as a logging middleware would.
func (s *seen) ginErrors(c *gin.Context) {
	c.Next()
	s.add(c.Errors.String())
}

// refusalEnv is one face on a fresh server, with the request that face
// refuses and the lock key it takes.
type refusalEnv struct {
	l   *padlock.Locker
	srv *redistest.Server
	rdb *redis.Client
	sem *padlock.Semaphore
	h   http.Handler
	key string // the key the request locks, for the test to make busy
}

// Every face (httplock.Lock and Limit, middleware.Lock and Limit,
// idempotency.New and ginidem.New) through every refusal Redis can
// produce (busy: 409 or 423; every permit taken: 429 or 503; Redis down:
// 503): the secret the key is built from appears nowhere, neither in the
// body, nor in a header, nor in the errors handed to the responder, the
// Gin context or WithError, unless WithEchoKey asked for it. The 500
// branch, which Redis does not produce, is TestRefusalRedactsEveryBranch
// in httplock; all faces share the builder it tests.
func TestNoFaceEchoesKey(t *testing.T) {
	type face struct {
		name  string
		build func(e *refusalEnv, log *seen, opts []httplock.Option, full int)
		idem  bool // an idempotency face: the secret is the Idempotency-Key, and it has no WithEchoKey
		limit bool
	}
	lockKeyFunc := httplock.Header("X-Api-Key", lockkey.Text())
	faces := []face{
		{name: "httplock.Lock", build: func(e *refusalEnv, log *seen, opts []httplock.Option, full int) {
			mux := http.NewServeMux()
			mux.Handle("POST /reports", httplock.Lock(e.l, lockKeyFunc, append(opts, httplock.WithResponder(log.responder))...)(ok()))
			e.h, e.key = mux, "POST /reports:"+refusalSecret
		}},
		{name: "httplock.Limit", limit: true, build: func(e *refusalEnv, log *seen, opts []httplock.Option, full int) {
			mux := http.NewServeMux()
			mux.Handle("POST /reports", httplock.Limit(e.sem, lockKeyFunc, full, append(opts, httplock.WithResponder(log.responder))...)(ok()))
			e.h, e.key = mux, "POST /reports:"+refusalSecret
		}},
		{name: "middleware.Lock", build: func(e *refusalEnv, log *seen, opts []httplock.Option, full int) {
			r := gin.New()
			r.Use(log.ginErrors)
			r.POST("/reports", middleware.Lock(e.l, keyfunc.Header("X-Api-Key", lockkey.Text()), append(opts, httplock.WithResponder(log.responder))...), okGin)
			e.h, e.key = r, "/reports:"+refusalSecret
		}},
		{name: "middleware.Limit", limit: true, build: func(e *refusalEnv, log *seen, opts []httplock.Option, full int) {
			r := gin.New()
			r.Use(log.ginErrors)
			r.POST("/reports", middleware.Limit(e.sem, keyfunc.Header("X-Api-Key", lockkey.Text()), full, append(opts, httplock.WithResponder(log.responder))...), okGin)
			e.h, e.key = r, "/reports:"+refusalSecret
		}},
		{name: "idempotency.New", idem: true, build: func(e *refusalEnv, log *seen, _ []httplock.Option, _ int) {
			mux := http.NewServeMux()
			idem := idempotency.New(e.l, e.rdb, func(*http.Request) (string, error) { return "tester", nil },
				idempotency.WithResponder(log.responder), idempotency.WithError(func(_ *http.Request, err error) { log.add(err.Error()) }))
			mux.Handle("POST /reports", idem(ok()))
			e.h, e.key = mux, "idempotency:POST /reports:tester:"+refusalSecret
		}},
		{name: "ginidem.New", idem: true, build: func(e *refusalEnv, log *seen, _ []httplock.Option, _ int) {
			r := gin.New()
			r.Use(log.ginErrors)
			r.POST("/reports", ginidem.New(e.l, e.rdb, func(*gin.Context) (string, error) { return "tester", nil },
				idempotency.WithResponder(log.responder)), okGin)
			e.h, e.key = r, "idempotency:/reports:tester:"+refusalSecret
		}},
	}
	type refusal struct {
		name   string
		opts   []httplock.Option
		down   bool // Redis is down; otherwise the key is busy (or full)
		full   int  // the status of the limit faces when every permit is taken
		status int
		lock   bool // a refusal of the lock faces and the idempotency ones
		limit  bool // a refusal of the limit faces
		echo   bool // WithEchoKey: the key may be shown
	}
	refusals := []refusal{
		{name: "409", full: http.StatusTooManyRequests, status: http.StatusConflict, lock: true},
		{name: "423", full: http.StatusTooManyRequests, opts: []httplock.Option{httplock.WithBusyStatus(http.StatusLocked)}, status: http.StatusLocked, lock: true},
		{name: "429", full: http.StatusTooManyRequests, status: http.StatusTooManyRequests, limit: true},
		{name: "503 full", full: http.StatusServiceUnavailable, status: http.StatusServiceUnavailable, limit: true},
		{name: "503 down", full: http.StatusTooManyRequests, down: true, status: http.StatusServiceUnavailable, lock: true, limit: true},
		{name: "409 WithEchoKey", full: http.StatusTooManyRequests, opts: []httplock.Option{httplock.WithEchoKey()}, status: http.StatusConflict, lock: true, echo: true},
		{name: "429 WithEchoKey", full: http.StatusTooManyRequests, opts: []httplock.Option{httplock.WithEchoKey()}, status: http.StatusTooManyRequests, limit: true, echo: true},
	}
	for _, f := range faces {
		for _, rf := range refusals {
			if (f.limit && !rf.limit) || (!f.limit && !rf.lock) || (f.idem && len(rf.opts) > 0) {
				continue
			}
			t.Run(f.name+" "+rf.name, func(t *testing.T) {
				e := &refusalEnv{}
				e.l, e.srv, e.rdb = newLocker(t)
				var err error
				if e.sem, err = e.l.Semaphore(1); err != nil {
					t.Fatal(err)
				}
				log := &seen{}
				f.build(e, log, rf.opts, rf.full)
				ctx := context.Background()
				if rf.down {
					e.srv.Kill(t)
				} else {
					take := e.l.Acquire
					if f.limit {
						take = e.sem.Acquire
					}
					lk, err := take(ctx, e.key, padlock.Options{})
					if err != nil {
						t.Fatal(err)
					}
					defer lk.Release(ctx)
				}
				req := httptest.NewRequest("POST", "/reports", strings.NewReader("{}"))
				req.Header.Set("Content-Type", "application/json")
				req.Header.Set("X-Api-Key", refusalSecret)
				req.Header.Set("Idempotency-Key", refusalSecret)
				w := httptest.NewRecorder()
				e.h.ServeHTTP(w, req)
				checkProblem(t, w, rf.status)
				all := w.Body.String() + "\n" + log.String()
				for k, v := range w.Header() {
					all += "\n" + k + ": " + strings.Join(v, ",")
				}
				if got := strings.Contains(all, refusalSecret); got != rf.echo {
					t.Fatalf("got the key shown %v, want %v; the answer and what was logged:\n%s", got, rf.echo, all)
				}
			})
		}
	}
}

// ok is a net/http handler that answers 200; okGin is the same for Gin.
func ok() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusOK) })
}

func okGin(c *gin.Context) { c.Status(http.StatusOK) }
