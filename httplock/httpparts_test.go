package httplock_test

import (
	"bytes"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/padlockgo/padlock/httplock"
	"github.com/padlockgo/padlock/lockkey"
)

func TestKeyFuncs(t *testing.T) {
	mux := http.NewServeMux()
	var key string
	var keyErr error
	f := httplock.Join(httplock.Const("order"), httplock.PathValue("id", lockkey.Int(64)),
		httplock.Query("step", lockkey.Text()), httplock.Header("x-tenant", lockkey.Text()), httplock.JSON("n", lockkey.Int(64)))
	mux.HandleFunc("POST /orders/{id}", func(w http.ResponseWriter, r *http.Request) {
		key, keyErr = f(r)
		b, _ := io.ReadAll(r.Body)
		if string(b) != `{"n":1}` {
			t.Errorf("handler got body %q, want %q", b, `{"n":1}`)
		}
	})
	tests := []struct {
		target  string
		want    string
		wantErr error
	}{
		{"/orders/13?step=a:b", "order:13:a%3Ab:t:1", nil},
		{"/orders/013?step=a:b", "order:13:a%3Ab:t:1", nil},
		{"/orders/+13?step=a:b", "order:13:a%3Ab:t:1", nil},
		{"/orders/%2013?step=a:b", "order:13:a%3Ab:t:1", nil},
		{"/orders/x?step=s", "", lockkey.ErrInvalidPart},
		{"/orders/13", "", lockkey.ErrMissingPart},
		{"/orders/13?step=1&step=2", "", lockkey.ErrAmbiguousPart},
	}
	for _, tt := range tests {
		t.Run(tt.target, func(t *testing.T) {
			key, keyErr = "", nil
			req := httptest.NewRequest("POST", tt.target, strings.NewReader(`{"n":1}`))
			req.Header.Set("X-Tenant", "t")
			mux.ServeHTTP(httptest.NewRecorder(), req)
			if tt.wantErr != nil {
				if !errors.Is(keyErr, tt.wantErr) {
					t.Fatalf("got %q, %v; want an error matching %v", key, keyErr, tt.wantErr)
				}
				return
			}
			if keyErr != nil || key != tt.want {
				t.Fatalf("got %q, %v; want %q", key, keyErr, tt.want)
			}
		})
	}
}

// An oversized body is put back whole, so a handler that chooses to go on
// still sees every byte.
func TestJSONTooLargeBodyRestored(t *testing.T) {
	body := bytes.Repeat([]byte("a"), 5000)
	req := httptest.NewRequest("POST", "/", bytes.NewReader(body))
	req.ContentLength = -1
	_, err := httplock.JSON("id", lockkey.Text(), lockkey.WithMaxBodyBytes(100))(req)
	if !errors.Is(err, lockkey.ErrBodyTooLarge) {
		t.Fatalf("got %v, want %v", err, lockkey.ErrBodyTooLarge)
	}
	rest, _ := io.ReadAll(req.Body)
	if !bytes.Equal(rest, body) {
		t.Fatalf("got %d body bytes back, want %d", len(rest), len(body))
	}
}

func TestConstructorsPanic(t *testing.T) {
	l, _, _ := newLocker(t)
	key := httplock.PathValue("id", lockkey.Int(64))
	tests := []struct {
		name string
		f    func()
		want string
	}{
		{"PathValue", func() { httplock.PathValue("", lockkey.Text()) }, "httplock: PathValue: empty name"},
		{"Query", func() { httplock.Query("", lockkey.Text()) }, "httplock: Query: empty name"},
		{"Header", func() { httplock.Header("", lockkey.Text()) }, "httplock: Header: empty name"},
		{"JSON path", func() { httplock.JSON("a..b", lockkey.Text()) }, `httplock: JSON: path "a..b" has an empty segment`},
		{"JSON limit", func() { httplock.JSON("a", lockkey.Text(), lockkey.WithMaxBodyBytes(0)) }, "httplock: JSON: WithMaxBodyBytes: 0, want > 0"},
		{"Const", func() { httplock.Const("") }, "httplock: Const: empty string"},
		{"Join empty", func() { httplock.Join() }, "httplock: Join: no parts"},
		{"Join nil", func() { httplock.Join(key, nil) }, "httplock: Join: part 2 is nil"},
		{"Lock nil locker", func() { httplock.Lock(nil, key) }, "httplock: Lock: nil *padlock.Locker"},
		{"Lock nil key", func() { httplock.Lock(l, nil) }, "httplock: Lock: nil key func"},
		{"Lock busy status", func() { httplock.Lock(l, key, httplock.WithBusyStatus(500)) }, "httplock: Lock: WithBusyStatus: 500"},
		{"Lock skip", func() { httplock.Lock(l, key, httplock.WithSkip(nil)) }, "httplock: Lock: WithSkip: nil func"},
		{"Lock max hold", func() { httplock.Lock(l, key, httplock.WithMaxHold(-time.Second)) }, "httplock: Lock: WithMaxHold: -1s, want >= 0"},
		{"Lock read body", func() { httplock.Lock(l, key, httplock.WithReadBody(0)) }, "httplock: Lock: WithReadBody: 0, want > 0"},
		{"NewGuard nil option", func() { httplock.NewGuard(l, nil) }, "httplock: NewGuard: option 1 is nil"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			defer func() {
				got, _ := recover().(string)
				if !strings.HasPrefix(got, tt.want) {
					t.Fatalf("got panic %q, want %q", got, tt.want)
				}
			}()
			tt.f()
		})
	}
}
