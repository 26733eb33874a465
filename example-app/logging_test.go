package main

import (
	"encoding/json"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/padlockgo/padlock/internal/redistest"
)

// With LOG_FORMAT=json every line of the log is a JSON object, also while
// Redis is down, when go-redis logs failed dials and broken pub/sub
// connections of its own.
func TestMainJSONLogDuringOutage(t *testing.T) {
	t.Parallel() // a server and a process of its own; it waits for an outage
	redistest.Require(t)
	srv := redistest.Start(t)
	p := startMain(t, "REDIS_ADDR="+srv.Addr(), "API_KEYS=shop-1="+testKey)
	c := &http.Client{Transport: &http.Transport{}, Timeout: 30 * time.Second}
	defer c.CloseIdleConnections()

	orders := doHeader(t, c, "POST", p.url+"/orders", `{"customer":"eve","amount_cents":100,"currency":"EUR"}`, jsonHeader)
	if orders.status != http.StatusCreated {
		t.Fatalf("create: got %d %s", orders.status, orders.raw)
	}
	srv.Kill(t)
	// A pay request during the outage waits for the lock (payWait) and
	// gets 503; go-redis meanwhile fails to dial, and the Locker's release
	// notice subscription breaks and retries.
	checkProblem(t, do(t, c, "POST", p.url+"/orders/1/pay", ""), http.StatusServiceUnavailable)
	eventually(t, "go-redis to log the outage", func() bool { return strings.Contains(p.logs.String(), `"source":"go-redis"`) })
	p.signal(t, os.Interrupt)
	<-p.done
	lines := strings.Split(strings.TrimSpace(p.logs.String()), "\n")
	for i, line := range lines {
		var rec map[string]any
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Fatalf("log line %d is not JSON: %q\nlog:\n%s", i+1, line, p.logs)
		}
	}
	t.Logf("%d log lines, all JSON", len(lines))
}
