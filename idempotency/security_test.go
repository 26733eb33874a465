package idempotency_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/padlockgo/padlock/idempotency"
)

// lookalikes are pairs of account names that Unicode normalization (NFC)
// makes one: precomposed and decomposed, and a letter beside the sign that
// normalizes to it (Kelvin, Ohm).
var lookalikes = []struct{ name, a, b string }{
	{"decomposed", "jos\u00e9", "jose\u0301"},
	{"kelvin sign", "Kim", "\u212Aim"},
	{"ohm sign", "\u03a9mega", "\u2126mega"},
}

// accounts stands in for an authentication step: the bearer token names
// the account, whatever its name's bytes.
func accounts(names map[string]string, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if u, ok := names[strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")]; ok {
			r = r.WithContext(context.WithValue(r.Context(), userKey{}, u))
		}
		next.ServeHTTP(w, r)
	})
}

// The attack: accounts whose names differ only in their Unicode spelling
// were one caller. Account B, sending A's key and body, got A's stored
// answer as a replay; B could squat A's keys; B's stored answers counted
// against A's quota. An identity is opaque bytes now: each account has its
// own answers, keys and quota.
func TestAttackLookalikeCallers(t *testing.T) {
	l, _, rdb := newLocker(t)
	var runs atomic.Int64
	handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		u, _ := userID(r)
		w.WriteHeader(http.StatusCreated)
		fmt.Fprintf(w, "order %d of %q", runs.Add(1), u)
	})
	for _, tt := range lookalikes {
		t.Run(tt.name, func(t *testing.T) {
			names := map[string]string{"a": tt.a, "b": tt.b}
			h := accounts(names, idempotency.New(l, rdb, userID, idempotency.WithRecordPrefix("idem:replay:"+tt.name+":"))(handler))
			a := []string{"Authorization", "Bearer a"}
			b := []string{"Authorization", "Bearer b"}

			first := send(h, "POST", "/orders", `{"item":"book"}`, "k-replay", a...)
			if first.Code != http.StatusCreated {
				t.Fatalf("A: got %d %s, want 201", first.Code, first.Body)
			}
			w := send(h, "POST", "/orders", `{"item":"book"}`, "k-replay", b...)
			if w.Code != http.StatusCreated || w.Header().Get("Idempotent-Replayed") != "" || !strings.Contains(w.Body.String(), fmt.Sprintf("%q", tt.b)) {
				t.Fatalf("B with A's key and body: got %d %s (replayed %q), want B's own 201",
					w.Code, w.Body, w.Header().Get("Idempotent-Replayed"))
			}
		})
		t.Run(tt.name+" squat", func(t *testing.T) {
			names := map[string]string{"a": tt.a, "b": tt.b}
			h := accounts(names, idempotency.New(l, rdb, userID, idempotency.WithRecordPrefix("idem:squat:"+tt.name+":"))(handler))
			// B goes first with A's next key and another body.
			if w := send(h, "POST", "/orders", `{"item":"nothing"}`, "k-a", "Authorization", "Bearer b"); w.Code != http.StatusCreated {
				t.Fatalf("B: got %d %s, want 201", w.Code, w.Body)
			}
			w := send(h, "POST", "/orders", `{"item":"book"}`, "k-a", "Authorization", "Bearer a")
			if w.Code != http.StatusCreated || !strings.Contains(w.Body.String(), fmt.Sprintf("%q", tt.a)) {
				t.Fatalf("A after B sent its key first: got %d %s, want A's own 201", w.Code, w.Body)
			}
		})
		t.Run(tt.name+" quota", func(t *testing.T) {
			names := map[string]string{"a": tt.a, "b": tt.b}
			h := accounts(names, idempotency.New(l, rdb, userID, idempotency.WithQuota(1, 0),
				idempotency.WithRecordPrefix("idem:quota:"+tt.name+":"))(handler))
			if w := send(h, "POST", "/orders", `{"item":"pen"}`, "k-b", "Authorization", "Bearer b"); w.Code != http.StatusCreated {
				t.Fatalf("B: got %d %s, want 201", w.Code, w.Body)
			}
			w := send(h, "POST", "/orders", `{"item":"book"}`, "k-a", "Authorization", "Bearer a")
			if w.Code != http.StatusCreated || !strings.Contains(w.Body.String(), fmt.Sprintf("%q", tt.a)) {
				t.Fatalf("A with a quota of one, after B stored an answer: got %d %s, want A's own 201", w.Code, w.Body)
			}
		})
	}
}

// The Idempotency-Key is the client's own opaque identifier too: only its
// Structured Field syntax is read (quoted or bare is one key), never its
// case or spelling, and non-ASCII keys, which a normalization could merge,
// are refused.
func TestKeyOpaque(t *testing.T) {
	l, _, rdb := newLocker(t)
	var runs atomic.Int64
	h := idempotency.New(l, rdb, tester)(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusCreated)
		fmt.Fprintf(w, "run %d", runs.Add(1))
	}))
	lower := send(h, "POST", "/orders", "{}", "order-k1")
	upper := send(h, "POST", "/orders", "{}", "ORDER-K1")
	if lower.Body.String() != "run 1" || upper.Body.String() != "run 2" {
		t.Fatalf("got %q and %q for keys differing in case, want two runs", lower.Body, upper.Body)
	}
	checkReplay(t, send(h, "POST", "/orders", "{}", `"order-k1"`), lower)
	for _, k := range []string{"order-\u212A1", `"order-\u212A1"`, "jos\u00e9", `"jose\u0301"`} {
		checkProblem(t, send(h, "POST", "/orders", "{}", k), http.StatusBadRequest)
	}
	if got := runs.Load(); got != 2 {
		t.Fatalf("got %d runs, want 2", got)
	}
}
