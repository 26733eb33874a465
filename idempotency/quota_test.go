package idempotency_test

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/padlockgo/padlock"
	"github.com/padlockgo/padlock/idempotency"
	"github.com/padlockgo/padlock/internal/redistest"
)

// One caller cannot fill Redis with stored responses: past its quota, a
// request that would run the handler gets 429 with Retry-After, and the
// handler does not run. Replays, and other callers, go on; the quota frees
// as records expire.
func TestQuota(t *testing.T) {
	const size = 64 << 10
	tests := []struct {
		name   string
		quota  idempotency.Option
		stored int // responses stored before the 429
	}{
		{"responses", idempotency.WithQuota(3, 0), 3},
		// Each record is a 64 KiB body plus a little: the third passes the
		// check at about 128 KiB and goes over; the fourth is refused.
		{"bytes", idempotency.WithQuota(0, 150<<10), 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l, srv, rdb := newLocker(t)
			var runs atomic.Int64
			const retention = 2 * time.Second
			h := authenticate(idempotency.New(l, rdb, userID, tt.quota, idempotency.WithRetention(retention))(
				http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					runs.Add(1)
					w.WriteHeader(http.StatusCreated)
					_, _ = w.Write([]byte(strings.Repeat("x", size)))
				})))
			mallory := []string{"Authorization", "Bearer mallory"}
			first := send(h, "POST", "/orders", "{}", "k0", mallory...)
			for i := 1; i < tt.stored; i++ {
				if w := send(h, "POST", "/orders", "{}", "k"+strconv.Itoa(i), mallory...); w.Code != http.StatusCreated {
					t.Fatalf("request %d: got %d %s, want 201", i, w.Code, w.Body)
				}
			}
			over := send(h, "POST", "/orders", "{}", "k-over", mallory...)
			p := checkProblem(t, over, http.StatusTooManyRequests)
			if p.Detail != "this caller has too many stored responses; retry later" {
				t.Fatalf("got detail %q", p.Detail)
			}
			if ra, _ := strconv.Atoi(over.Header().Get("Retry-After")); ra < 1 || ra > 2 {
				t.Fatalf("got Retry-After %q, want 1 or 2 (the oldest record's remaining retention)", over.Header().Get("Retry-After"))
			}
			if got := runs.Load(); got != int64(tt.stored) {
				t.Fatalf("got %d handler runs, want %d", got, tt.stored)
			}
			checkReplay(t, send(h, "POST", "/orders", "{}", "k0", mallory...), first)
			last := time.Now()
			if w := send(h, "POST", "/orders", "{}", "k-over", "Authorization", "Bearer alice"); w.Code != http.StatusCreated {
				t.Fatalf("another caller: got %d, want 201", w.Code)
			}
			records := 0
			for _, k := range srv.Keys(t) {
				if strings.HasPrefix(k, "padlock:idempotency:POST /orders:") {
					records++
				}
			}
			if records != tt.stored+1 {
				t.Fatalf("got %d records in Redis (keys %v), want %d", records, srv.Keys(t), tt.stored+1)
			}

			// The records expire with the retention, and the quota with them.
			time.Sleep(time.Until(last.Add(retention + 200*time.Millisecond)))
			if w := send(h, "POST", "/orders", "{}", "k-later", mallory...); w.Code != http.StatusCreated {
				t.Fatalf("after the retention: got %d %s, want 201", w.Code, w.Body)
			}
			if n, err := rdb.ZCard(context.Background(), quotaKey(t, srv.Keys(t))).Result(); n != 1 || err != nil {
				t.Fatalf("got %d, %v records counted after the retention (keys %v), want 1", n, err, srv.Keys(t))
			}
		})
	}
}

// quotaKey returns the one quota sorted set among keys.
func quotaKey(t *testing.T, keys []string) string {
	t.Helper()
	var found []string
	for _, k := range keys {
		if strings.HasPrefix(k, "padlock:idempotency:quota:{") && strings.HasSuffix(k, "}") {
			found = append(found, k)
		}
	}
	if len(found) != 1 {
		t.Fatalf("got quota keys %v among %v, want one", found, keys)
	}
	return found[0]
}

// Bad quotas panic at construction; WithQuota(0, 0) turns it off.
func TestQuotaOptions(t *testing.T) {
	l, srv, rdb := newLocker(t)
	defer func() {
		want := "idempotency: New: WithQuota: -1 responses, 0 bytes, want >= 0"
		if got := fmt.Sprint(recover()); got != want {
			t.Fatalf("got panic %q, want %q", got, want)
		}
	}()
	h := idempotency.New(l, rdb, tester, idempotency.WithQuota(0, 0))(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	send(h, "POST", "/orders", "{}", "k1")
	for _, k := range srv.Keys(t) {
		if strings.Contains(k, "quota") {
			t.Fatalf("got key %s with the quota off, want none", k)
		}
	}
	idempotency.New(l, rdb, tester, idempotency.WithQuota(-1, 0))
}

// On a Cluster the record and the quota keys live in different slots; the
// pipelines that carry them still work, and so does the quota.
func TestQuotaCluster(t *testing.T) {
	c := redistest.StartCluster(t, 3)
	cc := c.Client(t)
	l := padlock.New(cc)
	t.Cleanup(func() { _ = l.Close() })
	var runs atomic.Int64
	h := idempotency.New(l, cc, tester, idempotency.WithQuota(2, 0))(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusCreated)
		fmt.Fprintf(w, "run %d", runs.Add(1))
	}))
	first := send(h, "POST", "/orders", "{}", "k1")
	if first.Code != http.StatusCreated {
		t.Fatalf("got %d %s, want 201", first.Code, first.Body)
	}
	checkReplay(t, send(h, "POST", "/orders", "{}", "k1"), first)
	if w := send(h, "POST", "/orders", "{}", "k2"); w.Code != http.StatusCreated {
		t.Fatalf("got %d %s, want 201", w.Code, w.Body)
	}
	checkProblem(t, send(h, "POST", "/orders", "{}", "k3"), http.StatusTooManyRequests)
	if got := runs.Load(); got != 2 {
		t.Fatalf("got %d runs, want 2", got)
	}
}

// A server that forgot the quota scripts (restarted, SCRIPT FLUSH) gets
// them again: the check and the count still happen.
func TestQuotaScriptFlush(t *testing.T) {
	l, _, rdb := newLocker(t)
	h := idempotency.New(l, rdb, tester, idempotency.WithQuota(2, 0))(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusCreated)
	}))
	ctx := context.Background()
	for _, k := range []string{"k1", "k2"} {
		if err := rdb.ScriptFlush(ctx).Err(); err != nil {
			t.Fatal(err)
		}
		if w := send(h, "POST", "/orders", "{}", k); w.Code != http.StatusCreated {
			t.Fatalf("%s: got %d %s, want 201", k, w.Code, w.Body)
		}
	}
	if err := rdb.ScriptFlush(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	checkProblem(t, send(h, "POST", "/orders", "{}", "k3"), http.StatusTooManyRequests)
}
