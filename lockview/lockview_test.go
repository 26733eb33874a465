package lockview_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"

	"github.com/padlockgo/padlock"
	"github.com/padlockgo/padlock/internal/redistest"
	"github.com/padlockgo/padlock/lockkey"
	"github.com/padlockgo/padlock/lockview"
)

func TestMain(m *testing.M) {
	redis.SetLogger(quiet{})
	goleak.VerifyTestMain(m)
}

type quiet struct{}

func (quiet) Printf(context.Context, string, ...any) {}

// setup returns a Locker with a Recorder, and opts, on a fresh server.
func setup(t *testing.T, opts ...padlock.LockerOption) (*padlock.Locker, *lockview.Recorder, *redistest.Server) {
	t.Helper()
	srv := redistest.Start(t)
	rec := lockview.NewRecorder()
	l, err := padlock.New(srv.Client(t), append(opts, padlock.WithObserver(rec))...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l, rec, srv
}

// get sends a GET of target to h, as an operator on the admin listener
// would (Host localhost:6060, unless header has a Host).
func get(t *testing.T, h http.Handler, target string, header map[string]string) (int, string) {
	t.Helper()
	r := httptest.NewRequest(http.MethodGet, target, nil)
	r.Host = "localhost:6060"
	for k, v := range header {
		if k == "Host" {
			r.Host = v
			continue
		}
		r.Header.Set(k, v)
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	body, _ := io.ReadAll(w.Result().Body)
	return w.Code, string(body)
}

func TestNewRequiresAuthorize(t *testing.T) {
	l, _, _ := setup(t)
	if _, err := lockview.New(l, lockview.Config{}); !errors.Is(err, lockview.ErrNoAuthorize) {
		t.Errorf("New without Authorize: got %v, want ErrNoAuthorize", err)
	}
}

// TestAccess checks who sees what: an anonymous request gets 401 and no
// keys; an authorized one sees namespaces and hashes only, unless the
// operator opted in to keys.
func TestAccess(t *testing.T) {
	l, rec, _ := setup(t)
	ctx := context.Background()
	const secret = "idempotency:/orders:victim-client:secret-key-24"
	lk, err := l.Acquire(ctx, secret, padlock.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer lk.Release(ctx)
	const token = "s3cret-admin-token"
	redacted, err := lockview.New(l, lockview.Config{Authorize: lockview.BearerToken(token), Recorder: rec})
	if err != nil {
		t.Fatal(err)
	}
	shown, err := lockview.New(l, lockview.Config{Authorize: lockview.BearerToken(token), ShowKeys: true})
	if err != nil {
		t.Fatal(err)
	}
	auth := map[string]string{"Authorization": "Bearer " + token}
	for _, tc := range []struct {
		name       string
		h          http.Handler
		target     string
		header     map[string]string
		wantCode   int
		wantSecret bool
		wantNS     bool
	}{
		{"anonymous json", redacted, "/?format=json", nil, http.StatusUnauthorized, false, false},
		{"anonymous page", redacted, "/", nil, http.StatusUnauthorized, false, false},
		{"anonymous, keys shown", shown, "/?format=json", nil, http.StatusUnauthorized, false, false},
		{"wrong token", shown, "/?format=json", map[string]string{"Authorization": "Bearer guess"}, http.StatusUnauthorized, false, false},
		{"authorized, redacted", redacted, "/?format=json", auth, http.StatusOK, false, true},
		{"authorized, keys shown", shown, "/?format=json", auth, http.StatusOK, true, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, body := get(t, tc.h, tc.target, tc.header)
			if code != tc.wantCode {
				t.Fatalf("got %d, want %d", code, tc.wantCode)
			}
			if got := strings.Contains(body, "secret-key-24"); got != tc.wantSecret {
				t.Errorf("key in the answer: got %v, want %v; body %s", got, tc.wantSecret, body)
			}
			if got := strings.Contains(body, `"namespace":"idempotency"`); got != tc.wantNS {
				t.Errorf("namespace in the answer: got %v, want %v; body %s", got, tc.wantNS, body)
			}
		})
	}
}

// TestSnapshot checks the JSON: this process's lock, the same lock in
// Redis, a waiter, and a loss the Recorder kept.
func TestSnapshot(t *testing.T) {
	l, rec, srv := setup(t)
	ctx := context.Background()
	h, err := lockview.New(l, lockview.Config{Authorize: lockview.AdminListener, ShowKeys: true, Recorder: rec})
	if err != nil {
		t.Fatal(err)
	}
	lk, err := l.Acquire(ctx, "order:7", padlock.Options{TTL: 600 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		_, _ = l.Acquire(wctx, "order:7", padlock.Options{Wait: time.Minute})
	}()
	var s lockview.Snapshot
	deadline := time.Now().Add(20 * time.Second)
	for {
		_, body := get(t, h, "/", map[string]string{"Accept": "application/json"})
		if err := json.Unmarshal([]byte(body), &s); err != nil {
			t.Fatalf("%v: %s", err, body)
		}
		if len(s.Waiting) == 1 && s.Renewals != nil && s.Renewals.Confirmed > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no waiter and renewal within 20s: %+v", s)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if len(s.Held) != 1 || s.Held[0].Key.Key != "order:7" || s.Held[0].Fence != lk.Fence() || s.Held[0].Waiters != 1 || s.Held[0].Owner == "" {
		t.Errorf("held: got %+v, want order:7 with its fence, one waiter, an owner", s.Held)
	}
	if s.Redis == nil || len(s.Redis.Locks) != 1 || !s.Redis.Locks[0].Local || s.Redis.Locks[0].Owner != s.Held[0].Owner {
		t.Errorf("redis: got %+v, want the same lock, local, same owner", s.Redis)
	}
	cancel()
	<-done
	// A loss, kept by the Recorder.
	srv.Pause(t)
	<-lk.Done()
	srv.Resume(t)
	_, body := get(t, h, "/?format=json", nil)
	s = lockview.Snapshot{}
	if err := json.Unmarshal([]byte(body), &s); err != nil {
		t.Fatal(err)
	}
	if len(s.Losses) != 1 || s.Losses[0].Key.Key != "order:7" || s.Losses[0].Cause != "lease_expired" {
		t.Errorf("losses: got %+v, want order:7 lost, lease_expired", s.Losses)
	}
	_ = lk.Release(ctx)
}

func TestMethodNotAllowed(t *testing.T) {
	l, _, _ := setup(t)
	h, _ := lockview.New(l, lockview.Config{Authorize: lockview.AdminListener})
	r := httptest.NewRequest(http.MethodPost, "/", nil)
	r.Host = "localhost"
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	if w.Code != http.StatusMethodNotAllowed {
		t.Errorf("POST: got %d, want 405", w.Code)
	}
}

// A redacted view's key_hash cannot be reversed with a dictionary of plain
// SHA-256 hashes of likely keys (order ids, job names); keys of a namespace
// the Redactor makes readable are shown, with the same hash.
func TestRedactedKeysResistDictionary(t *testing.T) {
	l, _, _ := setup(t)
	ctx := context.Background()
	for _, k := range []string{"order:1", "job:nightly-report"} {
		lk, err := l.Acquire(ctx, k, padlock.Options{})
		if err != nil {
			t.Fatal(err)
		}
		defer lk.Release(ctx)
	}
	dict := make(map[string]string)
	for _, k := range []string{"order:0", "order:1", "order:2", "job:nightly-report", "job:reindex"} {
		sum := sha256.Sum256([]byte(k))
		dict[hex.EncodeToString(sum[:6])] = k
	}
	view, err := lockview.New(l, lockview.Config{Authorize: lockview.AdminListener})
	if err != nil {
		t.Fatal(err)
	}
	var s lockview.Snapshot
	if _, body := get(t, view, "/?format=json", nil); json.Unmarshal([]byte(body), &s) != nil || s.Redis == nil || len(s.Held) != 2 {
		t.Fatalf("got %s, want two held locks and the locks in Redis", body)
	}
	var keys []lockview.Key
	for _, h := range s.Held {
		keys = append(keys, h.Key)
	}
	for _, e := range s.Redis.Locks {
		keys = append(keys, e.Key)
	}
	for _, k := range keys {
		if found, ok := dict[k.Hash]; ok {
			t.Errorf("got key_hash %s (namespace %s), which a plain SHA-256 dictionary reverses to %q", k.Hash, k.Namespace, found)
		}
		if k.Key != "" {
			t.Errorf("got key %q, want it redacted", k.Key)
		}
	}

	r, err := lockkey.NewRedactor(lockkey.WithReadableNamespaces("job"))
	if err != nil {
		t.Fatal(err)
	}
	view, err = lockview.New(l, lockview.Config{Authorize: lockview.AdminListener, Redactor: r})
	if err != nil {
		t.Fatal(err)
	}
	s = lockview.Snapshot{}
	_, body := get(t, view, "/?format=json", nil)
	if err := json.Unmarshal([]byte(body), &s); err != nil {
		t.Fatal(err)
	}
	for _, h := range s.Held {
		want := ""
		if h.Namespace == "job" {
			want = "job:nightly-report"
		}
		if h.Key.Key != want || h.Hash != r.Hash(map[string]string{"job": "job:nightly-report", "order": "order:1"}[h.Namespace]) {
			t.Errorf("got %+v, want key %q and the Redactor's hash", h.Key, want)
		}
	}
}
