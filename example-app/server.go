package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/padlockgo/padlock"
	"github.com/padlockgo/padlock/decorator"
	"github.com/padlockgo/padlock/httplock"
	"github.com/padlockgo/padlock/idempotency"
	"github.com/padlockgo/padlock/idempotency/ginidem"
	"github.com/padlockgo/padlock/keyfunc"
	"github.com/padlockgo/padlock/lockkey"
	"github.com/padlockgo/padlock/middleware"
)

// maxBodyBytes bounds request bodies.
const maxBodyBytes = 64 << 10

// server holds the app's parts and serves its routes.
type server struct {
	cfg     config
	logger  *slog.Logger
	store   *store
	backend *backend
	engine  *gin.Engine
	keys    apiKeys // who may call the API routes

	// authorize is the fake payment provider: it takes a while, like a
	// real one, and stops when ctx ends. Tests replace it.
	authorize func(ctx context.Context, o Order) error

	runJob     func(context.Context, job) (jobResult, error) // decorated: one run per job name at a time
	checkpoint func(context.Context, job) error              // decorated with the same key: reentrant inside runJob

	inflight sync.WaitGroup // requests being served, waited for at shutdown
	routes   []route        // every route, for noRoute's redirects
}

// newServer wires the routes. The returned server is an http.Handler.
func newServer(cfg config, logger *slog.Logger, st *store, b *backend) (*server, error) {
	s := &server{cfg: cfg, logger: logger, store: st, backend: b, keys: cfg.APIKeys}
	s.authorize = s.fakeProvider

	jobKey := lockkey.Arg("job", func(j job) string { return j.Name })
	// Each names itself as its lock's holder ("host=… pid=… func=jobs.run"
	// on the lock page); without a name the function's own would be shown.
	s.runJob = decorator.WithLock(b.locker, jobKey, padlock.Options{Wait: cfg.jobWait}, s.job, decorator.WithName("jobs.run"))
	s.checkpoint = decorator.WithLockErr(b.locker, jobKey, padlock.Options{}, s.saveCheckpoint, decorator.WithName("jobs.checkpoint"))

	r := gin.New()
	r.HandleMethodNotAllowed = true
	// gin's own redirects (a path with or without its trailing slash) answer
	// in HTML before any middleware runs; noRoute makes them instead, as
	// problem+json.
	r.RedirectTrailingSlash = false
	r.RedirectFixedPath = false
	// gin trusts every proxy by default, which lets any client pick its
	// own c.ClientIP() with an X-Forwarded-For header; trust only those
	// configured (none by default).
	if err := r.SetTrustedProxies(cfg.trustedProxies); err != nil {
		return nil, fmt.Errorf("TRUSTED_PROXIES: %w", err)
	}
	r.Use(s.track, s.logRequest, gin.CustomRecovery(s.recovered), limitHeaders)
	r.NoRoute(s.noRoute)
	r.NoMethod(func(c *gin.Context) {
		writeProblem(c, newProblem(http.StatusMethodNotAllowed, "method not allowed on this route"))
	})

	r.GET("/", s.index)
	r.GET("/healthz", s.healthz)

	// Every route that acts is for authenticated callers only, and
	// authentication comes first: before idempotency (whose stored answers
	// are scoped by the caller it finds) and before any lock (so no
	// anonymous client can hold one).
	api := r.Group("/", s.authenticate)

	// Create order. A retried POST with the same Idempotency-Key answers
	// with the first order (Idempotent-Replayed: true) instead of creating
	// a second one; the key is optional here, and scoped by the
	// authenticated caller, so one caller's key never reaches another's
	// answer. The stored answers live on the first Redis node (in redlock
	// mode, that one node).
	// Its in-flight lock names the route and the caller's hash, as the
	// lock page shows it (LOCK_KEY_SECRET keys the hash).
	idem := ginidem.New(b.locker, b.nodes[0],
		callerID,
		idempotency.WithOptionalKey(),
		idempotency.WithMaxBodyBytes(maxBodyBytes),
		idempotency.WithRedactor(cfg.KeyRedactor))
	api.POST("/orders", idem, s.createOrder)
	api.GET("/orders/:id", s.getOrder)

	// Pay order: one payment per order at a time, across every instance of
	// the app sharing the Redis. A second request waits up to payWait for
	// the first to finish (then finds the order paid), or gets 409. The lock
	// key is the order id as the handler binds it (keyfunc.Bind), not the
	// path's text: /orders/13/pay, /orders/013/pay, /orders/+13/pay and
	// /orders/%2013/pay are one order, so one lock, "order:13". POST
	// /payments pays by a JSON body and shares the lock (same namespace).
	// The lock names its route and the caller's hash after the process
	// ("host=… pid=… route=/orders/$id/pay caller=#…"), so the lock page
	// tells whose payment holds an order, and whose a refused one met.
	payOpts := []httplock.Option{
		httplock.WithNamespace("order"),
		httplock.WithLockOptions(padlock.Options{Wait: cfg.payWait}),
		middleware.WithCallerFrom(callerID),
		httplock.WithRedactor(cfg.KeyRedactor),
	}
	//
	// An order is its creator's: another caller's order is 404, as a
	// missing one is, and that is found before the lock (ownedOrder), so a
	// caller never takes, nor finds busy, the lock of an order not its own.
	payByPath := ownedOrder(s, keyfunc.Bind((*gin.Context).ShouldBindUri, func(u *orderURI) []string {
		return []string{strconv.FormatInt(u.ID, 10)}
	}), func(u *orderURI) int64 { return u.ID })
	api.POST("/orders/:id/pay", middleware.Lock(b.locker, payByPath,
		append(payOpts, httplock.WithResponder(s.lockRefused(&orderURI{}, fromPath, "the order id must be a positive integer")))...), s.pay)
	payByBody := ownedOrder(s, keyfunc.Bind(bindJSON, func(p *paymentRequest) []string {
		return []string{strconv.FormatInt(*p.OrderID, 10)}
	}), func(p *paymentRequest) int64 { return *p.OrderID })
	api.POST("/payments", middleware.Lock(b.locker, payByBody,
		append(payOpts, httplock.WithResponder(s.lockRefused(&paymentRequest{}, fromBody, "the body must be a JSON object whose order_id is a positive integer")))...), s.payment)

	// Jobs hold fleet-wide locks: an operator's action, never any
	// caller's (one caller could otherwise keep every job locked).
	api.POST("/jobs/:name/run", s.requireOperator, s.runJobRoute)
	s.engine = r
	for _, rt := range r.Routes() {
		s.routes = append(s.routes, route{method: rt.Method, segments: strings.Split(rt.Path, "/")})
	}
	return s, nil
}

