package ginidem_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/redis/go-redis/v9"

	"github.com/padlockgo/padlock"
	"github.com/padlockgo/padlock/idempotency"
	"github.com/padlockgo/padlock/idempotency/ginidem"
	"github.com/padlockgo/padlock/internal/handlertest"
	"github.com/padlockgo/padlock/internal/redistest"
	"github.com/padlockgo/padlock/keyfunc"
	"github.com/padlockgo/padlock/lockkey"
)

// orders is an order service behind Idempotency on a fresh Redis: POST
// /orders creates an order numbered by the handler's run count.
type orders struct {
	r    *gin.Engine
	l    *padlock.Locker
	srv  *redistest.Server
	rdb  *redis.Client
	runs atomic.Int64
}

func newOrders(t testing.TB, caller func(*gin.Context) (string, error), opts ...idempotency.Option) *orders {
	t.Helper()
	l, srv, rdb := newLocker(t)
	return ordersOn(l, srv, rdb, caller, opts...)
}

// newOrdersFor is newOrders with a client of its own for n requests at
// once: a connection each, and the time a loaded machine takes to serve
// them all (go-redis's pool timeout, and the test client's one-second
// reads, once failed such a burst with 503s).
func newOrdersFor(t testing.TB, n int, caller func(*gin.Context) (string, error), opts ...idempotency.Option) *orders {
	t.Helper()
	srv := redistest.Start(t)
	rdb := srv.Client(t, func(o *redis.Options) {
		o.PoolSize, o.PoolTimeout = n, 30*time.Second
		o.ReadTimeout, o.WriteTimeout = 10*time.Second, 10*time.Second
	})
	return ordersOn(handlertest.LockerOn(t, rdb), srv, rdb, caller, opts...)
}

func ordersOn(l *padlock.Locker, srv *redistest.Server, rdb *redis.Client, caller func(*gin.Context) (string, error), opts ...idempotency.Option) *orders {
	o := &orders{r: gin.New(), l: l, srv: srv, rdb: rdb}
	var reqID atomic.Int64
	o.r.Use(func(c *gin.Context) {
		// A middleware in front sets a header of its own per request.
		c.Header("X-Request-Id", strconv.FormatInt(reqID.Add(1), 10))
	})
	o.r.POST("/orders", ginidem.New(l, rdb, caller, opts...), o.create)
	return o
}

func (o *orders) create(c *gin.Context) {
	var in struct {
		Item string `json:"item"`
	}
	if err := c.ShouldBindJSON(&in); err != nil {
		c.JSON(http.StatusBadRequest, gin.H{"error": err.Error()})
		return
	}
	n := o.runs.Add(1)
	c.Header("Location", fmt.Sprintf("/orders/%d", n))
	c.JSON(http.StatusCreated, gin.H{"id": n, "item": in.Item})
}

