package httplock

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/padlockgo/padlock"
	"github.com/padlockgo/padlock/internal/handlertest"
)

// Every branch of the one refusal builder, with an error whose text holds
// the key, as an app's or a future engine's error might: the key is in no
// part of the problem unless WithEchoKey, and the error still matches its
// sentinel. The faces' own tests (TestNoFaceEchoesKey in middleware) run
// the branches Redis can produce through every face.
func TestRefusalRedactsEveryBranch(t *testing.T) {
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", ContextTimeoutEnabled: true})
	t.Cleanup(func() { _ = rdb.Close() })
	l := handlertest.LockerOn(t, rdb)
	const key = "POST /reports:tok_live_5f0c9a"
	ended, cancel := context.WithCancel(context.Background())
	cancel()
	live := context.Background()
	tests := []struct {
		name       string
		ctx        context.Context
		err        error
		wantStatus int
	}{
		{"busy", live, fmt.Errorf("%w: key %q is held", padlock.ErrNotAcquired, key), http.StatusLocked},
		{"unavailable", live, fmt.Errorf("%w: acquire %s: i/o timeout", padlock.ErrUnavailable, key), http.StatusServiceUnavailable},
		{"closed", live, fmt.Errorf("%w: %s", padlock.ErrClosed, key), http.StatusServiceUnavailable},
		{"request ended", ended, fmt.Errorf("waiting for %s: %w", key, context.Canceled), http.StatusServiceUnavailable},
		{"other", live, fmt.Errorf("%w: key %s", padlock.ErrInvalid, key), http.StatusInternalServerError},
	}
	for _, tt := range tests {
		for _, echo := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s echo %v", tt.name, echo), func(t *testing.T) {
				opts := []Option{WithBusyStatus(http.StatusLocked)}
				if echo {
					opts = append(opts, WithEchoKey())
				}
				for _, face := range []struct {
					name string
					a    func(g *Guard) acquirer
				}{
					{"Guard", (*Guard).lockAcquirer},
					{"Limiter", func(g *Guard) acquirer {
						return acquirer{what: "permit", busy: http.StatusLocked, busyDetail: "full", retryAfter: func(string, error) time.Duration { return limitRetryAfter }}
					}},
				} {
					g := NewGuard(l, append(opts, WithNamespace("POST /reports"))...)
					p := g.refusal(tt.ctx, tt.ctx, key, tt.err, face.a(g))
					if p.Status != tt.wantStatus || !p.beforeHandler {
						t.Fatalf("%s: got status %d, marked %v; want %d, marked", face.name, p.Status, p.beforeHandler, tt.wantStatus)
					}
					if !errors.Is(p.Err, tt.err) {
						t.Fatalf("%s: got error %v, want one matching %v", face.name, p.Err, tt.err)
					}
					body, _ := json.Marshal(p)
					seen := string(body) + p.Err.Error() + p.Detail + p.Key
					if got := strings.Contains(seen, "tok_live"); got != echo {
						t.Fatalf("%s: got the key shown %v (%s), want %v", face.name, got, seen, echo)
					}
					if !echo && !strings.Contains(p.Err.Error(), "POST /reports:…") {
						t.Fatalf("%s: got error %q, want the namespace and … in place of the key", face.name, p.Err)
					}
				}
			})
		}
	}
}
