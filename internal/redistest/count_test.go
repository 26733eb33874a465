package redistest

import (
	"context"
	"testing"

	"github.com/redis/go-redis/v9"
)

func TestCounter(t *testing.T) {
	rdb := Start(t).Client(t)
	trips, sets := CountRoundTrips(), CountCommands("set")
	rdb.AddHook(trips)
	rdb.AddHook(sets)
	ctx := context.Background()
	// A connection's own set-up (HELLO, CLIENT SETINFO) passes the hooks
	// too, and pipelines have connections of their own: count from warm
	// ones.
	rdb.Ping(ctx)
	rdb.Pipelined(ctx, func(p redis.Pipeliner) error { p.Ping(ctx); return nil })
	trips.Reset()
	rdb.Set(ctx, "a", 1, 0)
	rdb.Get(ctx, "a")
	rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		p.Set(ctx, "b", 2, 0)
		p.Set(ctx, "c", 3, 0)
		p.Get(ctx, "b")
		return nil
	})
	if got := trips.Load(); got != 3 {
		t.Errorf("round trips = %d, want 3 (two commands, one pipeline)", got)
	}
	if got := sets.Load(); got != 3 {
		t.Errorf("SET commands = %d, want 3", got)
	}
	trips.Reset()
	if got := trips.Load(); got != 0 {
		t.Errorf("after Reset: %d, want 0", got)
	}
}
