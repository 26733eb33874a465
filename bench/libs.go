package main

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/bsm/redislock"
	"github.com/go-redsync/redsync/v4"
	rsredis "github.com/go-redsync/redsync/v4/redis"
	rsgoredis "github.com/go-redsync/redsync/v4/redis/goredis/v9"
	"github.com/padlockgo/padlock"
	"github.com/redis/go-redis/v9"
)

// errGaveUp marks an Acquire that ended without the lock in the normal way:
// its wait budget (or tries) ran out while others held the key.
var errGaveUp = errors.New("gave up waiting")

// releaseFunc lets a held lock go.
type releaseFunc func(ctx context.Context) error

// contender is one library set up for one run: workers take locks through
// it. acquire returns once worker w holds key, or with an error: errGaveUp
// (wrapped) when the library's wait ran out, anything else when it failed.
type contender interface {
	acquire(ctx context.Context, w int, key string) (releaseFunc, error)
	close()
}

// Library names, as printed.
const (
	libFloor     = "go-redis floor"
	libPadlock   = "padlock"
	libRedsync   = "redsync"
	libRedislock = "redislock"
)

// ---- the go-redis floor -------------------------------------------------

// floorRelease deletes a key only if it still holds our token: the least a
// safe release can be.
var floorRelease = redis.NewScript(`if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) end return 0`)

// floorFencedAcquire takes the key and a fence with the commands padlock's
// acquire script runs when nobody waits: SET NX PX, then a fence from a
// counter that never goes below the server clock in µs (TIME, SET ... GET).
// Its counter is one per key, where padlock's is one per hash slot (one in
// all outside Cluster); the commands are the same. It returns the fence,
// or 0 when the key is busy.
var floorFencedAcquire = redis.NewScript(`
if not redis.call('set', KEYS[1], ARGV[1], 'nx', 'px', ARGV[2]) then return 0 end
local t = redis.call('time')
local now = t[1] .. string.rep('0', 6 - #t[2]) .. t[2]
local fence = tonumber(now)
local old = tonumber(redis.call('set', KEYS[2], now, 'get'))
if old and old >= fence then
  fence = old + 1
  redis.call('set', KEYS[2], string.format('%d', fence))
end
return fence`)

// floor is the least a safe lock cycle costs with go-redis: SET NX PX to
// take the key, one EVALSHA to delete it if it is still ours. No waiting,
// renewal, fencing or notices. With fenced set, the key is taken by
// floorFencedAcquire instead: the least a cycle with a fence costs, which
// is what padlock's uncontended cycle does in Redis.
type floor struct {
	clients []*redis.Client
	ttl     time.Duration
	fenced  bool
}

func (f *floor) acquire(ctx context.Context, w int, key string) (releaseFunc, error) {
	c := f.clients[w%len(f.clients)]
	token := fmt.Sprintf("%016x%016x", rand.Uint64(), rand.Uint64())
	var (
		ok  bool
		err error
	)
	if f.fenced {
		var fence int64
		fence, err = floorFencedAcquire.Run(ctx, c, []string{key, "fence:{" + key + "}"}, token, f.ttl.Milliseconds()).Int64()
		ok = fence > 0
	} else {
		ok, err = c.SetNX(ctx, key, token, f.ttl).Result()
	}
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, fmt.Errorf("%w: key busy", errGaveUp)
	}
	return func(ctx context.Context) error {
		n, err := floorRelease.Run(ctx, c, []string{key}, token).Int64()
		if err == nil && n != 1 {
			err = errors.New("floor: lock not held at release")
		}
		return err
	}, nil
}

func (f *floor) close() {}

// ---- padlock ------------------------------------------------------------

type padlockLib struct {
	lockers []*padlock.Locker
	opts    padlock.Options
}

func (p *padlockLib) acquire(ctx context.Context, w int, key string) (releaseFunc, error) {
	lk, err := p.lockers[w%len(p.lockers)].Acquire(ctx, key, p.opts)
	if err != nil {
		if errors.Is(err, padlock.ErrNotAcquired) && ctx.Err() == nil {
			return nil, fmt.Errorf("%w: %v", errGaveUp, err)
		}
		return nil, err
	}
	return lk.Release, nil
}

func (p *padlockLib) close() {
	for _, l := range p.lockers {
		l.Close()
	}
}

// ---- go-redsync/redsync -------------------------------------------------

// redsyncLib takes locks through redsync. A redsync Mutex carries the
// state of one acquisition, so each Acquire makes its own, as redsync's
// examples do.
type redsyncLib struct {
	rs   []*redsync.Redsync // one per "process"
	opts []redsync.Option
}

func newRedsync(clients [][]redis.UniversalClient, opts ...redsync.Option) *redsyncLib {
	r := &redsyncLib{opts: opts}
	for _, nodes := range clients {
		pools := make([]rsredis.Pool, len(nodes))
		for i, c := range nodes {
			pools[i] = rsgoredis.NewPool(c)
		}
		r.rs = append(r.rs, redsync.New(pools...))
	}
	return r
}

func (r *redsyncLib) acquire(ctx context.Context, w int, key string) (releaseFunc, error) {
	m := r.rs[w%len(r.rs)].NewMutex(key, r.opts...)
	if err := m.LockContext(ctx); err != nil {
		var taken *redsync.ErrTaken
		if (errors.Is(err, redsync.ErrFailed) || errors.As(err, &taken)) && ctx.Err() == nil {
			return nil, fmt.Errorf("%w: %v", errGaveUp, err)
		}
		return nil, err
	}
	return func(ctx context.Context) error {
		ok, err := m.UnlockContext(ctx)
		if err == nil && !ok {
			err = errors.New("redsync: unlock failed")
		}
		return err
	}, nil
}

func (r *redsyncLib) close() {}

// ---- bsm/redislock ------------------------------------------------------

type redislockLib struct {
	clients []*redislock.Client
	ttl     time.Duration
	wait    time.Duration // 0: one attempt
	retry   func() redislock.RetryStrategy
}

func (r *redislockLib) acquire(ctx context.Context, w int, key string) (releaseFunc, error) {
	var opt *redislock.Options
	if r.retry != nil {
		opt = &redislock.Options{RetryStrategy: r.retry()}
	}
	octx := ctx
	if r.wait > 0 {
		var cancel context.CancelFunc
		octx, cancel = context.WithTimeout(ctx, r.wait)
		defer cancel()
	}
	lk, err := r.clients[w%len(r.clients)].Obtain(octx, key, r.ttl, opt)
	if err != nil {
		if (errors.Is(err, redislock.ErrNotObtained) || errors.Is(err, context.DeadlineExceeded)) && ctx.Err() == nil {
			return nil, fmt.Errorf("%w: %v", errGaveUp, err)
		}
		return nil, err
	}
	return lk.Release, nil
}

func (r *redislockLib) close() {}
