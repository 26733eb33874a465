// Package lockview serves a live view of a padlock Locker's locks: an
// http.Handler, mounted as net/http/pprof is, that answers with an HTML
// page refreshing itself every few seconds, or with JSON (?format=json, or
// Accept: application/json). It shows the locks this process holds (key,
// holder, fence, since, lease left, renewals, waiters), the keys it waits
// for, the locks every process holds in Redis (Locker.Inspect: holder,
// lease left, on Redlock the nodes holding each), both in one order
// (namespace, then key), and with a Recorder what this process saw: the
// last acquisitions refused because their key was busy (the middlewares'
// 409s, 423s and 429s), each with who held the key then, and the last
// locks lost, each with its date and time zone, the lag of renewals, and
// a picture of the last 5 minutes per namespace (locks taken, waited for,
// refused, lost, in bars of 10 seconds). A note says what a fence is: a
// number larger than every earlier holder's, for a store to compare.
//
// A holder is named by its Options.Owner and Caller: the process, and who
// in it took the lock as the face that took it says: the route and a
// keyed hash of the caller (httplock, middleware, idempotency), the
// function (decorator), the job (schedule),
// "host=web-1 pid=4121 route=POST /orders/<id>/pay caller=#3fa9c1e2d4b5".
// The faces build it with no raw request data: a caller and a job's name
// are hashed as keys are (share the Redactor, below, with them).
//
// The view is not public. Lock keys carry request data (client ids,
// idempotency keys), so:
//
//   - New requires Config.Authorize, which decides per request. Use
//     BearerToken for scripts, your own check of a session for browsers,
//     or AdminListener when the handler is mounted only on a listener that
//     only operators reach (another port on loopback, a private network).
//     A request it refuses gets 401 and no data.
//   - A listener that trusts whoever reaches it must check the Host too,
//     or a web page in an operator's browser can read it through DNS
//     rebinding: AdminListener authorizes loopback names and IP literals
//     only, and AdminHosts, around the whole admin handler (the view,
//     metrics, the rest), adds the names operators use and answers other
//     Hosts with 421 Misdirected Request.
//   - Keys are redacted unless Config.ShowKeys: a view shows each key's
//     namespace (the part before the first ':') and a short keyed hash
//     (Config.Redactor, an HMAC under a secret), enough to tell locks
//     apart, not to read them, nor to find them by hashing guesses. Keys of
//     the namespaces the operator allowlists are shown as they are:
//     Config.Redactor from lockkey.NewRedactor with
//     lockkey.WithReadableNamespaces("job") tells "job:nightly-report"
//     from "job:export", and still shows an order as "order:… #<hash>".
//     None is readable by default.
//   - Holders are shown as the locks carry them: the faces write a
//     caller, and a job's name in a namespace their Redactor does not make
//     readable, as keyed hashes into the lock itself, so no setting of the
//     view shows them as they are.
//
// Mount it on an admin listener:
//
//	rec := lockview.NewRecorder()
//	l, err := padlock.New(rdb, padlock.WithObserver(rec))
//	view, err := lockview.New(l, lockview.Config{Authorize: lockview.AdminListener, Recorder: rec})
//	admin := http.NewServeMux()
//	admin.Handle("/debug/locks", view)
//	go http.ListenAndServe("127.0.0.1:6060", lockview.AdminHosts()(admin))
package lockview

import (
	"crypto/subtle"
	_ "embed"
	"encoding/json"
	"errors"
	"html/template"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/padlockgo/padlock"
	"github.com/padlockgo/padlock/lockkey"
)

// Config configures New.
type Config struct {
	// Authorize reports whether a request may see the view. Required.
	Authorize func(r *http.Request) bool
	// ShowKeys shows lock keys as they are. Default: false, each key is
	// shown as Redactor shows it.
	ShowKeys bool
	// Redactor redacts the keys: its secret keys the hashes, and its
	// readable namespaces are shown as they are. Share one with the
	// process's logs (padlockslog.WithRedactor) so that a key has one hash
	// in both. Default: nil, the process's random secret and no readable
	// namespace (see lockkey.Redactor).
	Redactor *lockkey.Redactor
	// Recorder adds the recent losses and renewal lag it kept. Default:
	// none, and the page leaves those out.
	Recorder *Recorder
	// Refresh is how often the page reloads its data. Default: 2s.
	Refresh time.Duration
	// Limit bounds the locks listed from Redis per node (see
	// Locker.Inspect). Default: padlock.DefaultInspectLimit.
	Limit int
	// NoInspect leaves out the locks in Redis (Locker.Inspect): the page
	// then shows this process's locks only, and costs Redis nothing.
	// Default: false.
	NoInspect bool
}