// send serves one request with an Idempotency-Key field per key (none when
// keys is empty) and the given extra header fields, name then value.
func send(h http.Handler, method, target, body string, keys []string, header ...string) *httptest.ResponseRecorder {
	req := httptest.NewRequest(method, target, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	for _, k := range keys {
		req.Header.Add("Idempotency-Key", k)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, req)
	return w
}

func key(k string) []string { return []string{k} }

// checkReplay checks that w is a replay of first.
func checkReplay(t testing.TB, w, first *httptest.ResponseRecorder) {
	t.Helper()
	if w.Code != first.Code || w.Body.String() != first.Body.String() {
		t.Fatalf("got %d %s, want the replay of %d %s", w.Code, w.Body, first.Code, first.Body)
	}
	if got := w.Header().Get("Idempotent-Replayed"); got != "true" {
		t.Fatalf("got Idempotent-Replayed %q, want true", got)
	}
}

// A retry after completion gets the first response back, status, handler
// headers and body, marked as a replay; the handler ran once; headers of
// middlewares in front are the retry's own.
func TestIdempotencyReplay(t *testing.T) {
	o := newOrders(t, tester)
	first := send(o.r, "POST", "/orders", `{"item":"book"}`, key(`"k1"`))
	if first.Code != http.StatusCreated || first.Body.String() != `{"id":1,"item":"book"}` {
		t.Fatalf("got %d %s, want 201 {\"id\":1,\"item\":\"book\"}", first.Code, first.Body)
	}
	for _, h := range []string{"Idempotent-Replayed", "Idempotent-Replayable"} {
		if v := first.Header().Get(h); v != "" {
			t.Fatalf("got %s %q on the first response, want none", h, v)
		}
	}
	// The bare form of the same key is the same key.
	for i, k := range []string{`"k1"`, "k1", `"k1";v=2`} {
		w := send(o.r, "POST", "/orders", `{"item":"book"}`, key(k))
		checkReplay(t, w, first)
		for _, h := range []string{"Content-Type", "Location"} {
			if got, want := w.Header().Get(h), first.Header().Get(h); got != want {
				t.Fatalf("got %s %q, want %q", h, got, want)
			}
		}
		if got, want := w.Header().Get("X-Request-Id"), strconv.Itoa(i+2); got != want {
			t.Fatalf("got X-Request-Id %q, want the retry's own %q", got, want)
		}
	}
	if got := o.runs.Load(); got != 1 {
		t.Fatalf("got %d handler runs, want 1", got)
	}
}

// Every refusal the middleware makes: status, problem body, and that the
// handler did not run.
func TestIdempotencyRefusals(t *testing.T) {
	o := newOrders(t, tester, idempotency.WithMaxBodyBytes(64))
	o.r.PUT("/orders", ginidem.New(o.l, o.rdb, tester), o.create)
	o.r.POST("/orders/:id/pay", ginidem.New(o.l, o.rdb, tester), o.create)
	for _, target := range []string{"/orders", "/orders/1/pay"} {
		if w := send(o.r, "POST", target, `{"item":"book"}`, key("used")); w.Code != http.StatusCreated {
			t.Fatalf("setup: got %d %s, want 201", w.Code, w.Body)
		}
	}
	runs := o.runs.Load()

	tests := []struct {
		name, method, target, body string
		keys                       []string
		want                       int
		wantDetail                 string
	}{
		{"missing key", "POST", "/orders", `{}`, nil, 400, "this operation requires an Idempotency-Key header"},
		{"empty key", "POST", "/orders", `{}`, key(`""`), 400, "invalid Idempotency-Key: empty"},
		{"key too long", "POST", "/orders", `{}`, key(strings.Repeat("k", 256)), 400, "invalid Idempotency-Key: longer than 255 bytes"},
		{"bad charset", "POST", "/orders", `{}`, key("k\x7f"), 400, "invalid Idempotency-Key: unexpected byte 0x7F"},
		{"unterminated", "POST", "/orders", `{}`, key(`"k1`), 400, "invalid Idempotency-Key: missing closing quote"},
		{"two fields", "POST", "/orders", `{}`, []string{"k1", "k2"}, 400, "more than one Idempotency-Key field"},
		{"body too large", "POST", "/orders", `{"item":"` + strings.Repeat("x", 64) + `"}`, key("k1"), 413, "request body too large (limit 64 bytes)"},
		{"other body", "POST", "/orders", `{"item":"pen"}`, key("used"), 422, "this Idempotency-Key was already used for a different request"},
		{"other method, same route", "PUT", "/orders", `{"item":"book"}`, key("used"), 422, "this Idempotency-Key was already used for a different request"},
		{"other resource, same route", "POST", "/orders/2/pay", `{"item":"book"}`, key("used"), 422, "this Idempotency-Key was already used for a different request"},
		{"other query", "POST", "/orders/1/pay?x=1", `{"item":"book"}`, key("used"), 422, "this Idempotency-Key was already used for a different request"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := send(o.r, tt.method, tt.target, tt.body, tt.keys)
			p := checkProblem(t, w, tt.want)
			if !strings.HasPrefix(p.Detail, tt.wantDetail) {
				t.Fatalf("got detail %q, want %q", p.Detail, tt.wantDetail)
			}
			if p.Instance != strings.Split(tt.target, "?")[0] {
				t.Fatalf("got instance %q, want %q", p.Instance, tt.target)
			}
			if ra := w.Header().Get("Retry-After"); ra != "" {
				t.Fatalf("got Retry-After %q, want none", ra)
			}
		})
	}
	if got := o.runs.Load(); got != runs {
		t.Fatalf("got %d handler runs, want %d", got, runs)
	}
}

