package idempotency_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/padlockgo/padlock/idempotency"
	"github.com/padlockgo/padlock/internal/redistest"
)

// One caller cannot fill Redis with stored responses: past its quota, a
// request that would run the handler gets 429 with Retry-After, and the
// handler does not run. Replays, and other callers, go on; the quota frees
// as records expire.
func TestQuota(t *testing.T) {
	t.Parallel() // servers of its own; it waits out records' leases
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
			t.Parallel()
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
	t.Parallel() // a Cluster of its own
	c := redistest.StartCluster(t, 3)
	cc := c.Client(t)
	l := lockerOn(t, cc)
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

// The attack: 40 first requests at once, with distinct keys, under a quota
// of 5 each passed the check while the others ran, and 40 responses were
// stored. A request now reserves its place before the handler runs: 5 run
// and store, 35 get 429. The handler holds every request it lets in until
// each of the 40 has either entered it or been answered, so all 40 are in
// flight at once whatever the scheduling.
func TestQuotaConcurrent(t *testing.T) {
	l, srv, rdb := newLocker(t)
	const n, limit = 40, 5
	decided := make(chan struct{}, n)
	release := make(chan struct{})
	var runs atomic.Int64
	h := idempotency.New(l, rdb, tester, idempotency.WithQuota(limit, 0))(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		runs.Add(1)
		decided <- struct{}{}
		<-release
		w.WriteHeader(http.StatusCreated)
	}))
	codes := make(chan int, n)
	for i := range n {
		go func() {
			w := send(h, "POST", "/orders", "{}", "k"+strconv.Itoa(i))
			if w.Code != http.StatusCreated {
				decided <- struct{}{}
			}
			codes <- w.Code
		}()
	}
	for range n {
		<-decided
	}
	close(release)
	got := map[int]int{}
	for range n {
		got[<-codes]++
	}
	if got[http.StatusCreated] != limit || got[http.StatusTooManyRequests] != n-limit || runs.Load() != limit {
		t.Fatalf("got answers %v and %d runs, want %d 201s, %d 429s and %d runs", got, runs.Load(), limit, n-limit, limit)
	}
	if c, err := rdb.ZCard(context.Background(), quotaKey(t, srv.Keys(t))).Result(); c != limit || err != nil {
		t.Fatalf("got %d, %v entries in the quota, want %d", c, err, limit)
	}
}

// A request that stores nothing frees the place it reserved: a response
// that is not stored (a 5xx, a 422), a panic, and a request that finds,
// once it holds the lock, the record of the request it waited for.
func TestQuotaReservationFreed(t *testing.T) {
	l, srv, rdb := newLocker(t)
	ctx := context.Background()
	var fail atomic.Value
	fail.Store("")
	entered := make(chan struct{}, 1)
	finish := make(chan struct{})
	h := recoverer(idempotency.New(l, rdb, tester, idempotency.WithQuota(2, 0), idempotency.WithWaitForInFlight(30*time.Second))(
		http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			switch fail.Load() {
			case "500":
				w.WriteHeader(http.StatusInternalServerError)
			case "422":
				w.WriteHeader(http.StatusUnprocessableEntity)
			case "panic":
				panic("boom")
			case "slow":
				entered <- struct{}{}
				<-finish
				w.WriteHeader(http.StatusCreated)
			default:
				w.WriteHeader(http.StatusCreated)
			}
		})))
	for _, f := range []string{"500", "422", "panic", "500", "422", "panic"} {
		fail.Store(f)
		if w := send(h, "POST", "/orders", "{}", "k-"+f); w.Code == http.StatusTooManyRequests {
			t.Fatalf("%s: got 429, want the handler to run: the places were not freed", f)
		}
	}
	if c, err := rdb.ZCard(ctx, "padlock:idempotency:quota:{"+callerDigest("tester")+"}").Result(); c != 0 || err != nil {
		t.Fatalf("got %d, %v entries in the quota, want none", c, err)
	}
	fail.Store("slow")
	first := make(chan *httptest.ResponseRecorder, 1)
	go func() { first <- send(h, "POST", "/orders", "{}", "k-slow") }()
	<-entered
	// A retry waits for the first to finish, then finds its record once it
	// holds the lock.
	second := make(chan *httptest.ResponseRecorder, 1)
	go func() { second <- send(h, "POST", "/orders", "{}", "k-slow") }()
	for deadline := time.Now().Add(10 * time.Second); len(l.Waiting()) == 0; {
		if time.Now().After(deadline) {
			t.Fatal("the retry never waited for the key")
		}
		time.Sleep(10 * time.Millisecond)
	}
	close(finish)
	f := <-first
	if f.Code != http.StatusCreated {
		t.Fatalf("got %d %s, want 201", f.Code, f.Body)
	}
	checkReplay(t, <-second, f)
	if c, err := rdb.ZCard(ctx, quotaKey(t, srv.Keys(t))).Result(); c != 1 || err != nil {
		t.Fatalf("got %d, %v entries in the quota, want the 1 record", c, err)
	}
	fail.Store("")
	if w := send(h, "POST", "/orders", "{}", "k-2"); w.Code != http.StatusCreated {
		t.Fatalf("got %d %s, want 201", w.Code, w.Body)
	}
	checkProblem(t, send(h, "POST", "/orders", "{}", "k-over"), http.StatusTooManyRequests)
}

// callerDigest is the hash tag of the quota keys of caller, a plain name.
func callerDigest(caller string) string {
	sum := sha256.Sum256([]byte(caller))
	return hex.EncodeToString(sum[:8])
}
