package padlock

import (
	"context"
	"errors"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
)

// single is the store on one Redis deployment reached through go-redis:
// a single node, a Sentinel failover client or a Cluster client. Every
// script touches keys of one hash slot, so Cluster routes it to one node.
type single struct {
	client  redis.UniversalClient
	scripts *publishingScripts
	retries int // how often a command that met a closed connection is sent again
	// handovers and fairHandovers batch the hand-offs (lua/handover.lua,
	// lua/handover_fair.lua) that fall due together, one round trip for
	// all (store_combine.go); fairAttempts the attempts of fair Acquires
	// (lua/acquire_fair.lua), which on hot keys join the queue as often
	// as the lock is handed on.
	handovers, fairHandovers, fairAttempts *combiner
	// self is the id of the Locker that owns the store, boxed, when its
	// locks are granted at release across Lockers (wait_bid.go); nil on a
	// Redlock node.
	self any
}

func singleOn(client redis.UniversalClient) single {
	scripts := plainScripts
	if _, ok := client.(*redis.ClusterClient); ok {
		scripts = shardedScripts
	}
	return single{client: client, scripts: scripts, retries: closedRetries,
		handovers: newCombiner(handoverScript), fairHandovers: newCombiner(scripts.handoverFair),
		fairAttempts: newCombiner(acquireFairScript)}
}

// failingFast returns s sending nothing again after a closed connection:
// a Redlock node that is down must not spend the time that every node of
// a request shares (the quorum does without it).
func (s single) failingFast() single {
	s.retries = 0
	return s
}

func (s single) acquire(ctx context.Context, id *lockID, at *attempt) (grant, error) {
	if !id.claim() {
		return grant{}, errTokenReused
	}
	if id.fair {
		if s.self != nil && at != nil && at.bids {
			return grantOf(s.fairAttempts.run(ctx, s.client, s.retries, id.fairBidKeys(), fairBidArgs(id, at)...).Result())
		}
		return grantOf(s.fairAttempts.run(ctx, s.client, s.retries, id.keys[:], id.token, id.argv[1], at.queueTime(), at.placeOf(id)).Result())
	}
	if s.self != nil && at != nil && at.bids {
		return grantOf(s.scripts.acquire.run(ctx, s.client, s.retries, id.bidLostKeys(), bidArgs(at)...).Result())
	}
	return grantOf(s.scripts.acquire.run(ctx, s.client, s.retries, id.keys[:2], acquireArgs(id, at)...).Result())
}

func (s single) release(ctx context.Context, id *lockID, g giveBack) (bool, error) {
	var (
		cmd   *redis.Cmd
		again bool
	)
	notify, withdraw := "", ""
	if g.notify {
		notify = "1"
	}
	if g.withdraw {
		withdraw = "1"
	}
	if g.bury {
		withdraw = "x" + strconv.FormatInt(id.ttl.Milliseconds(), 10)
	}
	switch {
	case id.kind != holdMutex:
		return s.releaseHold(ctx, id)
	case g.bid != nil && s.self != nil:
		b := g.bid
		if !b.id.claim() {
			return false, errTokenReused
		}
		window, yieldTo := "", ""
		if g.window >= time.Millisecond {
			window, yieldTo = strconv.FormatInt(g.window.Milliseconds(), 10), g.yieldTo
		}
		cmd, again = s.scripts.release.runCounted(ctx, s.client, s.retries, id.bidLostKeys(), id.argv[0], notify, s.self, withdraw, window, yieldTo,
			b.id.token, b.id.ttl.Milliseconds())
		n, err := cmd.Int64()
		b.placed = err == nil && n == 2
		b.maybe = !b.placed && (err != nil || again)
		if err == nil && n == 0 && again {
			return false, errReleaseUnsure
		}
		return n >= 1, err
	case id.fair && g.bury && s.self != nil:
		cmd, again = s.scripts.releaseFair.runCounted(ctx, s.client, s.retries, id.fairBidKeys(), id.argv[0], id.ttl.Milliseconds())
	case id.fair:
		cmd, again = s.scripts.releaseFair.runCounted(ctx, s.client, s.retries, id.keys[:], id.argv[:1]...)
	case s.self != nil && g.window >= time.Millisecond:
		cmd, again = s.scripts.release.runCounted(ctx, s.client, s.retries, id.bidKeys(), id.argv[0], notify, s.self, withdraw, g.window.Milliseconds(), g.yieldTo)
	case s.self != nil && g.bury:
		cmd, again = s.scripts.release.runCounted(ctx, s.client, s.retries, id.bidLostKeys(), id.argv[0], notify, s.self, withdraw)
	case s.self != nil:
		cmd, again = s.scripts.release.runCounted(ctx, s.client, s.retries, id.bidKeys(), id.argv[0], notify, s.self, withdraw)
	case g.window >= time.Millisecond:
		cmd, again = s.scripts.release.runCounted(ctx, s.client, s.retries, id.keys[:1], id.argv[0], notify, "", "", g.window.Milliseconds(), g.yieldTo)
	case g.notify:
		cmd, again = s.scripts.release.runCounted(ctx, s.client, s.retries, id.keys[:1], id.argv[0], notify)
	default: // the token alone: publish only if a waiter marked the lock
		cmd, again = s.scripts.release.runCounted(ctx, s.client, s.retries, id.keys[:1], id.argv[:1]...)
	}
	n, err := cmd.Int64()
	if err == nil && n != 1 && again {
		// The copy sent first may have run (behind a proxy, a closed
		// connection does not mean the request died): the lock being gone
		// may be its doing. Not known to be lost, then; not known to be
		// released either.
		return false, errReleaseUnsure
	}
	return n == 1, err
}

