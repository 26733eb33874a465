package middleware_test

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

	"github.com/gin-gonic/gin"

	"github.com/padlockgo/padlock"
	"github.com/padlockgo/padlock/httplock"
	"github.com/padlockgo/padlock/keyfunc"
	"github.com/padlockgo/padlock/lockkey"
	"github.com/padlockgo/padlock/middleware"
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

// The attacks of a client that decides how long a lock is held, on a real
// server through gin: a body sent a byte every 500ms, and a large answer
// never read. With WithMaxHold (or WithReadBody, for the body) another
// caller of the same key gets in once the bound and the lease have passed.
func TestLockClientCannotHoldLock(t *testing.T) {
	t.Parallel() // its cases wait out leases, on servers of their own
	const bound = time.Second
	// Past the bound the lock is no longer renewed, and ends with its
	// lease (2 s) while the attacker's handler still runs; the other
	// caller, 2 bounds after the attack began, waits for it, less than the
	// body attack lasts (16 bytes, 8 s): 2 s + 5 s. The lease is renewed
	// every 667 ms, so only a stall of over a second before the bound could
	// lose the lock there (with a 500 ms lease, a stall of 330 ms on a
	// loaded machine did, and the cause was "lock lost", not the bound).
	lease := httplock.WithLockOptions(padlock.Options{TTL: 2 * time.Second, Wait: 5 * time.Second})
	tests := []struct {
		name   string
		opt    httplock.Option
		attack string // "body" or "answer"
		want   string // the slow body's answer
	}{
		{"slow body, WithMaxHold", httplock.WithMaxHold(bound), "body", "503"},
		{"slow body, WithReadBody", httplock.WithReadBody(1 << 10), "body", "200"},
		{"unread answer, WithMaxHold", httplock.WithMaxHold(bound), "answer", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel() // each case has its own server; they wait out leases side by side
			l, _, _ := newLocker(t)
			entered := make(chan struct{}, 1)
			causes := make(chan error, 1)
			r := gin.New()
			r.POST("/orders/:id", middleware.Lock(l, keyfunc.Param("id", lockkey.Int(64)), tt.opt, lease), func(c *gin.Context) {
				if c.Query("attacker") == "" {
					_, _ = io.ReadAll(c.Request.Body)
					c.Status(http.StatusOK)
					return
				}
				entered <- struct{}{}
				if tt.attack == "body" {
					_, _ = io.ReadAll(c.Request.Body)
					causes <- context.Cause(c.Request.Context())
					c.String(http.StatusOK, "paid")
					return
				}
				chunk := make([]byte, 64<<10)
				for range 16 << 20 / len(chunk) {
					if _, err := c.Writer.Write(chunk); err != nil {
						break
					}
				}
				causes <- context.Cause(c.Request.Context())
			})
			srv := httptest.NewServer(r)
			defer srv.Close()
			addr := strings.TrimPrefix(srv.URL, "http://")

			start := time.Now()
			var status <-chan string
			if tt.attack == "body" {
				status = slowClient(t, addr, "/orders/1?attacker=1", 16, 500*time.Millisecond)
			} else {
				conn, err := net.Dial("tcp", addr)
				if err != nil {
					t.Fatal(err)
				}
				fmt.Fprintf(conn, "POST /orders/1?attacker=1 HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n")
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
			resp, err := http.Post(srv.URL+"/orders/1", "application/json", strings.NewReader("{}"))
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("another caller %v after the attack began: got status %d, want 200", time.Since(start).Round(time.Millisecond), resp.StatusCode)
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

// A handler that answers only after WithMaxHold's bound: its answer is
// dropped, and the client gets a 503 problem instead.
func TestLockMaxHoldLateWrite(t *testing.T) {
	l, _, _ := newLocker(t)
	r := gin.New()
	r.POST("/reports", middleware.Lock(l, keyfunc.Const("report"), httplock.WithMaxHold(100*time.Millisecond)), func(c *gin.Context) {
		<-c.Request.Context().Done()
		c.Header("Location", "/reports/1")
		c.String(http.StatusCreated, "late")
	})
	w := serve(r, "POST", "/reports", "")
	checkProblem(t, w, http.StatusServiceUnavailable)
	if strings.Contains(w.Body.String(), "late") || w.Header().Get("Location") != "" {
		t.Fatalf("got body %q, Location %q, want the handler's late answer dropped", w.Body, w.Header().Get("Location"))
	}
}

// Through gin: a handler that ignores its context past WithMaxHold's bound
// still holds the key. A second request meanwhile is refused with 409 and
// never runs beside it; the lock, no longer renewed, frees itself within
// one lease although the handler has not returned, and the next holder's
// fence is greater.
func TestLockMaxHoldKeepsExclusion(t *testing.T) {
	t.Parallel() // a server of its own; it waits out a lease
	const ttl = 2 * time.Second
	l, _, _ := newLocker(t)
	var inside atomic.Int32
	var overlap atomic.Bool
	cancelled := make(chan struct{})
	finish := make(chan struct{})
	fences := make(chan int64, 2)
	r := gin.New()
	r.POST("/reports", middleware.Lock(l, keyfunc.Const("report"), httplock.WithMaxHold(100*time.Millisecond),
		httplock.WithLockOptions(padlock.Options{TTL: ttl})), func(c *gin.Context) {
		if inside.Add(1) > 1 {
			overlap.Store(true)
		}
		defer inside.Add(-1)
		fences <- middleware.LockFrom(c).Fence()
		if c.Query("slow") != "" {
			<-c.Request.Context().Done()
			close(cancelled)
			<-finish // and goes on, heedless of its context
		}
		c.Status(http.StatusNoContent)
	})
	first := make(chan *httptest.ResponseRecorder, 1)
	go func() { first <- serve(r, "POST", "/reports?slow=1", "") }()
	<-cancelled // the bound has passed; the handler runs on

	w := serve(r, "POST", "/reports", "")
	if overlap.Load() {
		t.Fatal("two handlers ran inside the key's section at once")
	}
	checkProblem(t, w, http.StatusConflict)
	if ra, err := strconv.Atoi(w.Header().Get("Retry-After")); err != nil || ra < 1 || ra > int(ttl/time.Second) {
		t.Fatalf("got Retry-After %q, want 1 to %d (the lease's end)", w.Header().Get("Retry-After"), int(ttl/time.Second))
	}
	deadline := time.Now().Add(ttl + 10*time.Second)
	for {
		w := serve(r, "POST", "/reports", "")
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
}
