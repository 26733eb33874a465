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
	"strings"
	"testing"
	"time"

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
// same key gets in once the bound has passed, not 409 for as long as the
// attacker likes.
func TestLockClientCannotHoldLock(t *testing.T) {
	const bound = time.Second
	tests := []struct {
		name   string
		opts   []httplock.Option
		attack string // "body" or "answer"
		want   string // the attacker's answer
	}{
		{"slow body, WithMaxHold", []httplock.Option{httplock.WithMaxHold(bound)}, "body", "503"},
		{"slow body, WithReadBody", []httplock.Option{httplock.WithReadBody(1 << 10)}, "body", "200"},
		{"unread answer, WithMaxHold", []httplock.Option{httplock.WithMaxHold(bound)}, "answer", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
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
