package httplock_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/padlockgo/padlock"
	"github.com/padlockgo/padlock/httplock"
	"github.com/padlockgo/padlock/lockkey"
)

// slowClient sends a POST to path on a raw connection, its body of n bytes
// one byte every gap, then reads the status code of the answer, which it
// sends on the returned channel before closing the connection.
func slowClient(t *testing.T, addr, path string, n int, gap time.Duration) <-chan string {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	status := make(chan string, 1)
	go func() {
		defer conn.Close()
		fmt.Fprintf(conn, "POST %s HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n", path, n)
		for range n {
			time.Sleep(gap)
			if _, err := conn.Write([]byte(" ")); err != nil {
				status <- "write: " + err.Error()
				return
			}
		}
		_ = conn.SetReadDeadline(time.Now().Add(30 * time.Second))
		line, err := bufio.NewReader(conn).ReadString('\n')
		if err != nil {
			status <- "read: " + err.Error()
			return
		}
		status <- strings.Fields(line)[1]
	}()
	return status
}

// nonReader sends a POST to path and never reads the answer. Closing the
// returned connection ends it.
func nonReader(t *testing.T, addr, path string) net.Conn {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(conn, "POST %s HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n", path)
	return conn
}

func post(t *testing.T, url string) int {
	t.Helper()
	resp, err := http.Post(url, "application/json", strings.NewReader("{}"))
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode
}

// The attacks of a client that decides how long a lock is held, on a real
// server: a body sent a byte every 500ms, and a large answer never read.
// With WithMaxHold (or WithReadBody, for the body) another caller of the
// same key gets in once the bound and the lease have passed, not 409 for as
// long as the attacker likes.
func TestLockClientCannotHoldLock(t *testing.T) {
	t.Parallel() // its cases wait out leases, on servers of their own
	const bound = time.Second
	// Past the bound the lock is no longer renewed, and ends with its
	// lease (2 s) while the attacker's handler still runs; the other
	// caller waits a little for it, less than the attack lasts (4 s).
	// (Leases of 500 ms and then 1 s lost their renewals before the bound
	// on a loaded machine, and the attacker's context said lock lost, not
	// the bound.)
	lease := httplock.WithLockOptions(padlock.Options{TTL: 2 * time.Second, Wait: 2 * time.Second})
	tests := []struct {
		name   string
		opts   []httplock.Option
		attack string // "body" or "answer"
		want   string // the attacker's answer
	}{
		{"slow body, WithMaxHold", []httplock.Option{httplock.WithMaxHold(bound), lease}, "body", "503"},
		{"slow body, WithReadBody", []httplock.Option{httplock.WithReadBody(1 << 10), lease}, "body", "200"},
		{"unread answer, WithMaxHold", []httplock.Option{httplock.WithMaxHold(bound), lease}, "answer", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel() // each case has its own server; they wait out leases side by side
			l, _, _ := newLocker(t)
			entered := make(chan struct{}, 1)
			causes := make(chan error, 1)
			mux := http.NewServeMux()
			mux.Handle("POST /orders/{id}", httplock.Lock(l, httplock.PathValue("id", lockkey.Int(64)), tt.opts...)(
				http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					if r.URL.Query().Get("attacker") == "" {
						_, _ = io.ReadAll(r.Body)
						w.WriteHeader(http.StatusOK)
						return
					}
					entered <- struct{}{}
					if tt.attack == "body" {
						_, _ = io.ReadAll(r.Body)
						causes <- context.Cause(r.Context())
						w.WriteHeader(http.StatusOK)
						return
					}
					chunk := make([]byte, 64<<10)
					for range 16 << 20 / len(chunk) {
						if _, err := w.Write(chunk); err != nil {
							break
						}
					}
					causes <- context.Cause(r.Context())
				})))
			srv := httptest.NewServer(mux)
			defer srv.Close()
			addr := strings.TrimPrefix(srv.URL, "http://")

			start := time.Now()
			var status <-chan string
			if tt.attack == "body" {
				status = slowClient(t, addr, "/orders/1?attacker=1", 8, 500*time.Millisecond)
			} else {
				conn := nonReader(t, addr, "/orders/1?attacker=1")
				defer func() {
					conn.Close()
					if cause := <-causes; !errors.Is(cause, httplock.ErrHoldExceeded) {
						t.Errorf("got the attacker's handler context cause %v, want ErrHoldExceeded", cause)
					}
				}()
			}
			if tt.attack == "answer" || strings.Contains(tt.name, "WithMaxHold") {
				<-entered // the attacker holds the lock
			}
			time.Sleep(2 * bound)
			if got := post(t, srv.URL+"/orders/1"); got != http.StatusOK {
				t.Fatalf("another caller %v after the attack began: got status %d, want 200", time.Since(start).Round(time.Millisecond), got)
			}
			if tt.attack == "body" {
				if got := <-status; got != tt.want {
					t.Fatalf("got attacker's status %s, want %s", got, tt.want)
				}
				cause := <-causes
				if wantCause := strings.Contains(tt.name, "WithMaxHold"); errors.Is(cause, httplock.ErrHoldExceeded) != wantCause {
					t.Fatalf("got the attacker's handler context cause %v, want ErrHoldExceeded %v", cause, wantCause)
				}
			}
		})
	}
}