// ownedOrder wraps key, a keyfunc.Bind key func whose T holds an order
// id (id reads it), so that the key is built only for an order of the
// authenticated caller. Another caller's order, like a missing one, is
// errNotFound, which lockRefused answers with 404 before any lock is
// taken: the answer, and its timing, are those of an order that does not
// exist. An order's owner never changes, so checking it before the lock
// is as good as checking it under the lock.
func ownedOrder[T any](s *server, key keyfunc.Func, id func(*T) int64) keyfunc.Func {
	return func(c *gin.Context) (string, error) {
		k, err := key(c)
		if err != nil {
			return "", err
		}
		v := keyfunc.Bound[T](c)
		if v == nil {
			return "", errors.New("the key func bound no order")
		}
		if _, err := s.store.order(c.Request.Context(), callerOf(c), id(v)); err != nil {
			return "", err
		}
		return k, nil
	}
}

// route is a route's method and template, split at '/'.
type route struct {
	method   string
	segments []string
}

// matches reports whether path, split at '/', fits the template.
func (rt route) matches(method string, path []string) bool {
	if rt.method != method || len(rt.segments) != len(path) {
		return false
	}
	for i, seg := range rt.segments {
		if strings.HasPrefix(seg, ":") {
			if path[i] == "" {
				return false
			}
		} else if seg != path[i] {
			return false
		}
	}
	return true
}

