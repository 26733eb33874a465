package padlock_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/padlockgo/padlock"
	"github.com/padlockgo/padlock/internal/redistest"
)

// CheckDeployment names a node that may evict lock keys, and only such a
// node, from what CONFIG SET made of real servers.
func TestCheckDeployment(t *testing.T) {
	redistest.Require(t)
	tests := []struct {
		name      string
		maxmemory string
		policy    string
		wantErr   bool
	}{
		{"noeviction with a limit", "100mb", "noeviction", false},
		{"no limit", "0", "allkeys-lru", false},
		{"volatile-lru evicts every lock key first", "100mb", "volatile-lru", true},
		{"volatile-ttl", "100mb", "volatile-ttl", true},
		{"allkeys-random", "100mb", "allkeys-random", true},
	}
	ctx := context.Background()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := redistest.Start(t)
			good := redistest.Start(t)
			rdb := srv.Client(t)
			if err := rdb.ConfigSet(ctx, "maxmemory", tt.maxmemory).Err(); err != nil {
				t.Fatal(err)
			}
			if err := rdb.ConfigSet(ctx, "maxmemory-policy", tt.policy).Err(); err != nil {
				t.Fatal(err)
			}
			if err := good.Client(t).ConfigSet(ctx, "maxmemory-policy", "noeviction").Err(); err != nil {
				t.Fatal(err)
			}
			err := padlock.CheckDeployment(ctx, good.Client(t), rdb)
			if !tt.wantErr {
				if err != nil {
					t.Fatalf("got %v, want nil", err)
				}
				return
			}
			if !errors.Is(err, padlock.ErrEvictingRedis) {
				t.Fatalf("got %v, want an error matching %v", err, padlock.ErrEvictingRedis)
			}
			msg := err.Error()
			if !strings.Contains(msg, "node "+srv.Addr()) || !strings.Contains(msg, "maxmemory-policy "+tt.policy) ||
				strings.Contains(msg, good.Addr()) {
				t.Fatalf("got %q, want it to name node %s and policy %s, and not %s", msg, srv.Addr(), tt.policy, good.Addr())
			}
		})
	}
}

// A node that refuses CONFIG (here an ACL user without +config, on a
// volatile-lru node with maxmemory) is ErrUnchecked, naming the node and
// what it refused, never nil and never ErrEvictingRedis; one that cannot
// be reached is ErrUnavailable.
func TestCheckDeploymentRefusedAndDown(t *testing.T) {
	redistest.Require(t)
	ctx := context.Background()
	srv := redistest.Start(t)
	admin := srv.Client(t)
	for _, args := range [][]any{
		{"config", "set", "maxmemory", "100mb"},
		{"config", "set", "maxmemory-policy", "volatile-lru"},
		{"acl", "setuser", "app", "on", ">secret", "~*", "+@all", "-config"},
	} {
		if err := admin.Do(ctx, args...).Err(); err != nil {
			t.Fatal(err)
		}
	}
	app := srv.Client(t, func(o *redis.Options) { o.Username, o.Password = "app", "secret" })
	err := padlock.CheckDeployment(ctx, app)
	if !errors.Is(err, padlock.ErrUnchecked) || errors.Is(err, padlock.ErrEvictingRedis) || errors.Is(err, padlock.ErrUnavailable) {
		t.Fatalf("CONFIG refused: got %v, want ErrUnchecked alone", err)
	}
	if msg := err.Error(); !strings.Contains(msg, srv.Addr()) || !strings.Contains(msg, "CONFIG GET maxmemory*") {
		t.Fatalf("CONFIG refused: got %q, want it to name node %s and CONFIG GET maxmemory*", msg, srv.Addr())
	}
	var rerr redis.Error
	if !errors.As(err, &rerr) || !strings.Contains(rerr.Error(), "NOPERM") {
		t.Fatalf("CONFIG refused: got %v, want it to wrap the server's NOPERM refusal", err)
	}
	if err := padlock.CheckDeployment(ctx, admin); !errors.Is(err, padlock.ErrEvictingRedis) {
		t.Fatalf("as admin: got %v, want %v", err, padlock.ErrEvictingRedis)
	}

	down := redistest.Start(t)
	downClient := down.Client(t)
	down.Kill(t)
	if err := padlock.CheckDeployment(ctx, downClient); !errors.Is(err, padlock.ErrUnavailable) {
		t.Fatalf("node down: got %v, want %v", err, padlock.ErrUnavailable)
	}
}

func TestCheckDeploymentCluster(t *testing.T) {
	t.Parallel() // a Cluster of its own
	redistest.Require(t)
	ctx := context.Background()
	c := redistest.StartCluster(t, 3)
	cc := c.Client(t)
	if err := padlock.CheckDeployment(ctx, cc); err != nil {
		t.Fatalf("default config: got %v, want nil", err)
	}
	bad := c.Nodes()[1]
	nc := bad.Client(t)
	for _, kv := range [][2]string{{"maxmemory", "100mb"}, {"maxmemory-policy", "volatile-lfu"}} {
		if err := nc.ConfigSet(ctx, kv[0], kv[1]).Err(); err != nil {
			t.Fatal(err)
		}
	}
	err := padlock.CheckDeployment(ctx, cc)
	if !errors.Is(err, padlock.ErrEvictingRedis) || !strings.Contains(err.Error(), bad.Addr()) {
		t.Fatalf("got %v, want %v naming %s", err, padlock.ErrEvictingRedis, bad.Addr())
	}
	for _, n := range c.Nodes() {
		if n != bad && strings.Contains(err.Error(), n.Addr()) {
			t.Fatalf("got %v, naming %s too", err, n.Addr())
		}
	}
}
