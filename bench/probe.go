package main

import (
	"context"
	"runtime"
	"time"

	"github.com/redis/go-redis/v9"
)

// probeIdle is how long the probe measures before the locks are taken.
const probeIdle = 3 * time.Second

// probe is another client of the server: one connection sending PING
// every millisecond, its latencies showing what others feel of the
// benchmark's load.
type probe struct{ c *redis.Client }

func newProbe(addr string) *probe {
	return &probe{c: redis.NewClient(&redis.Options{Addr: addr, PoolSize: 1})}
}

func (p *probe) close() { p.c.Close() }

// start pings until the returned function is called, which returns the
// p99 latency.
func (p *probe) start(ctx context.Context) (stop func() time.Duration) {
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan []time.Duration)
	go func() {
		var lat []time.Duration
		tk := time.NewTicker(time.Millisecond)
		defer tk.Stop()
		for {
			select {
			case <-ctx.Done():
				done <- lat
				return
			case <-tk.C:
			}
			t := time.Now()
			if p.c.Ping(ctx).Err() == nil {
				lat = append(lat, time.Since(t))
			}
		}
	}()
	return func() time.Duration {
		cancel()
		_, p99, _ := percentiles(<-done)
		return p99
	}
}

// run pings for d and returns the p99 latency.
func (p *probe) run(ctx context.Context, d time.Duration) time.Duration {
	stop := p.start(ctx)
	sleepCtx(ctx, d)
	return stop()
}

// heapInUse returns the heap this process holds after a collection.
func heapInUse() int64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return int64(m.HeapInuse)
}
