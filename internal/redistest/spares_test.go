package redistest

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestStartAged: the servers StartAged returns have been up for the age
// asked, by the server's own count, whether they are spares (the first
// two: TestMain starts two) or started for the call (the third), and are
// the test's own: empty, and stopped when it ends.
func TestStartAged(t *testing.T) {
	Require(t)
	const age = 2 * time.Second
	servers := StartAged(t, 3, age)
	for i, s := range servers {
		info, err := s.Client(t).Info(context.Background(), "server").Result()
		if err != nil {
			t.Fatalf("server %d: INFO: %v", i, err)
		}
		_, after, _ := strings.Cut(info, "uptime_in_seconds:")
		up, err := strconv.Atoi(strings.TrimSpace(strings.SplitN(after, "\n", 2)[0]))
		if err != nil {
			t.Fatalf("server %d: INFO server has no uptime: %q", i, info)
		}
		// Uptime counts whole seconds from a start rounded down.
		if time.Duration(up+1)*time.Second < age {
			t.Errorf("server %d: up %ds, want at least %v", i, up, age)
		}
		if n := s.DBSize(t); n != 0 {
			t.Errorf("server %d: %d keys, want a fresh server", i, n)
		}
	}
	if servers[0].Addr() == servers[1].Addr() || servers[1].Addr() == servers[2].Addr() {
		t.Errorf("addresses %v, %v, %v: want three servers", servers[0], servers[1], servers[2])
	}
}
