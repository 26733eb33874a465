package padlock_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/padlockgo/padlock"
	"github.com/padlockgo/padlock/internal/redistest"
	"github.com/redis/go-redis/v9"
)

func TestNewPanicsOnBadConfiguration(t *testing.T) {
	rdb := redistest.Start(t).Client(t)
	for _, tc := range []struct {
		name  string
		build func()
		want  string
	}{
		{"nil client", func() { padlock.New(nil) }, "redis client is nil"},
		{"brace in prefix", func() { padlock.New(rdb, padlock.WithKeyPrefix("app{1}:")) }, "WithKeyPrefix"},
		{"bad default TTL", func() { padlock.New(rdb, padlock.WithDefaults(padlock.Options{TTL: -1})) }, "Options.TTL"},
		{"replica ack without replicas", func() { padlock.New(rdb, padlock.WithReplicaAck(0, time.Second)) }, "WithReplicaAck"},
		{"replica ack beyond ReadTimeout", func() {
			c := redis.NewClient(&redis.Options{Addr: rdb.Options().Addr, ReadTimeout: time.Second, ContextTimeoutEnabled: true})
			defer c.Close()
			padlock.New(c, padlock.WithReplicaAck(1, time.Second))
		}, "ReadTimeout"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			defer func() {
				r := recover()
				err, _ := r.(error)
				if !errors.Is(err, padlock.ErrInvalid) || !strings.Contains(err.Error(), tc.want) {
					t.Fatalf("panic value %v, want an ErrInvalid error naming %q", r, tc.want)
				}
			}()
			tc.build()
		})
	}
}

// TestNewRefusesClientIgnoringDeadlines: without ContextTimeoutEnabled
// go-redis keeps context deadlines off the socket, and a request waits for
// a hung Redis as long as the client's ReadTimeout, whatever its deadline
// and Options.Wait say. New returns an error naming the option for every
// go-redis client kind, never a panic, and takes the same client with it.
func TestNewRefusesClientIgnoringDeadlines(t *testing.T) {
	const addr = "127.0.0.1:1" // never dialled: New sends nothing
	for _, tc := range []struct {
		name    string
		options string // named in the error
		client  func(deadlines bool) redis.UniversalClient
	}{
		{"plain", "redis.Options", func(on bool) redis.UniversalClient {
			return redis.NewClient(&redis.Options{Addr: addr, ContextTimeoutEnabled: on})
		}},
		{"failover", "redis.FailoverOptions", func(on bool) redis.UniversalClient {
			return redis.NewFailoverClient(&redis.FailoverOptions{MasterName: "m", SentinelAddrs: []string{addr}, ContextTimeoutEnabled: on})
		}},
		{"cluster", "redis.ClusterOptions", func(on bool) redis.UniversalClient {
			return redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{addr}, ContextTimeoutEnabled: on})
		}},
		{"ring", "redis.RingOptions", func(on bool) redis.UniversalClient {
			return redis.NewRing(&redis.RingOptions{Addrs: map[string]string{"a": addr}, ContextTimeoutEnabled: on})
		}},
	} {
		for _, on := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/ContextTimeoutEnabled=%v", tc.name, on), func(t *testing.T) {
				c := tc.client(on)
				t.Cleanup(func() { _ = c.Close() })
				var (
					l   *padlock.Locker
					err error
				)
				func() {
					defer func() {
						if r := recover(); r != nil {
							t.Fatalf("New panicked: %v; want an error", r)
						}
					}()
					l, err = padlock.New(c)
				}()
				if on {
					if l == nil || err != nil {
						t.Fatalf("got %v, %v; want a Locker", l, err)
					}
					_ = l.Close()
					return
				}
				if l != nil || !errors.Is(err, padlock.ErrInvalid) || !strings.Contains(err.Error(), tc.options+".ContextTimeoutEnabled") {
					t.Fatalf("got %v, %v; want no Locker and an ErrInvalid error naming %s.ContextTimeoutEnabled", l, err, tc.options)
				}
			})
		}
	}
	t.Run("other UniversalClient", func(t *testing.T) {
		// Not one of go-redis's own: its options are not known, so it is
		// taken as it is.
		c := struct{ *redis.Client }{redis.NewClient(&redis.Options{Addr: addr})}
		t.Cleanup(func() { _ = c.Close() })
		l, err := padlock.New(c)
		if err != nil {
			t.Fatalf("got %v; want a Locker", err)
		}
		_ = l.Close()
	})
}

// TestRedisKey: RedisKey names the key Acquire writes the token to, also
// for keys with the characters the layout escapes.
func TestRedisKey(t *testing.T) {
	l, _, rdb := newLocker(t, padlock.WithKeyPrefix("app:"))
	ctx := ctxFor(t)
	for _, key := range []string{"order:1", `a{b}c\d`, "{"} {
		lk := mustAcquire(t, l, ctx, key, padlock.Options{})
		if v, err := rdb.Get(ctx, l.RedisKey(key)).Result(); err != nil || padlock.StoredToken(v) != lk.Token() {
			t.Errorf("RedisKey(%q) = %q holds %q (%v), want the lock's token", key, l.RedisKey(key), v, err)
		}
		lk.Release(ctx)
	}
}
