package main

import (
	"encoding/json"
	"log/slog"
	"net/http"

	"github.com/padlockgo/padlock"
	"github.com/padlockgo/padlock/lockkey"
	"github.com/padlockgo/padlock/lockview"
	"github.com/padlockgo/padlock/padlockslog"
)

// observability is how the app watches its locks: warnings in its log
// (keys redacted as on the admin side: logs travel further than it), the
// recorder behind the lock page and, in a build with the prometheus tag,
// OpenTelemetry metrics exported for Prometheus (see metrics.go).
type observability struct {
	recorder *lockview.Recorder
	metrics  *metrics
	observer padlock.Observer // all of the above, for padlock.WithObserver
}

func newObservability(logger *slog.Logger, redactor *lockkey.Redactor) (*observability, error) {
	m, err := newMetrics()
	if err != nil {
		return nil, err
	}
	o := &observability{recorder: lockview.NewRecorder(), metrics: m}
	o.observer = padlock.JoinObservers(o.recorder, m.observer(), padlockslog.New(logger, padlockslog.WithRedactor(redactor)))
	return o, nil
}

func (o *observability) close() { o.metrics.close() }

// adminHandler serves what only operators may see, on the admin listener
// (ADMIN_ADDR), never on the public one: the lock page (/debug/locks), the
// locks held in Redis as JSON (/locks) and Prometheus metrics (/metrics,
// in a build with the prometheus tag; 404 saying so otherwise).
// With ADMIN_TOKEN set every request needs "Authorization: Bearer
// <token>"; without it the listener must be one only operators reach
// (loadConfig allows only loopback then). Either way it answers only to
// localhost, IP addresses and ADMIN_HOSTS (lockview.AdminHosts): any other
// Host gets 421, as it is a web page reading the admin side through DNS
// rebinding. Keys are redacted to their namespace and a keyed hash (the
// same as in the log, with LOCK_KEY_SECRET) unless LOCK_VIEW_KEYS=1 or
// their namespace is in LOCK_VIEW_NAMESPACES.
func (s *server) adminHandler(o *observability) (http.Handler, error) {
	authorize := lockview.AdminListener
	if s.cfg.AdminToken != "" {
		authorize = lockview.BearerToken(s.cfg.AdminToken)
	}
	page, err := lockview.New(s.backend.locker, lockview.Config{Authorize: authorize, ShowKeys: s.cfg.LockViewKeys,
		Redactor: s.cfg.KeyRedactor, Recorder: o.recorder})
	if err != nil {
		return nil, err
	}
	mux := http.NewServeMux()
	mux.Handle("GET /debug/locks", page)
	mux.HandleFunc("GET /locks", s.locks)
	mux.HandleFunc("GET /healthz", s.adminHealthz)
	mux.Handle("GET /metrics", o.metrics.handler())
	return lockview.AdminHosts(s.cfg.AdminHosts...)(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !authorize(r) {
			w.Header().Set("WWW-Authenticate", `Bearer realm="padlock-example admin"`)
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		mux.ServeHTTP(w, r)
	})), nil
}

// maxListedLocks bounds the lock view, per node.
const maxListedLocks = 1000

// heldLock is one entry of /locks.
type heldLock struct {
	Key       string `json:"key,omitempty"` // as passed to Acquire; only with LOCK_VIEW_KEYS=1 or in LOCK_VIEW_NAMESPACES
	Namespace string `json:"namespace"`     // the key up to its first ':'
	KeyHash   string `json:"key_hash"`      // a keyed hash: tells keys apart without showing them
	Owner     string `json:"owner"`         // the holder's Options.Owner, or the start of its token
	TTLMS     int64  `json:"ttl_ms"`        // remaining lease
	Nodes     int    `json:"nodes,omitempty"`
}

// locks lists the locks held right now in Redis, by every instance of the
// app (padlock.Locker.Inspect). On Redlock a lock is listed once with the
// number of nodes holding it, and degraded says a node is down while a
// quorum still works.
func (s *server) locks(w http.ResponseWriter, r *http.Request) {
	in, err := s.backend.locker.Inspect(r.Context(), maxListedLocks)
	if err != nil {
		s.logger.Warn("lock view: inspect", "err", err)
		writeProblemTo(w, r, newProblem(http.StatusServiceUnavailable, "redis unreachable"))
		return
	}
	list := make([]heldLock, 0, len(in.Locks))
	for _, l := range in.Locks {
		k := s.cfg.KeyRedactor.Redact(l.Key)
		h := heldLock{Key: k.Key, Namespace: k.Namespace, KeyHash: k.Hash, Owner: l.Owner, TTLMS: l.TTL.Milliseconds()}
		if s.cfg.LockViewKeys {
			h.Key = l.Key
		}
		if h.Owner == "" && len(l.Token) > 8 {
			h.Owner = l.Token[:8] + "…"
		}
		if s.backend.mode == modeRedlock {
			h.Nodes = l.Nodes
		}
		list = append(list, h)
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{"redis": s.backend.desc, "locks": list, "truncated": in.Truncated, "degraded": in.Degraded})
}