// The handler's own errors are replayed like successes (as Stripe does),
// except a validation failure (400, 422), where the handler did nothing,
// and 5xx, 408 and 429, which a retry runs again: at once, or after 408,
// 503 and 504, which a timeout inside the middleware answers while the
// handler runs on, once the key's lease ran out (409 until then).
// StrictStoreStatus stores validation failures too.
func TestIdempotencyStoredStatuses(t *testing.T) {
	tests := []struct {
		status         int
		stored, strict bool
	}{
		{http.StatusOK, true, true},
		{http.StatusNoContent, true, true},
		{http.StatusSeeOther, true, true},
		{http.StatusBadRequest, false, true},
		{http.StatusNotFound, true, true},
		{http.StatusConflict, true, true},
		{http.StatusUnprocessableEntity, false, true},
		{http.StatusRequestTimeout, false, false},
		{http.StatusTooManyRequests, false, false},
		{http.StatusInternalServerError, false, false},
		{http.StatusServiceUnavailable, false, false},
		{http.StatusGatewayTimeout, false, false},
	}
	l, _, rdb := newLocker(t)
	for _, mode := range []string{"default", "strict"} {
		for _, tt := range tests {
			t.Run(mode+"/"+strconv.Itoa(tt.status), func(t *testing.T) {
				var opts []idempotency.Option
				stored := tt.stored
				if mode == "strict" {
					opts = append(opts, idempotency.WithStoreStatus(idempotency.StrictStoreStatus))
					stored = tt.strict
				}
				var runs atomic.Int64
				r := gin.New()
				r.POST("/pay", ginidem.New(l, rdb, tester, opts...), func(c *gin.Context) {
					n := runs.Add(1)
					if tt.status == http.StatusNoContent {
						c.Status(tt.status)
						return
					}
					c.String(tt.status, "run %d", n)
				})
				k := key(mode + "-status-" + strconv.Itoa(tt.status))
				first := send(r, "POST", "/pay", "", k)
				second := send(r, "POST", "/pay", "", k)
				if first.Code != tt.status {
					t.Fatalf("got status %d, want %d", first.Code, tt.status)
				}
				if stored {
					checkReplay(t, second, first)
					if got := runs.Load(); got != 1 {
						t.Fatalf("got %d handler runs, want 1", got)
					}
					return
				}
				if got := first.Header().Get("Idempotent-Replayable"); got != "false" {
					t.Fatalf("got Idempotent-Replayable %q, want false", got)
				}
				switch tt.status {
				case http.StatusRequestTimeout, http.StatusServiceUnavailable, http.StatusGatewayTimeout:
					checkProblem(t, second, http.StatusConflict)
					return
				}
				if second.Body.String() != "run 2" || second.Header().Get("Idempotent-Replayed") != "" {
					t.Fatalf("got %d %q (replayed %q), want a second run", second.Code, second.Body, second.Header().Get("Idempotent-Replayed"))
				}
			})
		}
	}
}

