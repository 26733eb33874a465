package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"
)

// The server's timeouts are all set, and the write timeout leaves the
// longest route (a capped job) time to answer.
func TestServerTimeoutsSet(t *testing.T) {
	srv := newHTTPServer(defaultConfig(), http.NotFoundHandler(), slog.New(slog.DiscardHandler))
	for name, d := range map[string]time.Duration{
		"ReadHeaderTimeout": srv.ReadHeaderTimeout, "ReadTimeout": srv.ReadTimeout,
		"WriteTimeout": srv.WriteTimeout, "IdleTimeout": srv.IdleTimeout,
	} {
		if d <= 0 {
			t.Errorf("got %s %v, want it set", name, d)
		}
	}
	if min := maxJobSeconds*time.Second + defaultConfig().jobWait; srv.WriteTimeout <= min {
		t.Errorf("got WriteTimeout %v, want more than the longest job, %v", srv.WriteTimeout, min)
	}
}

// A client that sends its body a byte at a time is cut off at the read
// timeout: it cannot keep a request, and whatever the request holds,
// open for as long as it likes.
func TestSlowBodyCutOff(t *testing.T) {
	cfg := testConfig(t)
	cfg.readTimeout = time.Second
	url, _, stop := bootRun(t, cfg)
	defer func() {
		if err := stop(); err != nil {
			t.Error(err)
		}
	}()
	conn, err := net.Dial("tcp", strings.TrimPrefix(url, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	fmt.Fprintf(conn, "POST /orders HTTP/1.1\r\nHost: app\r\nAuthorization: Bearer %s\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{", testKey)
	start := time.Now()
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	wg.Go(func() { // a byte every 100ms: 100s for the whole body
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
				if _, err := conn.Write([]byte(" ")); err != nil {
					return
				}
			}
		}
	})
	_ = conn.SetReadDeadline(time.Now().Add(15 * time.Second))
	res, err := http.ReadResponse(bufio.NewReader(conn), nil)
	took := time.Since(start)
	if err == nil {
		res.Body.Close()
	}
	if nerr, ok := err.(net.Error); ok && nerr.Timeout() {
		t.Fatalf("the server still read the trickled body after %v, want it cut off after its 1s read timeout", took)
	}
	if took > 10*time.Second {
		t.Fatalf("the server ended the request after %v, want about its 1s read timeout", took)
	}
	t.Logf("cut off after %v (response: %v)", took.Round(time.Millisecond), err == nil)
}

// X-Forwarded-For does not pick the client's address unless the
// connection comes from a configured proxy: by default no proxy is
// trusted (gin trusts every one), so the log names the real peer.
func TestTrustedProxies(t *testing.T) {
	tests := []struct {
		name    string
		proxies []string
		want    string
	}{
		{"none by default", nil, "127.0.0.1"},
		{"a configured proxy", []string{"127.0.0.1"}, "203.0.113.9"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := testConfig(t)
			cfg.trustedProxies = tt.proxies
			logs := &syncBuffer{}
			_, ts := startAppLogged(t, cfg, slog.New(slog.NewJSONHandler(logs, nil)))
			doHeader(t, ts.Client(), "GET", ts.URL+"/orders/1", "", http.Header{"X-Forwarded-For": {"203.0.113.9"}})
			var got string
			for line := range strings.SplitSeq(logs.String(), "\n") {
				var rec struct{ Msg, Client string }
				if json.Unmarshal([]byte(line), &rec) == nil && rec.Msg == "request" {
					got = rec.Client
				}
			}
			if got != tt.want {
				t.Fatalf("got client %q in the request log, want %q", got, tt.want)
			}
		})
	}
}