// noRoute answers a request no route takes: a redirect when the path is a
// route's with a trailing slash too many or too few (301 for GET and HEAD,
// 308 otherwise, which keeps the method and body), and 404 otherwise; both
// as problem+json.
func (s *server) noRoute(c *gin.Context) {
	r := c.Request
	path := r.URL.Path
	alt := path + "/"
	if len(path) > 1 && strings.HasSuffix(path, "/") {
		alt = strings.TrimSuffix(path, "/")
	}
	// "//host" would be a protocol-relative Location: an open redirect.
	if !strings.HasPrefix(alt, "//") && slices.ContainsFunc(s.routes, func(rt route) bool {
		return rt.matches(r.Method, strings.Split(alt, "/"))
	}) {
		status := http.StatusPermanentRedirect
		if r.Method == http.MethodGet || r.Method == http.MethodHead {
			status = http.StatusMovedPermanently
		}
		loc := (&url.URL{Path: alt, RawQuery: r.URL.RawQuery}).RequestURI()
		c.Header("Location", loc)
		writeProblem(c, newProblem(status, "this route is "+loc+"; see Location"))
		return
	}
	writeProblem(c, newProblem(http.StatusNotFound, "no such route; GET / lists them"))
}

// maxHeaderBytes bounds a request's header fields, as the app counts them
// (names, values, and 4 bytes each for ": " and CRLF). http.Server refuses
// larger ones itself at its MaxHeaderBytes, in plain text; below that, the
// app answers 431 as problem+json.
const maxHeaderBytes = 32 << 10

// limitHeaders refuses a request whose header fields take more than
// maxHeaderBytes.
func limitHeaders(c *gin.Context) {
	n := len(c.Request.RequestURI)
	for k, vs := range c.Request.Header {
		for _, v := range vs {
			n += len(k) + len(v) + 4
		}
	}
	if n > maxHeaderBytes {
		writeProblem(c, newProblem(http.StatusRequestHeaderFieldsTooLarge,
			fmt.Sprintf("the request's header fields take %d bytes, more than the %d allowed", n, maxHeaderBytes)))
	}
}

func (s *server) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.engine.ServeHTTP(w, r) }

// track counts the requests in flight, so shutdown can wait for them.
func (s *server) track(c *gin.Context) {
	s.inflight.Add(1)
	defer s.inflight.Done()
	c.Next()
}

func (s *server) logRequest(c *gin.Context) {
	start := time.Now()
	c.Next()
	s.logger.Info("request", "method", c.Request.Method, "path", c.Request.URL.Path,
		"status", c.Writer.Status(), "ms", time.Since(start).Milliseconds(), "caller", callerOf(c), "client", c.ClientIP())
}

func (s *server) recovered(c *gin.Context, v any) {
	s.logger.Error("handler panicked", "path", c.Request.URL.Path, "panic", v)
	writeProblem(c, newProblem(http.StatusInternalServerError, "internal error"))
}

// lockRefused returns the lock middleware's responder for a route whose key
// binds the request into req: it logs why a request did not get its lock,
// answers a request that does not bind as the handler would (the fields at
// fault, or notBound), and writes the middleware's problem otherwise.
func (s *server) lockRefused(req any, from, notBound string) httplock.Responder {
	return func(w http.ResponseWriter, r *http.Request, p *httplock.Problem) {
		switch {
		case errors.Is(p.Err, errNotFound):
			writeProblemTo(w, r, newProblem(http.StatusNotFound, "order not found"))
			return
		case p.Status == http.StatusConflict || p.Status == http.StatusLocked:
			s.logger.Info("lock busy", "lock", p.Namespace, "retry_after", p.RetryAfter.Round(time.Millisecond).String(), "path", r.URL.Path)
		case errors.Is(context.Cause(r.Context()), errShutdown):
			s.logger.Warn("request ended by the server: shutting down", "op", "waiting for the lock", "path", r.URL.Path)
			writeProblemTo(w, r, shutdownProblem())
			return
		case p.Status == http.StatusServiceUnavailable && errors.Is(p.Err, padlock.ErrUnavailable):
			why, in := explainUnavailable(p.Err, s.backend.lockTTL)
			s.logger.Warn("lock unavailable: "+why, "status", p.Status, "path", r.URL.Path, "err", p.Err)
			up := newProblem(p.Status, why)
			up.RetryAfter = in
			writeProblemTo(w, r, up)
			return
		case p.Status >= 500:
			s.logger.Warn("lock unavailable", "status", p.Status, "path", r.URL.Path, "err", p.Err)
		case errors.Is(p.Err, lockkey.ErrInvalidPart) || errors.Is(p.Err, lockkey.ErrBodyTooLarge):
			bp := bindProblem(p.Err, req, from)
			generic := bp.Detail == "the request "+from+" is invalid" || bp.Detail == "the request body could not be read"
			if bp.Status == http.StatusBadRequest && len(bp.Errors) == 0 && generic {
				bp.Detail = notBound
			}
			writeProblemTo(w, r, bp)
			return
		}
		httplock.WriteProblem(w, r, p)
	}
}