// A request the handler refused as invalid, retried with the same key and
// a corrected body, runs and creates the order; with StrictStoreStatus
// the key stays bound to the invalid request (422).
func TestIdempotencyCorrectedRetry(t *testing.T) {
	tests := []struct {
		name   string
		opts   []idempotency.Option
		want   int
		orders int64
	}{
		{"default", nil, http.StatusCreated, 1},
		{"strict", []idempotency.Option{idempotency.WithStoreStatus(idempotency.StrictStoreStatus)}, http.StatusUnprocessableEntity, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := newOrders(t, tester, tt.opts...)
			if w := send(o.r, "POST", "/orders", `{"item":`, key("k1")); w.Code != http.StatusBadRequest {
				t.Fatalf("got %d %s for the malformed body, want the handler's 400", w.Code, w.Body)
			}
			w := send(o.r, "POST", "/orders", `{"item":"book"}`, key("k1"))
			if w.Code != tt.want || o.runs.Load() != tt.orders {
				t.Fatalf("corrected retry: got %d %s, %d orders, want %d and %d orders", w.Code, w.Body, o.runs.Load(), tt.want, tt.orders)
			}
		})
	}
}

// A panicking handler stores nothing and lets the key go, whether gin's
// recovery sits in front of the middleware or behind it; a retry runs the
// handler again.
func TestIdempotencyPanic(t *testing.T) {
	recovery := gin.CustomRecoveryWithWriter(io.Discard, func(c *gin.Context, err any) {
		c.String(http.StatusInternalServerError, "recovered: %v", err)
	})
	tests := []struct {
		name  string
		setup func(r *gin.Engine, idem, h gin.HandlerFunc)
		// The first response: a clean 500 from a recovery in front; from
		// one behind, what gin's own writer would send, the partial 200.
		wantCode int
		wantBody string
	}{
		{"recovery in front", func(r *gin.Engine, idem, h gin.HandlerFunc) {
			r.Use(recovery)
			r.POST("/pay", idem, h)
		}, http.StatusInternalServerError, "recovered: boom"},
		{"recovery behind", func(r *gin.Engine, idem, h gin.HandlerFunc) {
			r.POST("/pay", idem, recovery, h)
		}, http.StatusOK, "partial recovered: boom"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l, srv, rdb := newLocker(t)
			var runs atomic.Int64
			r := gin.New()
			tt.setup(r, ginidem.New(l, rdb, tester), func(c *gin.Context) {
				c.Header("X-Partial", "yes")
				c.String(http.StatusOK, "partial ")
				if runs.Add(1) == 1 {
					panic("boom")
				}
				c.String(http.StatusOK, "done")
			})
			w := send(r, "POST", "/pay", "", key("k1"))
			if w.Code != tt.wantCode || w.Body.String() != tt.wantBody {
				t.Fatalf("got %d %q, want %d %q", w.Code, w.Body, tt.wantCode, tt.wantBody)
			}
			if n, err := rdb.Exists(context.Background(), "padlock:idempotency:/pay:tester:k1").Result(); n != 0 || err != nil {
				t.Fatalf("got %d, %v for the record after the panic (keys %v), want none", n, err, srv.Keys(t))
			}
			w = send(r, "POST", "/pay", "", key("k1"))
			if w.Code != http.StatusOK || w.Body.String() != "partial done" || w.Header().Get("Idempotent-Replayed") != "" {
				t.Fatalf("got %d %q, want a second run: 200 \"partial done\"", w.Code, w.Body)
			}
			checkReplay(t, send(r, "POST", "/pay", "", key("k1")), w)
		})
	}
}

