package main

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// ---- floor: what renewing this many keys costs Redis at the least -------

// floorHolder holds its keys with SET PX and renews every one every TTL/3
// with a bare PEXPIRE: no owner check, no script, no lease bookkeeping.
// The PEXPIREs go in pipelines of renewBatch, one after another, spread
// evenly over the renewal interval. No lock library can renew for less,
// so its row shows what the machine itself allows: another client's
// latency while Redis does only this.
type floorHolder struct {
	c      redis.UniversalClient
	ttl    time.Duration
	taken  []atomic.Bool
	failed atomic.Int64 // PEXPIREs that found their key gone: lost
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

func newFloorHolder(c redis.UniversalClient, locks int, ttl time.Duration) *floorHolder {
	return &floorHolder{c: c, ttl: ttl, taken: make([]atomic.Bool, locks)}
}

func (f *floorHolder) take(ctx context.Context, i int, key string) error {
	if err := f.c.Set(ctx, key, "1", f.ttl).Err(); err != nil {
		return err
	}
	f.taken[i].Store(true)
	return nil
}

// start begins the renewal loop: a pipeline every TTL/3 divided by the
// number of pipelines a round needs, over the keys taken so far. A
// pipeline that ends late is followed at once by the next.
func (f *floorHolder) start(ctx context.Context, _ *atomic.Int64) {
	ctx, f.cancel = context.WithCancel(ctx)
	n := len(f.taken)
	pipes := (n + renewBatch - 1) / renewBatch
	step := f.ttl / 3 / time.Duration(pipes)
	f.wg.Go(func() {
		next := time.Now()
		for p := 0; ctx.Err() == nil; p = (p + 1) % pipes {
			next = next.Add(step)
			if !sleepCtx(ctx, time.Until(next)) {
				return
			}
			f.renew(ctx, p*renewBatch, min((p+1)*renewBatch, n))
		}
	})
}

// renew sends one pipeline of PEXPIREs for the taken keys in [from, to).
func (f *floorHolder) renew(ctx context.Context, from, to int) {
	cmds := make([]*redis.BoolCmd, 0, to-from)
	_, _ = f.c.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i := from; i < to; i++ {
			if f.taken[i].Load() {
				cmds = append(cmds, p.PExpire(ctx, heldKey(i), f.ttl))
			}
		}
		return nil
	})
	for _, c := range cmds {
		if ok, err := c.Result(); err == nil && !ok {
			f.failed.Add(1)
		}
	}
}

func (f *floorHolder) lost() int { return int(f.failed.Load()) }

func (f *floorHolder) release(context.Context) {
	if f.cancel != nil {
		f.cancel()
	}
	f.wg.Wait()
}