// ErrNoAuthorize is the error of New without Config.Authorize.
var ErrNoAuthorize = errors.New("lockview: Config.Authorize is required: the view lists lock keys (use BearerToken, your own check, or AdminListener on a listener only operators reach)")

// AdminListener authorizes every request that names the listener by a
// loopback name (localhost, *.localhost) or an IP literal, or that
// AdminHosts let through: use it only for a handler mounted on a listener
// that only operators can reach. Other Hosts are refused (401), as a
// request naming the listener by a name of its own is a page in an
// operator's browser reading it through DNS rebinding. To reach the
// listener by a DNS name, and to answer foreign Hosts with a clear 421,
// wrap the listener's handler in AdminHosts with that name.
func AdminListener(r *http.Request) bool { return adminHost(r) }

// BearerToken authorizes requests that carry "Authorization: Bearer
// <token>", compared in constant time. An empty token authorizes nobody.
func BearerToken(token string) func(*http.Request) bool {
	want := []byte("Bearer " + token)
	return func(r *http.Request) bool {
		got := []byte(r.Header.Get("Authorization"))
		return token != "" && subtle.ConstantTimeCompare(got, want) == 1
	}
}

type handler struct {
	l *padlock.Locker
	c Config
}

// New returns the view of l. It fails with ErrNoAuthorize when
// c.Authorize is nil.
func New(l *padlock.Locker, c Config) (http.Handler, error) {
	if c.Authorize == nil {
		return nil, ErrNoAuthorize
	}
	if l == nil {
		return nil, errors.New("lockview: Locker is nil")
	}
	if c.Refresh <= 0 {
		c.Refresh = 2 * time.Second
	}
	return &handler{l: l, c: c}, nil
}

