package httplock

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"

	"github.com/padlockgo/padlock/internal/keyprobe"
)

// ErrNoLock is the error of KeyFor when the request takes no lock: it
// met no Lock or Limit on its way through the handler (a route without
// one, a 404, a middleware before the lock that refused it), or
// WithSkip lets it through without one.
var ErrNoLock = errors.New("httplock: the request takes no lock")

// KeyFor returns the key the first Lock or Limit middleware on r's way
// through h would lock, as it would pass it to padlock.Locker.Acquire
// (before the Locker's prefix): the key padlocktest's Lose and Busy take,
// and that padlock.Lock.Key and the lock page show. h is what serves the
// requests, the router with its middlewares (an http.ServeMux, a chi
// router, a gin.Engine: the Gin middleware.Lock answers too), and r a
// request as a client would send it. No lock is taken and no handler
// behind the lock runs.
//
// The key depends on the route, which is why KeyFor asks the router: the
// namespace is the route template unless WithNamespace sets one, and the
// router says which template a request matches. For order 42's payment,
// its id read with PathValue("id", lockkey.Int(64)) (or keyfunc.Param):
//
//	http.ServeMux, mux.Handle("POST /orders/{id}/pay", lock(h)):  "POST /orders/<id>/pay:42"
//	chi, r.With(lock).Post("/orders/{id}/pay", h):              "/orders/<id>/pay:42"
//	Gin, r.POST("/orders/:id/pay", middleware.Lock(...), h):    "/orders/$id/pay:42"
//	gorilla/mux, chi's r.Use(lock), or a Lock around a whole mux:
//	  no route template, so the namespace is WithNamespace's ("pay" gives "pay:42"),
//	  or without it none at all ("42")
//
// That is the namespace as lockkey.EscapeRoute writes it ('{' and '}'
// become '<' and '>', Gin's ':' becomes '$'), lockkey.Sep, then the
// escaped parts of the KeyFunc, joined by lockkey.Sep; a key longer than
// lockkey.MaxKeyLen is shortened by lockkey.Shorten. ServeMux's template
// holds the method when the route was registered with one; chi's never
// does.
//
// r goes through h as a request would, with a context that makes Lock and
// Limit answer KeyFor instead of taking their lock (and the idempotency
// middleware let it through untouched), and a ResponseWriter that keeps
// nothing. Middlewares before the lock run: r must carry what they need
// (credentials for an authentication step), and one with side effects of
// its own (a rate limiter, a log) sees one more request. A route without
// a Lock or Limit runs its handler, and KeyFor returns ErrNoLock. r's body
// is read and put back, so r can be sent afterwards.
//
// Errors: ErrNoLock, with the status r was answered with when something
// on its way answered it; the error of the KeyFunc when r is bad
// (matching lockkey.ErrMissingPart, ErrInvalidPart, ...), as Lock would
// refuse it with 400; an error reading r's body.
func KeyFor(h http.Handler, r *http.Request) (string, error) {
	if h == nil || r == nil {
		return "", errors.New("httplock: KeyFor: nil handler or request")
	}
	ctx, pr := keyprobe.With(r.Context())
	probe := r.Clone(ctx)
	if r.Body != nil && r.Body != http.NoBody {
		body, err := io.ReadAll(r.Body)
		_ = r.Body.Close()
		r.Body = io.NopCloser(bytes.NewReader(body))
		if err != nil {
			return "", fmt.Errorf("httplock: KeyFor: reading the request body: %w", err)
		}
		probe.Body = io.NopCloser(bytes.NewReader(body))
	}
	w := &probeWriter{}
	h.ServeHTTP(w, probe)
	key, ok, err := pr.Result()
	if !ok {
		status := w.status
		if status == 0 {
			status = http.StatusOK
		}
		return "", fmt.Errorf("%w: %s %s met no Lock or Limit on its way, and was answered %d %s",
			ErrNoLock, r.Method, r.URL.Path, status, http.StatusText(status))
	}
	return key, err
}

// probed answers the KeyFor that ctx carries, if any, with key, and
// returns the problem its face refuses the request with (which Refuse
// keeps to itself); nil when ctx carries none.
func probed(ctx context.Context, key string) *Problem {
	pr := keyprobe.From(ctx)
	if pr == nil {
		return nil
	}
	pr.Answer(key, nil)
	return newProblem(http.StatusConflict, "the lock key was asked for; no lock was taken", ErrNoLock)
}

// refusedProbe is KeyFor's error for a request refused before its lock.
func refusedProbe(p *Problem) error {
	if p.Err != nil {
		return fmt.Errorf("httplock: KeyFor: the request would be refused with %d: %w", p.Status, p.Err)
	}
	return fmt.Errorf("httplock: KeyFor: the request would be refused with %d: %s", p.Status, p.Detail)
}

// probeWriter is the ResponseWriter of KeyFor's request: it keeps the
// status and drops the rest.
type probeWriter struct {
	header http.Header
	status int
}

func (w *probeWriter) Header() http.Header {
	if w.header == nil {
		w.header = make(http.Header)
	}
	return w.header
}

func (w *probeWriter) WriteHeader(status int) {
	if w.status == 0 {
		w.status = status
	}
}

func (w *probeWriter) Write(b []byte) (int, error) {
	w.WriteHeader(http.StatusOK)
	return len(b), nil
}