// A handler that writes only after WithMaxHold's bound: its writes are
// dropped, and the client gets a 503 problem instead.
func TestLockMaxHoldLateWrite(t *testing.T) {
	l, _, _ := newLocker(t)
	var writeErr error
	h := httplock.Lock(l, httplock.Const("report"), httplock.WithMaxHold(100*time.Millisecond))(
		http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			<-r.Context().Done()
			w.Header().Set("Location", "/reports/1")
			w.WriteHeader(http.StatusCreated)
			_, writeErr = w.Write([]byte("late"))
		}))
	w := serve(h, "POST", "/reports", "")
	checkProblem(t, w, http.StatusServiceUnavailable)
	if strings.Contains(w.Body.String(), "late") || w.Header().Get("Location") != "" {
		t.Fatalf("got body %q, Location %q, want the handler's late answer dropped", w.Body, w.Header().Get("Location"))
	}
	if !errors.Is(writeErr, httplock.ErrHoldExceeded) {
		t.Fatalf("got late write error %v, want ErrHoldExceeded", writeErr)
	}
}

// A handler that ignores its context past WithMaxHold's bound still holds
// the key: no other request runs beside it (a second one is refused with
// 409 and a Retry-After within the lease), the lock, no longer renewed,
// frees itself within one lease although the handler has not returned,
// and whoever takes the key then has a greater fence. The late handler's
// release finds the lock gone.
func TestLockMaxHoldKeepsExclusion(t *testing.T) {
	t.Parallel() // a server of its own; it waits out a lease
	const ttl = 2 * time.Second
	l, _, _ := newLocker(t)
	var inside atomic.Int32
	var overlap atomic.Bool
	cancelled := make(chan struct{})
	finish := make(chan struct{})
	fences := make(chan int64, 2)
	releaseErrs := make(chan error, 1)
	h := httplock.Lock(l, httplock.Const("report"),
		httplock.WithMaxHold(100*time.Millisecond),
		httplock.WithLockOptions(padlock.Options{TTL: ttl}),
		httplock.WithReleaseError(func(_ *http.Request, err error) { releaseErrs <- err }))(
		http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if inside.Add(1) > 1 {
				overlap.Store(true)
			}
			defer inside.Add(-1)
			fences <- padlock.FromContext(r.Context()).Fence()
			if r.URL.Query().Get("slow") != "" {
				<-r.Context().Done()
				close(cancelled)
				<-finish // and goes on, heedless of its context
			}
			w.WriteHeader(http.StatusNoContent)
		}))
	first := make(chan *httptest.ResponseRecorder, 1)
	go func() { first <- serve(h, "POST", "/reports?slow=1", "") }()
	<-cancelled // the bound has passed; the handler runs on

	w := serve(h, "POST", "/reports", "")
	if overlap.Load() {
		t.Fatal("two handlers ran inside the key's section at once")
	}
	checkProblem(t, w, http.StatusConflict)
	if ra, err := strconv.Atoi(w.Header().Get("Retry-After")); err != nil || ra < 1 || ra > int(ttl/time.Second) {
		t.Fatalf("got Retry-After %q, want 1 to %d (the lease's end)", w.Header().Get("Retry-After"), int(ttl/time.Second))
	}
	// Not renewed, the lock ends with its lease: a request gets in while
	// the first handler is still running (with a greater fence, which a
	// fenced store holds against the first).
	deadline := time.Now().Add(ttl + 10*time.Second)
	for {
		w := serve(h, "POST", "/reports", "")
		if w.Code == http.StatusNoContent {
			break
		}
		if w.Code != http.StatusConflict {
			t.Fatalf("got status %d (body %s) while the first hold lasts, want 409", w.Code, w.Body)
		}
		if time.Now().After(deadline) {
			t.Fatalf("the key is still locked %v after the bound, want it free within one lease (%v)", ttl+10*time.Second, ttl)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if f1, f2 := <-fences, <-fences; f2 <= f1 {
		t.Fatalf("got fence %d after the expired hold's %d, want greater", f2, f1)
	}
	close(finish)
	checkProblem(t, <-first, http.StatusServiceUnavailable)
	if err := <-releaseErrs; !errors.Is(err, padlock.ErrNotHeld) {
		t.Fatalf("got the late handler's release error %v, want ErrNotHeld", err)
	}
}

// A handler that returns after WithMaxHold's bound lets the lock go when
// it returns: the next request does not wait for the lease to run out.
func TestLockMaxHoldReleasesOnReturn(t *testing.T) {
	l, _, _ := newLocker(t)
	h := httplock.Lock(l, httplock.Const("report"), httplock.WithMaxHold(50*time.Millisecond),
		httplock.WithReleaseError(func(_ *http.Request, err error) { t.Errorf("got release error %v, want none", err) }))(
		http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Query().Get("slow") != "" {
				<-r.Context().Done()
			}
			w.WriteHeader(http.StatusNoContent)
		}))
	checkProblem(t, serve(h, "POST", "/reports?slow=1", ""), http.StatusServiceUnavailable)
	if w := serve(h, "POST", "/reports", ""); w.Code != http.StatusNoContent {
		t.Fatalf("got status %d (body %s) after the late handler returned, want 204: its lock released", w.Code, w.Body)
	}
}