func (h *handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	if !h.c.Authorize(r) {
		w.Header().Set("WWW-Authenticate", `Bearer realm="padlock"`)
		http.Error(w, "unauthorized", http.StatusUnauthorized)
		return
	}
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	if r.URL.Query().Get("format") == "json" || strings.Contains(r.Header.Get("Accept"), "application/json") {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(h.snapshot(r))
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Content-Security-Policy", "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; connect-src 'self'")
	_ = page.Execute(w, struct{ RefreshMS int64 }{h.c.Refresh.Milliseconds()})
}

// Key is a lock key as the view shows it.
type Key struct {
	Key       string `json:"key,omitempty"` // only with Config.ShowKeys, or in a readable namespace
	Namespace string `json:"namespace"`     // lockkey.Redacted.Namespace: the part before the first ':'
	Hash      string `json:"key_hash"`      // lockkey.Redacted.Hash
}

func (h *handler) key(k string) Key {
	r := h.c.Redactor.Redact(k)
	v := Key{Key: r.Key, Namespace: r.Namespace, Hash: r.Hash}
	if h.c.ShowKeys {
		v.Key = k
	}
	return v
}

// Snapshot is the view's JSON. Held, Waiting and Redis.Locks are in one
// order, by namespace, then key (or its hash when redacted); Losses and
// Refusals newest first.
type Snapshot struct {
	Generated time.Time `json:"generated"`          // when the view was made
	Locker    string    `json:"locker"`             // the Locker, as its String method names it
	Held      []Held    `json:"held"`               // the locks this process holds (Locker.Held)
	Waiting   []Waiting `json:"waiting"`            // the keys this process waits for (Locker.Waiting)
	Redis     *Redis    `json:"redis,omitempty"`    // what Locker.Inspect found; nil with Config.NoInspect
	Losses    []Lost    `json:"losses"`             // the last locks lost, with a Recorder
	Refusals  []Refused `json:"refusals"`           // the last acquisitions refused, with a Recorder
	Renewals  *Renewals `json:"renewals,omitempty"` // the renewals seen, with a Recorder; nil without
	// Activity is the picture of the last minutes, per namespace, with a
	// Recorder: ActivityBuckets counts each, oldest first, the last one
	// the bucket in progress.
	Activity []Activity `json:"activity"`
	// ActivityBucket is the span of one bucket of Activity, in
	// milliseconds (ActivityBucket).
	ActivityBucket int64 `json:"activity_bucket_ms"`
}

// Held is one lock this process holds. Owner, here and in RedisEntry,
// names the holder: its Options.Owner and Caller, the process and who in
// it took the lock ("host=web-1 pid=4121 route=POST /orders/<id>/pay
// caller=#3fa9c1e2d4b5", "... func=orders.Service.Pay", "... job=#<hash>
// every=1m0s"), as the faces build it, with no raw request data; or the
// start of its token when it named itself in neither.
type Held struct {
	Key
	Owner       string `json:"owner"`         // the holder, as above
	Fence       int64  `json:"fence"`         // the lock's fence (0 on a Redlock Locker)
	HeldMS      int64  `json:"held_ms"`       // how long it has been held, in milliseconds
	LeaseLeftMS int64  `json:"lease_left_ms"` // how long it is surely held without another renewal
	Renew       bool   `json:"renew"`         // false for a fixed lease (Options.NoRenew)
	Renewals    int    `json:"renewals"`      // the renewals Redis confirmed
	Waiters     int    `json:"waiters"`       // the Acquire calls of this process that wait for the key
}

// Waiting is one key this process waits for.
type Waiting struct {
	Key
	Waiters   int   `json:"waiters"`    // how many Acquire calls wait for the key
	WaitingMS int64 `json:"waiting_ms"` // how long the longest-waiting of them has, in milliseconds
	Notices   bool  `json:"notices"`    // true when release notices are known to arrive; false while they poll
}

// Redis is what Locker.Inspect found.
type Redis struct {
	Nodes     int          `json:"nodes"`           // the nodes asked (Inspection.Nodes)
	NodesUp   int          `json:"nodes_up"`        // the nodes that answered
	Need      int          `json:"need,omitempty"`  // on Redlock, the nodes a lock needs; 0 otherwise
	Degraded  bool         `json:"degraded"`        // on Redlock, some nodes did not answer but a quorum did
	Truncated bool         `json:"truncated"`       // a node held more locks than Config.Limit
	Error     string       `json:"error,omitempty"` // "redis unavailable" when a node failed the listing
	Locks     []RedisEntry `json:"locks"`           // the locks held, in the view's order
}

// RedisEntry is one lock held in Redis.
type RedisEntry struct {
	Key
	Owner string `json:"owner"`  // the holder (see Held)
	TTLMS int64  `json:"ttl_ms"` // the remaining lease in Redis, in milliseconds
	Nodes int    `json:"nodes"`  // on Redlock, the nodes holding it; 1 otherwise
	Local bool   `json:"local"`  // true when this process holds it
}

// Lost is one recent loss.
type Lost struct {
	Key
	At     time.Time `json:"at"`      // when it was lost
	Cause  string    `json:"cause"`   // padlock.LostCause's String: token_gone, lease_expired, locker_closed
	HeldMS int64     `json:"held_ms"` // how long it was held, in milliseconds
}

// Refused is one recent acquisition refused because its key stayed busy,
// with who held the key then (refusal.Holder; "" when unknown).
type Refused struct {
	Key
	At       time.Time `json:"at"`        // when the Acquire gave up
	WaitedMS int64     `json:"waited_ms"` // how long it waited, in milliseconds: 0 for one attempt
	Holder   string    `json:"holder"`    // who held the key then (padlock.NotAcquiredError.Holder)
}

// Renewals sums up the renewals a Recorder saw.
type Renewals struct {
	Confirmed int   `json:"confirmed"`   // the renewals Redis confirmed
	Failed    int   `json:"failed"`      // the renewals that got no answer
	LastLagMS int64 `json:"last_lag_ms"` // the last confirmed renewal's lag behind its time, in milliseconds
	MaxLagMS  int64 `json:"max_lag_ms"`  // the largest lag seen
}

// owner is how a view names a lock's holder: the Options.Owner and
// Caller it set, or else the start of its token, enough to tell owners
// apart, too little to act as one.
func owner(set, token string) string {
	if set != "" {
		return set
	}
	if len(token) > 8 {
		return token[:8] + "…"
	}
	return token
}

func (h *handler) snapshot(r *http.Request) Snapshot {
	now := time.Now()
	s := Snapshot{Generated: now, Locker: h.l.String(), Held: []Held{}, Waiting: []Waiting{}, Losses: []Lost{},
		Refusals: []Refused{}, Activity: []Activity{}, ActivityBucket: ActivityBucket.Milliseconds()}
	for _, x := range h.l.Held() {
		s.Held = append(s.Held, Held{Key: h.key(x.Key), Owner: owner(x.Owner, x.Token), Fence: x.Fence, HeldMS: now.Sub(x.Since).Milliseconds(),
			LeaseLeftMS: x.LeaseLeft.Milliseconds(), Renew: x.Renew, Renewals: x.Renewals, Waiters: x.Waiters})
	}
	for _, x := range h.l.Waiting() {
		s.Waiting = append(s.Waiting, Waiting{Key: h.key(x.Key), Waiters: x.Waiters, WaitingMS: now.Sub(x.Since).Milliseconds(), Notices: x.Notices})
	}
	if !h.c.NoInspect {
		in, err := h.l.Inspect(r.Context(), h.c.Limit)
		rs := &Redis{Locks: []RedisEntry{}}
		if in != nil {
			rs.Nodes, rs.NodesUp, rs.Need, rs.Degraded, rs.Truncated = in.Nodes, in.NodesUp, in.Need, in.Degraded, in.Truncated
			for _, x := range in.Locks {
				rs.Locks = append(rs.Locks, RedisEntry{Key: h.key(x.Key), Owner: owner(x.Owner, x.Token), TTLMS: x.TTL.Milliseconds(), Nodes: x.Nodes, Local: x.Local})
			}
		}
		if err != nil {
			rs.Error = "redis unavailable"
		}
		s.Redis = rs
	}
	if h.c.Recorder != nil {
		st := h.c.Recorder.stats(now)
		for _, x := range st.losses {
			s.Losses = append(s.Losses, Lost{Key: h.key(x.Key), At: x.At, Cause: x.Cause, HeldMS: x.Held.Milliseconds()})
		}
		for _, x := range st.refusals {
			s.Refusals = append(s.Refusals, Refused{Key: h.key(x.Key), At: x.At, WaitedMS: x.Waited.Milliseconds(), Holder: x.Holder})
		}
		s.Activity = st.activity
		slices.SortFunc(s.Activity, func(a, b Activity) int { return strings.Compare(a.Namespace, b.Namespace) })
		s.Renewals = &Renewals{Confirmed: st.renewed, Failed: st.failures, LastLagMS: st.lagLast.Milliseconds(), MaxLagMS: st.lagMax.Milliseconds()}
	}
	slices.SortStableFunc(s.Held, func(a, b Held) int { return a.Key.compare(b.Key) })
	slices.SortStableFunc(s.Waiting, func(a, b Waiting) int { return a.Key.compare(b.Key) })
	if s.Redis != nil {
		slices.SortStableFunc(s.Redis.Locks, func(a, b RedisEntry) int { return a.Key.compare(b.Key) })
	}
	return s
}

// compare orders keys as every table shows them: by namespace, then key,
// then hash (the order of redacted keys, which show no key).
func (k Key) compare(o Key) int {
	if c := strings.Compare(k.Namespace, o.Namespace); c != 0 {
		return c
	}
	if c := strings.Compare(k.Key, o.Key); c != 0 {
		return c
	}
	return strings.Compare(k.Hash, o.Hash)
}

//go:embed page.html
var pageHTML string

var page = template.Must(template.New("page").Parse(pageHTML))