// A response over the size limit is sent whole, marked as not replayable,
// and a retry gets 409 without Retry-After instead of a second run. The
// same for a response the handler flushed.
func TestIdempotencyNotReplayable(t *testing.T) {
	tests := []struct {
		name    string
		handler func(c *gin.Context)
		want    string
	}{
		{"too large", func(c *gin.Context) {
			c.Header("Content-Type", "text/plain")
			for range 10 {
				c.String(http.StatusOK, "0123456789")
			}
		}, strings.Repeat("0123456789", 10)},
		{"flushed", func(c *gin.Context) {
			c.String(http.StatusAccepted, "event 1\n")
			c.Writer.Flush()
			c.String(http.StatusAccepted, "event 2\n")
		}, "event 1\nevent 2\n"},
	}
	l, _, rdb := newLocker(t)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var runs atomic.Int64
			r := gin.New()
			r.POST("/export", ginidem.New(l, rdb, tester, idempotency.WithMaxResponseBytes(32)), func(c *gin.Context) {
				runs.Add(1)
				tt.handler(c)
			})
			w := send(r, "POST", "/export", "", key(strconv.Quote(tt.name)))
			if w.Body.String() != tt.want || w.Header().Get("Idempotent-Replayable") != "false" {
				t.Fatalf("got %d %q, Idempotent-Replayable %q, want %q and false", w.Code, w.Body, w.Header().Get("Idempotent-Replayable"), tt.want)
			}
			w = send(r, "POST", "/export", "", key(strconv.Quote(tt.name)))
			p := checkProblem(t, w, http.StatusConflict)
			if !strings.Contains(p.Detail, "cannot be replayed") {
				t.Fatalf("got detail %q, want it to say the response cannot be replayed", p.Detail)
			}
			if ra := w.Header().Get("Retry-After"); ra != "" {
				t.Fatalf("got Retry-After %q, want none: retrying will not help", ra)
			}
			if got := runs.Load(); got != 1 {
				t.Fatalf("got %d handler runs, want 1", got)
			}
		})
	}
}

// Without OptionalKey a key is required; with it, requests without one run
// the handler each time and leave nothing in Redis.
func TestIdempotencyOptionalKey(t *testing.T) {
	o := newOrders(t, tester, idempotency.WithOptionalKey())
	for i := 1; i <= 2; i++ {
		w := send(o.r, "POST", "/orders", `{"item":"book"}`, nil)
		if want := fmt.Sprintf(`{"id":%d,"item":"book"}`, i); w.Code != http.StatusCreated || w.Body.String() != want {
			t.Fatalf("got %d %s, want 201 %s", w.Code, w.Body, want)
		}
	}
	if keys := o.srv.Keys(t); len(keys) != 0 {
		t.Fatalf("got keys %v in Redis, want none", keys)
	}
	first := send(o.r, "POST", "/orders", `{"item":"book"}`, key("k1"))
	checkReplay(t, send(o.r, "POST", "/orders", `{"item":"book"}`, key("k1")), first)
}

// The record: where it lives, how long, and that a retry after the
// retention runs the handler again.
func TestIdempotencyRecord(t *testing.T) {
	o := newOrders(t, func(c *gin.Context) (string, error) {
		return "client:1", nil
	}, idempotency.WithRetention(time.Hour))
	send(o.r, "POST", "/orders", `{"item":"book"}`, key("k:1"))
	recKey := "padlock:idempotency:/orders:client%3A1:k%3A1"
	ttl, err := o.rdb.PTTL(context.Background(), recKey).Result()
	if err != nil || ttl < 59*time.Minute || ttl > time.Hour {
		t.Fatalf("got PTTL %v, %v for %s (keys %v), want about 1h", ttl, err, recKey, o.srv.Keys(t))
	}

	short := newOrders(t, tester, idempotency.WithRetention(200*time.Millisecond), idempotency.WithRecordPrefix("app:idem:"))
	send(short.r, "POST", "/orders", `{"item":"book"}`, key("k1"))
	if n, _ := short.rdb.Exists(context.Background(), "app:idem:/orders:tester:k1").Result(); n != 1 {
		t.Fatalf("got keys %v, want app:idem:/orders:tester:k1", short.srv.Keys(t))
	}
	time.Sleep(300 * time.Millisecond)
	w := send(short.r, "POST", "/orders", `{"item":"book"}`, key("k1"))
	if w.Code != http.StatusCreated || w.Header().Get("Idempotent-Replayed") != "" || short.runs.Load() != 2 {
		t.Fatalf("got %d %s after the retention, %d runs, want a second run", w.Code, w.Body, short.runs.Load())
	}
}

