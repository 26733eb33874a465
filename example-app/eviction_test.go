package main

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"testing"

	"github.com/padlockgo/padlock/internal/redistest"
)

// An app whose Redis may evict keys says so at start, naming the policy:
// an evicted lock key is a lock two callers hold.
func TestEvictingRedisWarns(t *testing.T) {
	redistest.Require(t)
	for _, tc := range []struct {
		policy string
		warn   bool
	}{
		{"noeviction", false},
		{"volatile-lru", true}, // every lock key has a TTL: these go first
		{"allkeys-lru", true},
	} {
		t.Run(tc.policy, func(t *testing.T) {
			cfg := testConfig(t)
			rdb := redistest.Start(t)
			c := rdb.Client(t)
			ctx := context.Background()
			if err := c.ConfigSet(ctx, "maxmemory", "512mb").Err(); err != nil {
				t.Fatal(err)
			}
			if err := c.ConfigSet(ctx, "maxmemory-policy", tc.policy).Err(); err != nil {
				t.Fatal(err)
			}
			cfg.RedisAddrs = []string{rdb.Addr()}
			var logs bytes.Buffer
			startAppLogged(t, cfg, slog.New(slog.NewTextHandler(&logs, nil)))
			got := strings.Contains(logs.String(), "maxmemory-policy noeviction")
			if got != tc.warn || (tc.warn && !strings.Contains(logs.String(), tc.policy)) {
				t.Fatalf("policy %s: warned = %v, want %v (naming the policy); log:\n%s", tc.policy, got, tc.warn, logs.String())
			}
		})
	}
}