// A busy lock is logged by its namespace and a digest, never by the key's
// text, which may be built from a secret.
func TestBusyLockLogsNoKey(t *testing.T) {
	cfg := testConfig(t)
	cfg.payWait = 0
	logs := &syncBuffer{}
	a, ts := startAppLogged(t, cfg, slog.New(slog.NewJSONHandler(logs, nil)))
	id := createOrder(t, ts)
	url, finish := payInFlight(t, a, ts, id)
	checkProblem(t, do(t, ts.Client(), "POST", url, ""), http.StatusConflict)
	finish()

	key := fmt.Sprintf("order:%d", id)
	for line := range strings.SplitSeq(logs.String(), "\n") {
		var rec struct{ Msg, Lock string }
		if json.Unmarshal([]byte(line), &rec) != nil || rec.Msg != "lock busy" {
			continue
		}
		if strings.Contains(line, key) || rec.Lock != "order" {
			t.Fatalf("got %s, want the lock logged by its namespace, order, not as %s", line, key)
		}
		return
	}
	t.Fatalf("no lock busy line in the log:\n%s", logs)
}

// The public index tells an anonymous client which routes there are, and
// nothing of the deployment: no Redis mode, node, address or version, in
// any mode. Those are on the admin listener.
func TestPublicIndexNamesNoRedis(t *testing.T) {
	for _, mode := range []string{modeSingle, modeEmbedded} {
		t.Run(mode, func(t *testing.T) {
			cfg := testConfig(t)
			addr := cfg.RedisAddrs[0]
			if mode == modeEmbedded {
				cfg.RedisMode, cfg.RedisAddrs = modeEmbedded, nil
			}
			a, ts := startApp(t, cfg)
			r := doHeader(t, ts.Client(), "GET", ts.URL+"/", "", http.Header{"Authorization": {""}})
			if r.status != http.StatusOK || r.body["routes"] == nil {
				t.Fatalf("got %d %s, want 200 with the routes", r.status, r.raw)
			}
			_, port, _ := net.SplitHostPort(addr)
			lower := strings.ToLower(r.raw)
			for _, leak := range []string{a.backend.desc, addr, port, "miniredis", "embedded", "single node", "redlock", "cluster", "redis_version", `"redis"`} {
				if strings.Contains(lower, strings.ToLower(leak)) {
					t.Errorf("GET / names %q: %s", leak, r.raw)
				}
			}
		})
	}
}

// A fleet-wide job is an operator's action: a caller that is not one
// (shop-1, shop-2) gets 403 for every job, before any lock, so it can
// neither run nor hold one, nor learn that one is running: while the
// operator's export run holds its lock, shop-1 still gets 403, and the
// operator's second run gets the 409.
func TestJobsAreOperators(t *testing.T) {
	cfg := testConfig(t)
	cfg.jobDuration = 20 * time.Second
	a, ts := startApp(t, cfg)
	c := ts.Client()
	for _, name := range jobNames {
		r := do(t, c, "POST", ts.URL+"/jobs/"+name+"/run?seconds=30", "")
		checkProblem(t, r, http.StatusForbidden)
		if d, _ := r.body["detail"].(string); !strings.Contains(d, "operator") {
			t.Fatalf("job %s as shop-1: got %s, want 403 saying it is an operator's action", name, r.raw)
		}
	}
	in, err := a.backend.locker.Inspect(context.Background(), 100)
	if err != nil || len(in.Locks) != 0 {
		t.Fatalf("after shop-1's requests: got locks %+v (%v), want none", in.Locks, err)
	}

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	run := make(chan *http.Response, 1)
	go func() {
		req, _ := http.NewRequestWithContext(ctx, "POST", ts.URL+"/jobs/export/run", nil)
		req.Header.Set("Authorization", "Bearer "+testOperatorKey)
		res, err := c.Do(req)
		if err == nil {
			res.Body.Close()
		}
		run <- res
	}()
	eventually(t, "the operator's export run to hold its lock", func() bool {
		in, err := a.backend.locker.Inspect(context.Background(), 100)
		return err == nil && len(in.Locks) == 1
	})
	checkProblem(t, do(t, c, "POST", ts.URL+"/jobs/export/run", ""), http.StatusForbidden)
	checkProblem(t, doOperator(t, c, "POST", ts.URL+"/jobs/export/run"), http.StatusConflict)
	cancel()
	<-run
}
