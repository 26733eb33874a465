package lockview_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/padlockgo/padlock"
	"github.com/padlockgo/padlock/httplock"
	"github.com/padlockgo/padlock/internal/handlertest"
	"github.com/padlockgo/padlock/lockkey"
	"github.com/padlockgo/padlock/lockview"
)

// holding serves a request for order 1042's payment through mw, whose
// handler holds the lock until release is called; it returns once the
// handler holds it.
func holding(t *testing.T, mw func(http.Handler) http.Handler, secret string) (mux *http.ServeMux, release func()) {
	t.Helper()
	in, out := make(chan struct{}), make(chan struct{})
	mux = http.NewServeMux()
	first := true
	var mu sync.Mutex
	mux.Handle("POST /orders/{id}/pay", mw(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		wait := first
		first = false
		mu.Unlock()
		if wait {
			close(in)
			<-out
		}
	})))
	var wg sync.WaitGroup
	wg.Go(func() { mux.ServeHTTP(httptest.NewRecorder(), payRequest(secret)) })
	<-in
	var once sync.Once
	release = func() {
		once.Do(func() {
			close(out)
			wg.Wait()
		})
	}
	t.Cleanup(release)
	return mux, release
}

func payRequest(secret string) *http.Request {
	r := httptest.NewRequest(http.MethodPost, "/orders/1042/pay", nil)
	r.Header.Set("Authorization", "Bearer "+secret)
	return r
}

// TestHolderAndRefusalHolder checks that the view names who holds a lock
// a request took through httplock (the Locker's Owner, the route, the
// caller as a keyed hash) in both tables, and who held the key when
// another request was refused (409); an unnamed holder stays unnamed,
// and no secret caller reaches the JSON.
func TestHolderAndRefusalHolder(t *testing.T) {
	l, rec, srv := setup(t, padlock.WithDefaults(padlock.Options{Owner: "host=web-1 pid=4121"}))
	redactor, err := lockkey.NewRedactor(lockkey.WithRedactSecret([]byte("fleet-wide secret, 16+ bytes")))
	if err != nil {
		t.Fatal(err)
	}
	const secret, other = "sk_live_4242424242424242", "sk_live_7777777777777777"
	want := "host=web-1 pid=4121 route=POST /orders/<id>/pay caller=#" + redactor.Hash(secret)
	mw := httplock.Lock(l, httplock.PathValue("id", lockkey.Int(64)), httplock.WithNamespace("order"),
		httplock.WithCaller(handlertest.Bearer), httplock.WithRedactor(redactor))
	mux, release := holding(t, mw, secret)
	w := httptest.NewRecorder()
	mux.ServeHTTP(w, payRequest(other))
	if w.Code != http.StatusConflict {
		t.Fatalf("second request: got %d, want 409", w.Code)
	}

	// A holder that named itself in neither Owner nor Caller.
	bare, err := padlock.New(srv.Client(t))
	if err != nil {
		t.Fatal(err)
	}
	defer bare.Close()
	cart, err := bare.Acquire(context.Background(), "cart:7", padlock.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer cart.Release(context.Background())
	if _, err := l.Acquire(context.Background(), "cart:7", padlock.Options{}); !errors.Is(err, padlock.ErrNotAcquired) {
		t.Fatalf("Acquire of a held cart: got %v, want ErrNotAcquired", err)
	}

	h, err := lockview.New(l, lockview.Config{Authorize: lockview.AdminListener, Recorder: rec, Redactor: redactor})
	if err != nil {
		t.Fatal(err)
	}
	_, body := get(t, h, "/?format=json", nil)
	// Any 8 characters of either secret, not a 4-digit run, which a
	// fence, a timestamp or a lease may hold by chance ("…7777…").
	if strings.Contains(body, "sk_live") || strings.Contains(body, secret[8:16]) || strings.Contains(body, other[8:16]) {
		t.Errorf("the view shows a caller's secret: %s", body)
	}
	var s lockview.Snapshot
	if err := json.Unmarshal([]byte(body), &s); err != nil {
		t.Fatal(err)
	}
	var held, inRedis string
	for _, x := range s.Held {
		if x.Namespace == "order" {
			held = x.Owner
		}
	}
	for _, x := range s.Redis.Locks {
		if x.Namespace == "order" {
			inRedis = x.Owner
		}
	}
	if held != want || inRedis != want {
		t.Errorf("holder: got held %q, in Redis %q; want %q", held, inRedis, want)
	}
	if len(s.Refusals) != 2 || s.Refusals[0].Namespace != "cart" || s.Refusals[0].Holder != "" ||
		s.Refusals[1].Namespace != "order" || s.Refusals[1].Holder != want {
		t.Errorf("refusals: got %+v, want the cart's with no holder, then the 409 held by %q", s.Refusals, want)
	}
	release()
}