// The handler can bind the body the middleware read, sees the key and the
// in-flight lock, and middlewares in front get their request back.
func TestIdempotencyHandlerView(t *testing.T) {
	l, _, rdb := newLocker(t)
	r := gin.New()
	var outerCtxErr error
	var outerKey string
	r.Use(func(c *gin.Context) {
		c.Next()
		outerCtxErr = c.Request.Context().Err()
		outerKey = ginidem.KeyFrom(c)
	})
	r.POST("/orders/:id/pay", ginidem.New(l, rdb, tester), func(c *gin.Context) {
		var a, b struct{ Amount int }
		if err := c.ShouldBindBodyWithJSON(&a); err != nil {
			t.Errorf("ShouldBindBodyWithJSON: %v", err)
		}
		if err := c.ShouldBindJSON(&b); err != nil {
			t.Errorf("ShouldBindJSON: %v", err)
		}
		lk := padlock.FromContext(c.Request.Context())
		if lk == nil {
			t.Error("LockFrom: got nil, want the in-flight lock")
			return
		}
		c.String(http.StatusOK, "%s %d %d %s", ginidem.KeyFrom(c), a.Amount, b.Amount, lk.Key())
	})
	w := send(r, "POST", "/orders/7/pay", `{"amount":250}`, key(`"pay 7"`))
	if want := "pay 7 250 250 idempotency:/orders/$id/pay:tester:pay 7"; w.Code != http.StatusOK || w.Body.String() != want {
		t.Fatalf("got %d %q, want 200 %q", w.Code, w.Body, want)
	}
	if outerCtxErr != nil || outerKey != "pay 7" {
		t.Fatalf("got outer middleware context error %v, key %q, want nil and the key", outerCtxErr, outerKey)
	}
	if got := ginidem.KeyFrom(&gin.Context{}); got != "" {
		t.Fatalf("got KeyFrom %q on a bare context, want empty", got)
	}
}

// Redis gone: 503 and no handler run, on the replay GET and on the lock.
func TestIdempotencyRedisDown(t *testing.T) {
	o := newOrders(t, tester)
	o.srv.Kill(t)
	w := send(o.r, "POST", "/orders", `{"item":"book"}`, key("k1"))
	p := checkProblem(t, w, http.StatusServiceUnavailable)
	if p.Detail != "the idempotency store is unavailable" || o.runs.Load() != 0 {
		t.Fatalf("got detail %q, %d runs, want the idempotency store is unavailable and none", p.Detail, o.runs.Load())
	}
}

// A record Redis holds that is not one (another app wrote the key) is a
// 500, never a run.
func TestIdempotencyBadRecord(t *testing.T) {
	o := newOrders(t, tester)
	o.rdb.Set(context.Background(), "padlock:idempotency:/orders:tester:k1", "not a record", 0)
	w := send(o.r, "POST", "/orders", `{"item":"book"}`, key("k1"))
	checkProblem(t, w, http.StatusInternalServerError)
	if o.runs.Load() != 0 {
		t.Fatalf("got %d runs, want 0", o.runs.Load())
	}
}