// errReleaseUnsure is the error of a release that was sent again after
// its connection closed and found the lock gone.
var errReleaseUnsure = errors.New("padlock: the release was sent again after its connection closed and found the lock gone: the first copy may have released it")

func (s single) leaveQueue(ctx context.Context, id *lockID, place string) error {
	if id.kind != holdMutex {
		return s.leaveHold(ctx, id, place)
	}
	return s.scripts.leaveFair.run(ctx, s.client, s.retries, id.keys[:], place).Err()
}

func (s single) extend(ctx context.Context, id *lockID, ttl time.Duration, seq uint64) (bool, error) {
	n, err := id.extender().run(ctx, s.client, s.retries, id.leaseKeys(), id.token, ttl.Milliseconds(), seq).Int64()
	return n >= 1, err
}

func (s single) handover(ctx context.Context, id, next *lockID, ttl time.Duration, seq uint64) (bool, error) {
	if !next.claim() {
		return false, errTokenReused
	}
	if s.self != nil {
		n, err := s.handovers.run(ctx, s.client, s.retries, []string{id.keys[0], id.bidsKey()}, id.token, next.token, ttl.Milliseconds(), seq, s.self).Int64()
		return n == 1, err
	}
	n, err := s.handovers.run(ctx, s.client, s.retries, id.keys[:1], id.token, next.token, ttl.Milliseconds(), seq).Int64()
	return n == 1, err
}

func (s single) handoverFair(ctx context.Context, id, next *lockID, place string, ttl time.Duration, seq uint64) (int64, bool, error) {
	if !next.claim() {
		return 0, false, errTokenReused
	}
	cmd, again := s.fairHandovers.runCounted(ctx, s.client, s.retries, id.keys[:], id.token, next.token, ttl.Milliseconds(), seq, place)
	return handedFair(cmd, again)
}

// handedFair reads handover_fair.lua's reply. A reply that the releasing
// token did not hold the lock, to a copy sent again after its connection
// closed, is errReleaseUnsure: the copy sent first may have let it go.
func handedFair(cmd *redis.Cmd, again bool) (fence int64, released bool, err error) {
	n, err := cmd.Int64()
	switch {
	case err != nil:
		return 0, false, err
	case n == 0 && again:
		return 0, false, errReleaseUnsure
	case n < 0:
		return 0, true, nil
	}
	return n, false, nil
}

func (s single) resume(ctx context.Context, token string, id *lockID) (bool, error) {
	n, err := resumeScript.run(ctx, s.client, s.retries, id.keys[:1], token, id.argv[1], id.token).Int64()
	return n == 1, err
}

func (s single) pttl(ctx context.Context, id *lockID) (time.Duration, bool, error) {
	n, err := id.pttler().run(ctx, s.client, s.retries, id.keys[:1], id.argv[:1]...).Int64()
	if err != nil || n == -3 {
		return 0, false, err
	}
	if n < 0 { // the key has no expiry: someone set it by hand
		n = 0
	}
	return time.Duration(n) * time.Millisecond, true, nil
}

func (s single) renew(ctx context.Context, batch []renewal, settled func(idx []int)) {
	cc, ok := s.client.(*redis.ClusterClient)
	if !ok { // one node serves every key
		all := make([]int, len(batch))
		for i := range all {
			all[i] = i
		}
		s.renewOn(ctx, s.client, batch, all)
		settled(all)
		return
	}
	// Each master in parallel, and each under its own deadline.
	groups, failed := byMaster(ctx, cc, batch)
	renewEach(groups, failed, settled, func(node *redis.Client, idx []int) { s.renewOn(ctx, node, batch, idx) })
}