func (s *server) index(c *gin.Context) {
	c.JSON(http.StatusOK, gin.H{
		"service": "padlock example: orders and payments",
		"routes": []string{
			"POST /orders            {customer, amount_cents, currency} -> 201; with an Idempotency-Key a retry replays the first answer",
			"GET  /orders/:id        the order and its charges; only the caller that created an order sees or pays it (404 for others)",
			"POST /orders/:id/pay    pays once; locked per order (409 if busy)",
			"POST /payments          {order_id}: the same, by a JSON body; shares the order's lock",
			"POST /jobs/:name/run    operators only (403 for other callers); ?seconds=N (at most 30); one run per job at a time (409 if busy)",
			"GET  /healthz           ok, degraded (a lock node is down) or down (503); details on the admin listener's /healthz",
		},
		"jobs":  jobNames,
		"auth":  "every route but / and /healthz needs Authorization: Bearer <API key>",
		"admin": "the lock page /debug/locks, /locks, /metrics and the detailed /healthz are on the admin listener (ADMIN_ADDR, default 127.0.0.1:8081), not here",
	})
}

// createOrderRequest is the body of POST /orders.
// The amount is a pointer so that a missing amount breaks "required" and
// a zero one "gt", the rule it broke.
type createOrderRequest struct {
	Customer    string `json:"customer" binding:"required,max=100"`
	AmountCents *int64 `json:"amount_cents" binding:"required,gt=0,lte=100000000"`
	Currency    string `json:"currency" binding:"required,iso4217"`
}

func (r *createOrderRequest) check() []fieldError { return checkName("customer", r.Customer) }

func (s *server) createOrder(c *gin.Context) {
	var req createOrderRequest
	if err := bindJSON(c, &req); err != nil {
		writeProblem(c, bindProblem(err, &req, fromBody))
		return
	}
	o, err := s.store.createOrder(c.Request.Context(), callerOf(c), req.Customer, *req.AmountCents, req.Currency)
	if err != nil {
		s.fail(c, "creating order", err)
		return
	}
	s.logger.Info("order created", "order", o.ID, "amount_cents", o.AmountCents, "currency", o.Currency)
	c.Header("Location", "/orders/"+strconv.FormatInt(o.ID, 10))
	c.JSON(http.StatusCreated, o)
}

// orderURI is the :id of the order routes. The route always has one, so
// its only rule is "gt": "required" would refuse id 0 as missing.
type orderURI struct {
	ID int64 `uri:"id" binding:"gt=0"`
}

func (s *server) getOrder(c *gin.Context) {
	var uri orderURI
	if err := c.ShouldBindUri(&uri); err != nil {
		writeProblem(c, bindProblem(err, &uri, fromPath))
		return
	}
	ctx := c.Request.Context()
	o, err := s.store.order(ctx, callerOf(c), uri.ID)
	if err != nil {
		s.fail(c, "loading order", err)
		return
	}
	charges, err := s.store.charges(ctx, uri.ID)
	if err != nil {
		s.fail(c, "loading charges", err)
		return
	}
	c.JSON(http.StatusOK, gin.H{"order": o, "charges": charges})
}

// payResponse is the answer of a pay request: the one that charged, or
// one that found the order paid already and charged nothing.
type payResponse struct {
	Order       Order   `json:"order"`
	AlreadyPaid bool    `json:"already_paid"`
	Charge      *Charge `json:"charge"` // nil when nothing was charged
	Fence       int64   `json:"fence"`
}

