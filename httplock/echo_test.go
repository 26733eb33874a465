package httplock_test

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/padlockgo/padlock"
	"github.com/padlockgo/padlock/httplock"
	"github.com/padlockgo/padlock/lockkey"
)

// A key built from a secret header is not reflected by busy or unavailable
// answers, in the body, the headers or the error kept for logs, unless
// WithEchoKey asks for it.
func TestLockDoesNotEchoKey(t *testing.T) {
	const secret = "sk_live_9f8e7d6c5b4a"
	tests := []struct {
		name       string
		opts       []httplock.Option
		kill       bool
		wantStatus int
		wantKey    bool
	}{
		{"409", nil, false, http.StatusConflict, false},
		{"423", []httplock.Option{httplock.WithBusyStatus(http.StatusLocked)}, false, http.StatusLocked, false},
		{"503", nil, true, http.StatusServiceUnavailable, false},
		{"409 WithEchoKey", []httplock.Option{httplock.WithEchoKey()}, false, http.StatusConflict, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l, srv, _ := newLocker(t)
			var logged []string
			respond := func(w http.ResponseWriter, r *http.Request, p *httplock.Problem) {
				if p.Err != nil {
					logged = append(logged, p.Err.Error())
				}
				httplock.WriteProblem(w, r, p)
			}
			opts := append([]httplock.Option{httplock.WithResponder(respond)}, tt.opts...)
			mux := http.NewServeMux()
			mux.Handle("POST /reports", httplock.Lock(l, httplock.Header("X-Api-Key", lockkey.Text()), opts...)(
				http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusOK) })))
			if tt.kill {
				srv.Kill(t)
			} else {
				lk, err := l.Acquire(context.Background(), "POST /reports:"+secret, padlock.Options{})
				if err != nil {
					t.Fatal(err)
				}
				defer lk.Release(context.Background())
			}
			req := newRequest("POST", "/reports", "")
			req.Header.Set("X-Api-Key", secret)
			w := serveRequest(mux, req)
			p := checkProblem(t, w, tt.wantStatus)
			seen := w.Body.String() + strings.Join(logged, "\n")
			for k, v := range w.Header() {
				seen += k + ": " + strings.Join(v, ",") + "\n"
			}
			if got := strings.Contains(seen, secret); got != tt.wantKey {
				t.Fatalf("got key in answer or log %v (%s), want %v", got, seen, tt.wantKey)
			}
			if tt.wantStatus != http.StatusServiceUnavailable && p.Namespace != "POST /reports" {
				t.Fatalf("got namespace %q, want %q", p.Namespace, "POST /reports")
			}
			if len(logged) != 1 {
				t.Fatalf("got %d errors for logs, want 1", len(logged))
			}
		})
	}
}