// byMaster groups the renewals of batch by the master that serves each
// key's slot. The renewals whose master is unknown get the error and are
// returned in failed.
func byMaster(ctx context.Context, cc *redis.ClusterClient, batch []renewal) (groups map[*redis.Client][]int, failed []int) {
	groups = map[*redis.Client][]int{}
	for i := range batch {
		node, err := cc.MasterForKey(ctx, batch[i].id.lockKey())
		if err != nil {
			batch[i].ok, batch[i].err = false, err
			failed = append(failed, i)
			continue
		}
		groups[node] = append(groups[node], i)
	}
	return groups, failed
}

// groupDeadline returns the earliest deadline of the renewals of batch at
// idx, and whether any has one.
func groupDeadline(batch []renewal, idx []int) (time.Time, bool) {
	var d time.Time
	for _, i := range idx {
		if dl := batch[i].deadline; !dl.IsZero() && (d.IsZero() || dl.Before(d)) {
			d = dl
		}
	}
	return d, !d.IsZero()
}

// renewOn renews the renewals of batch at idx, whose keys node serves,
// until the earliest of their deadlines. They are sent through s.client,
// which on a Cluster follows redirects should the slots have moved, and
// the script is loaded on node. The deadline stops go-redis from trying
// again; a read already waiting ends at the client's ReadTimeout (or at
// the deadline, with ContextTimeoutEnabled). Either way the watchdog
// fires the lost signal at the deadline, answer or not.
func (s single) renewOn(ctx context.Context, node redis.Scripter, batch []renewal, idx []int) {
	if d, ok := groupDeadline(batch, idx); ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithDeadline(ctx, d)
		defer cancel()
	}
	renewLoading(ctx, node, batch, idx, func(idx []int) []int { return s.renewOnce(ctx, batch, idx) })
}

// renewOnce pipelines the renewals of batch at idx and returns the ones the
// server had no script for.
func (s single) renewOnce(ctx context.Context, batch []renewal, idx []int) (missing []int) {
	cmds := make([]*redis.Cmd, len(idx))
	_, _ = s.client.Pipelined(ctx, func(p redis.Pipeliner) error {
		for j, i := range idx {
			r := &batch[i]
			cmds[j] = r.id.extender().queue(ctx, p, r.id.leaseKeys(), r.id.token, r.ttl.Milliseconds(), r.seq)
		}
		return nil
	})
	for j, cmd := range cmds {
		i := idx[j]
		n, err := cmd.Int64()
		if err != nil && redis.HasErrorPrefix(err, "NOSCRIPT") {
			missing = append(missing, i)
			continue
		}
		batch[i].ok, batch[i].err = n >= 1, err
	}
	return missing
}

// scriptArgs are the arguments every script call for one lock sends: the
// token and the lease in ms, boxed once per Acquire (boxing them for every
// call would cost allocations on the hot path).
type scriptArgs [2]any

func newScriptArgs(token string, ttl time.Duration) scriptArgs {
	if ttl == DefaultTTL {
		return scriptArgs{token, defaultLeaseArg}
	}
	return scriptArgs{token, ttl.Milliseconds()}
}

// defaultLeaseArg is DefaultTTL in ms, boxed once: most locks have it.
var defaultLeaseArg any = DefaultTTL.Milliseconds()

// setArgs fills in acquire.lua's ARGV for an attempt at id: the token, the
// lease, how many fences to reserve, the Locker's id (boxed once per
// Locker) and "1".
func (at *attempt) setArgs(id *lockID, reserve int64, lockerID any) {
	at.argv = [5]any{id.argv[0], id.argv[1], reserve, lockerID, "1"}
}

// acquireArgs returns acquire.lua's ARGV for an attempt at id: the token
// and lease alone for a single attempt (at is nil).
func acquireArgs(id *lockID, at *attempt) []any {
	if at == nil {
		return id.argv[:]
	}
	return at.argv[:]
}

// fairBidArgs returns acquire_fair.lua's ARGV for an attempt whose entry
// in the queue carries its bid: the token, lease, queue time and place,
// then the earlier tokens (withPrev).
func fairBidArgs(id *lockID, at *attempt) []any {
	return withPrev(at, id.token, id.argv[1], at.queueTime(), at.placeOf(id))
}

// bidArgs returns acquire.lua's ARGV for an attempt that leaves a bid:
// acquireArgs, then the earlier tokens (withPrev).
func bidArgs(at *attempt) []any { return withPrev(at, at.argv[:]...) }

// withPrev returns args followed by the tokens of the waiter's earlier
// attempts that may have left a bid, or been granted the lock (at.prev;
// ” for none).
func withPrev(at *attempt, args ...any) []any {
	out := make([]any, 0, len(args)+max(len(at.prev), 1))
	out = append(out, args...)
	if len(at.prev) == 0 {
		return append(out, "")
	}
	for _, t := range at.prev {
		out = append(out, t)
	}
	return out
}