// paymentRequest is the body of POST /payments. The id is a pointer so
// that a missing one breaks "required" and a zero one "gt", the rule it
// broke; once bound, it is set.
type paymentRequest struct {
	OrderID *int64 `json:"order_id" binding:"required,gt=0"`
}

// pay pays the order of the path, bound by the lock's key func: the handler
// reads the very id the lock is on.
func (s *server) pay(c *gin.Context) {
	uri := keyfunc.Bound[orderURI](c)
	if uri == nil {
		s.fail(c, "paying order", errors.New("the route has no key func binding the order id"))
		return
	}
	s.payOrder(c, uri.ID)
}

// payment pays the order of the JSON body, bound by the lock's key func.
func (s *server) payment(c *gin.Context) {
	p := keyfunc.Bound[paymentRequest](c)
	if p == nil {
		s.fail(c, "paying order", errors.New("the route has no key func binding the body"))
		return
	}
	s.payOrder(c, *p.OrderID)
}

// payOrder runs holding the order's lock (see the routes). Its fence goes to
// the store, which refuses the write of a holder that has been superseded.
func (s *server) payOrder(c *gin.Context, id int64) {
	ctx := c.Request.Context() // cancelled if the lock is lost
	fence := middleware.LockFrom(c).Fence()

	o, err := s.store.claim(ctx, callerOf(c), id, fence)
	if err != nil {
		s.fail(c, "claiming order", err)
		return
	}
	if o.Status == statusPaid {
		c.JSON(http.StatusOK, payResponse{Order: o, AlreadyPaid: true, Fence: fence})
		return
	}
	if err := s.authorize(ctx, o); err != nil {
		s.fail(c, "authorizing payment", err)
		return
	}
	o, ch, err := s.store.pay(ctx, callerOf(c), id, fence)
	if err != nil {
		s.fail(c, "paying order", err)
		return
	}
	s.logger.Info("order paid", "order", o.ID, "charge", ch.ID, "amount_cents", ch.AmountCents, "fence", fence)
	c.JSON(http.StatusOK, payResponse{Order: o, Charge: &ch, Fence: fence})
}

// fakeProvider stands in for a payment provider's authorization call.
func (s *server) fakeProvider(ctx context.Context, _ Order) error {
	t := time.NewTimer(s.cfg.providerLatency)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}

// shutdownProblem is the answer of a request the server ended at shutdown.
func shutdownProblem() *problem {
	p := newProblem(http.StatusServiceUnavailable, "the server is shutting down and ended this request before it finished; retry it")
	p.RetryAfter = time.Second
	return p
}

// fail answers c for err, an error of the work behind a route.
func (s *server) fail(c *gin.Context, what string, err error) {
	ctx := c.Request.Context()
	switch {
	case errors.Is(err, errNotFound):
		writeProblem(c, newProblem(http.StatusNotFound, "order not found"))
	case errors.Is(err, errStale):
		s.logger.Warn("write refused by the fence: a newer lock holder took over", "op", what, "path", c.Request.URL.Path)
		writeProblem(c, newProblem(http.StatusConflict, "another request took over this order; nothing was charged by this one"))
	case errors.Is(err, padlock.ErrLockLost) || errors.Is(context.Cause(ctx), padlock.ErrLockLost):
		s.logger.Warn("lock lost mid-request; stopped", "op", what, "path", c.Request.URL.Path)
		writeProblem(c, newProblem(http.StatusConflict, "the lock on this resource was lost before the work finished; nothing was committed by this request"))
	case errors.Is(context.Cause(ctx), errShutdown):
		s.logger.Warn("request ended by the server: shutting down", "op", what, "path", c.Request.URL.Path)
		writeProblem(c, shutdownProblem())
	case ctx.Err() != nil:
		s.logger.Info("request ended by the client", "op", what, "path", c.Request.URL.Path)
		writeProblem(c, newProblem(http.StatusServiceUnavailable, "the request was cancelled"))
	default:
		s.logger.Error(what, "err", err, "path", c.Request.URL.Path)
		writeProblem(c, newProblem(http.StatusInternalServerError, "internal error"))
	}
}