// Caller and fingerprint funcs: errors from the request are 400, the app's
// own are 500 with a detail that does not leak them.
func TestIdempotencyFuncErrors(t *testing.T) {
	l, _, rdb := newLocker(t)
	r := gin.New()
	h := func(c *gin.Context) { t.Error("handler ran") }
	r.POST("/header", ginidem.New(l, rdb, keyfunc.Header("X-Client-ID", lockkey.Text())), h)
	r.POST("/empty", ginidem.New(l, rdb, func(*gin.Context) (string, error) { return "", nil }), h)
	r.POST("/down", ginidem.New(l, rdb, func(*gin.Context) (string, error) {
		return "", fmt.Errorf("token store down")
	}), h)
	r.POST("/fp", ginidem.New(l, rdb, tester, idempotency.WithFingerprint(func(*http.Request, []byte) (string, error) {
		return "", fmt.Errorf("secret")
	})), h)
	tests := []struct {
		target     string
		want       int
		wantDetail string
	}{
		{"/header", 400, `missing key part "header X-Client-ID"`},
		{"/empty", 401, "this operation requires an authenticated caller"},
		{"/down", 500, "the caller could not be identified"},
		{"/fp", 500, "the request could not be fingerprinted"},
	}
	for _, tt := range tests {
		t.Run(tt.target, func(t *testing.T) {
			p := checkProblem(t, send(r, "POST", tt.target, "", key("k1")), tt.want)
			if p.Detail != tt.wantDetail {
				t.Fatalf("got detail %q, want %q", p.Detail, tt.wantDetail)
			}
		})
	}
}

// Bad configuration panics at construction, naming the option.
func TestIdempotencyOptionsPanic(t *testing.T) {
	l, _, rdb := newLocker(t)
	tests := []struct {
		name string
		l    *padlock.Locker
		rdb  redis.UniversalClient
		opts []idempotency.Option
		want string
	}{
		{"nil locker", nil, rdb, nil, "ginidem: New: nil *padlock.Locker"},
		{"nil client", l, nil, nil, "ginidem: New: nil redis client"},
		{"nil option", l, rdb, []idempotency.Option{nil}, "ginidem: New: option 1 is nil"},
		{"nil fingerprint", l, rdb, []idempotency.Option{idempotency.WithFingerprint(nil)}, "ginidem: New: WithFingerprint: nil Fingerprint"},
		{"nil store status", l, rdb, []idempotency.Option{idempotency.WithStoreStatus(nil)}, "ginidem: New: WithStoreStatus: nil func"},
		{"retention", l, rdb, []idempotency.Option{idempotency.WithRetention(0)}, "ginidem: New: WithRetention: 0s, want >= 1ms"},
		{"max response", l, rdb, []idempotency.Option{idempotency.WithMaxResponseBytes(0)}, "ginidem: New: WithMaxResponseBytes: 0, want > 0"},
		{"max body", l, rdb, []idempotency.Option{idempotency.WithMaxBodyBytes(-1)}, "ginidem: New: WithMaxBodyBytes: -1, want > 0"},
		{"prefix", l, rdb, []idempotency.Option{idempotency.WithRecordPrefix("{x}")}, `ginidem: New: WithRecordPrefix: "{x}", want a non-empty prefix without '{' or '}'`},
		{"empty prefix", l, rdb, []idempotency.Option{idempotency.WithRecordPrefix("")}, `ginidem: New: WithRecordPrefix: "", want a non-empty prefix without '{' or '}'`},
		{"wait", l, rdb, []idempotency.Option{idempotency.WithWaitForInFlight(-time.Second)}, "ginidem: New: WithWaitForInFlight: -1s, want >= 0"},
		{"ttl", l, rdb, []idempotency.Option{idempotency.WithInFlightTTL(time.Microsecond)}, "ginidem: New: WithInFlightTTL: 1µs, want >= 1ms"},
		{"store timeout", l, rdb, []idempotency.Option{idempotency.WithStoreTimeout(0)}, "ginidem: New: WithStoreTimeout: 0s, want > 0"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			defer func() {
				if got := fmt.Sprint(recover()); got != tt.want {
					t.Fatalf("got panic %q, want %q", got, tt.want)
				}
			}()
			ginidem.New(tt.l, tt.rdb, tester, tt.opts...)
		})
	}
}
