package redistest

import (
	"context"
	"slices"
	"sync/atomic"

	"github.com/redis/go-redis/v9"
)

// Counter is a go-redis hook that counts what a client sends: its round
// trips (CountRoundTrips) or the commands of some names (CountCommands).
// Add it with client.AddHook. It is safe for concurrent use.
type Counter struct {
	names []string // nil: count round trips
	n     atomic.Int64
}

// CountRoundTrips returns a Counter of round trips: each command sent on
// its own counts one, and so does each pipeline, however many commands it
// holds. (A script's EVALSHA that falls back to EVAL counts two.)
func CountRoundTrips() *Counter { return &Counter{} }

// CountCommands returns a Counter of the commands named (lower case, as
// go-redis names them: "evalsha", "info"), sent alone or in a pipeline.
func CountCommands(names ...string) *Counter {
	if names == nil {
		names = []string{}
	}
	return &Counter{names: names}
}

// Load returns the count so far.
func (c *Counter) Load() int64 { return c.n.Load() }

// Reset sets the count back to zero.
func (c *Counter) Reset() { c.n.Store(0) }

func (c *Counter) counts(cmd redis.Cmder) bool {
	return c.names == nil || slices.Contains(c.names, cmd.Name())
}

// DialHook implements redis.Hook; dials are not counted.
func (c *Counter) DialHook(next redis.DialHook) redis.DialHook { return next }

// ProcessHook implements redis.Hook.
func (c *Counter) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if c.counts(cmd) {
			c.n.Add(1)
		}
		return next(ctx, cmd)
	}
}

// ProcessPipelineHook implements redis.Hook.
func (c *Counter) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		if c.names == nil {
			c.n.Add(1)
		} else {
			for _, cmd := range cmds {
				if c.counts(cmd) {
					c.n.Add(1)
				}
			}
		}
		return next(ctx, cmds)
	}
}
