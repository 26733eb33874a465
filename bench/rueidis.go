package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redis/rueidis"
	"github.com/redis/rueidis/rueidislock"
)

// libRueidislock is redis/rueidis's lock package: keys kept by client-side
// caching, waiters woken by invalidation messages.
const libRueidislock = "rueidislock"

// rueidislockSetup names the options every rueidislock row uses.
const rueidislockSetup = "KeyMajority 1, NoLoopTracking, 5s KeyValidity"

// rueidislockLib takes locks through rueidislock, set up as its README
// advises for one Redis: KeyMajority 1 (one key per lock) and
// NoLoopTracking (Redis >= 7.0.5); every other option at its default (5s
// KeyValidity, extended every 2.5s). One Locker, with its own rueidis
// client, per "process".
type rueidislockLib struct {
	lockers []rueidislock.Locker
	wait    time.Duration // 0: one attempt (TryWithContext)
}

// newRueidislock makes one Locker per client of cl, on the same server,
// counting the requests its rueidis clients send in the hook of the client
// it stands in for.
func newRueidislock(cl []*redis.Client, wait time.Duration, opt func(*rueidislock.LockerOption)) contender {
	r := &rueidislockLib{wait: wait}
	for _, c := range cl {
		h := hookOf(c)
		o := rueidislock.LockerOption{
			ClientOption:   rueidis.ClientOption{InitAddress: []string{c.Options().Addr}},
			KeyMajority:    1,
			NoLoopTracking: true,
			ClientBuilder: func(o rueidis.ClientOption) (rueidis.Client, error) {
				c, err := rueidis.NewClient(o)
				if err != nil {
					return nil, err
				}
				return &countingClient{Client: c, h: h}, nil
			},
		}
		if opt != nil {
			opt(&o)
		}
		l, err := rueidislock.NewLocker(o)
		if err != nil {
			r.close()
			return failing{fmt.Errorf("rueidislock: %w", err)}
		}
		r.lockers = append(r.lockers, l)
	}
	return r
}

// failing is a library that could not be set up: every acquire fails.
type failing struct{ err error }

func (f failing) acquire(context.Context, int, string) (releaseFunc, error) { return nil, f.err }
func (f failing) close()                                                    {}

func (r *rueidislockLib) acquire(ctx context.Context, w int, key string) (releaseFunc, error) {
	l := r.lockers[w%len(r.lockers)]
	// The lock's context is a child of the one given to WithContext, and
	// ends the lock when it ends: so the wait budget is a timer that
	// cancels it only while still waiting, not a deadline.
	src, srcCancel := context.WithCancel(ctx)
	if r.wait <= 0 {
		_, unlock, err := l.TryWithContext(src, key)
		if err != nil {
			srcCancel()
			if errors.Is(err, rueidislock.ErrNotLocked) && ctx.Err() == nil {
				return nil, fmt.Errorf("%w: %v", errGaveUp, err)
			}
			return nil, err
		}
		return func(context.Context) error { unlock(); srcCancel(); return nil }, nil
	}
	budget := time.AfterFunc(r.wait, srcCancel)
	_, unlock, err := l.WithContext(src, key)
	if err != nil {
		srcCancel()
		if errors.Is(err, context.Canceled) && ctx.Err() == nil {
			return nil, fmt.Errorf("%w: %v", errGaveUp, err)
		}
		return nil, err
	}
	if !budget.Stop() { // the budget ran out as the lock came: it is let go
		unlock()
		srcCancel()
		return nil, fmt.Errorf("%w: wait budget ran out", errGaveUp)
	}
	return func(context.Context) error { unlock(); srcCancel(); return nil }, nil
}

func (r *rueidislockLib) close() {
	for _, l := range r.lockers {
		l.Close()
	}
}

// countingClient counts the requests a rueidis client sends, as the
// go-redis hook does: a command on its own is one, a DoMulti is one
// pipeline. rueidis may write concurrent requests in one batch (auto
// pipelining); each is still counted.
type countingClient struct {
	rueidis.Client
	h *roundTrips
}

func (c *countingClient) Do(ctx context.Context, cmd rueidis.Completed) rueidis.RedisResult {
	c.h.commands.Add(1)
	return c.Client.Do(ctx, cmd)
}

func (c *countingClient) DoMulti(ctx context.Context, multi ...rueidis.Completed) []rueidis.RedisResult {
	c.h.pipelines.Add(1)
	c.h.piped.Add(int64(len(multi)))
	return c.Client.DoMulti(ctx, multi...)
}

func (c *countingClient) DoCache(ctx context.Context, cmd rueidis.Cacheable, ttl time.Duration) rueidis.RedisResult {
	c.h.commands.Add(1)
	return c.Client.DoCache(ctx, cmd, ttl)
}

func (c *countingClient) DoMultiCache(ctx context.Context, multi ...rueidis.CacheableTTL) []rueidis.RedisResult {
	c.h.pipelines.Add(1)
	c.h.piped.Add(int64(len(multi)))
	return c.Client.DoMultiCache(ctx, multi...)
}
