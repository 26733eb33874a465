package padlock

import (
	"context"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
)

// withReplicaAck returns s, or s confirming its writes when cfg asks for
// WithReplicaAck.
func withReplicaAck(s single, cfg config) (store, error) {
	if cfg.ackReplicas == 0 {
		return s, nil
	}
	if rt := readTimeout(s.client); rt > 0 && cfg.ackTimeout >= rt {
		return nil, invalid("WithReplicaAck", "timeout %v must be shorter than the client's ReadTimeout %v, which would cut WAIT short", cfg.ackTimeout, rt)
	}
	return acked{single: s, replicas: cfg.ackReplicas, timeout: cfg.ackTimeout}, nil
}

// readTimeout returns the read timeout of client, 0 when none or unknown.
func readTimeout(client redis.UniversalClient) time.Duration {
	switch c := client.(type) {
	case *redis.Client:
		return c.Options().ReadTimeout
	case *redis.ClusterClient:
		return c.Options().ReadTimeout
	}
	return 0
}

// acked is the store of a Locker with WithReplicaAck: single, with a WAIT
// after each write that takes or keeps a lock. WAIT counts the replicas
// that have every write its own connection made, so it is pipelined right
// behind the write, on the connection to the master of the key's slot.
type acked struct {
	single
	replicas int
	timeout  time.Duration
}

// replicaError reports a write that too few replicas confirmed.
type replicaError struct {
	got, want int64
	timeout   time.Duration
}

func (e *replicaError) Error() string {
	return fmt.Sprintf("padlock: replicas did not confirm the lock: %d of %d acknowledged within %v", e.got, e.want, e.timeout)
}

// master returns the client whose pipelines reach the master of key's
// slot over one connection.
func (a acked) master(ctx context.Context, key string) (redis.UniversalClient, error) {
	if cc, ok := a.client.(*redis.ClusterClient); ok {
		return cc.MasterForKey(ctx, key)
	}
	return a.client, nil
}

// evalAcked runs sc and then WAIT in one pipeline on c, falling back
// from EVALSHA to EVAL when the server lacks the script.
func (a acked) evalAcked(ctx context.Context, c redis.UniversalClient, sc *script, keys []string, args ...any) (*redis.Cmd, *redis.Cmd) {
	var (
		cmd  *redis.Cmd
		wait *redis.Cmd
	)
	for _, sha := range [...]bool{true, false} {
		_, _ = c.Pipelined(ctx, func(p redis.Pipeliner) error {
			if sha {
				cmd = sc.queue(ctx, p, keys, args...)
			} else {
				cmd = sc.queueEval(ctx, p, keys, args...)
			}
			wait = p.Do(ctx, "WAIT", a.replicas, a.timeout.Milliseconds())
			return nil
		})
		if !redis.HasErrorPrefix(cmd.Err(), "NOSCRIPT") {
			break
		}
	}
	return cmd, wait
}

// confirmed returns an error unless wait reports enough replicas.
func (a acked) confirmed(wait *redis.Cmd) error {
	n, err := wait.Int64()
	if err != nil {
		return fmt.Errorf("padlock: replicas did not confirm the lock: WAIT: %w", err)
	}
	if n < int64(a.replicas) {
		return &replicaError{got: n, want: int64(a.replicas), timeout: a.timeout}
	}
	return nil
}

func (a acked) acquire(ctx context.Context, id *lockID, at *attempt) (grant, error) {
	if !id.claim() {
		return grant{}, errTokenReused
	}
	c, err := a.master(ctx, id.lockKey())
	if err != nil {
		return grant{}, err
	}
	var cmd, wait *redis.Cmd
	if id.fair {
		cmd, wait = a.evalAcked(ctx, c, acquireFairScript, id.keys[:], id.token, id.argv[1], at.queueTime(), at.placeOf(id))
	} else {
		cmd, wait = a.evalAcked(ctx, c, a.single.scripts.acquire, id.keys[:2], acquireArgs(id, at)...)
	}
	g, err := grantOf(cmd.Result())
	if err != nil || g.first == 0 {
		return g, err
	}
	if err := a.confirmed(wait); err != nil {
		// A lock that a failover may lose is not handed out; the Locker's
		// clean-up would release it too, but not after every kind of error.
		rctx, cancel := cleanupContext(ctx)
		defer cancel()
		_, _ = a.single.release(rctx, id, giveBack{notify: true})
		return grant{}, err
	}
	return g, nil
}

func (a acked) extend(ctx context.Context, id *lockID, ttl time.Duration, seq uint64) (bool, error) {
	c, err := a.master(ctx, id.lockKey())
	if err != nil {
		return false, err
	}
	cmd, wait := a.evalAcked(ctx, c, id.extender(), id.leaseKeys(), id.token, ttl.Milliseconds(), seq)
	n, err := cmd.Int64()
	if err != nil || n < 1 {
		return false, err
	}
	if err := a.confirmed(wait); err != nil {
		return false, err
	}
	return true, nil
}

func (a acked) handover(ctx context.Context, id, next *lockID, ttl time.Duration, seq uint64) (bool, error) {
	if !next.claim() {
		return false, errTokenReused
	}
	c, err := a.master(ctx, id.lockKey())
	if err != nil {
		return false, err
	}
	cmd, wait := a.evalAcked(ctx, c, handoverScript, id.keys[:1], id.token, next.token, ttl.Milliseconds(), seq)
	n, err := cmd.Int64()
	if err != nil || n != 1 {
		return false, err
	}
	if err := a.confirmed(wait); err != nil {
		return false, err
	}
	return true, nil
}

func (a acked) handoverFair(ctx context.Context, id, next *lockID, place string, ttl time.Duration, seq uint64) (int64, bool, error) {
	if !next.claim() {
		return 0, false, errTokenReused
	}
	c, err := a.master(ctx, id.lockKey())
	if err != nil {
		return 0, false, err
	}
	cmd, wait := a.evalAcked(ctx, c, a.single.scripts.handoverFair, id.keys[:], id.token, next.token, ttl.Milliseconds(), seq, place)
	fence, released, err := handedFair(cmd, false)
	if err != nil || fence == 0 {
		return fence, released, err
	}
	if err := a.confirmed(wait); err != nil {
		return 0, false, err
	}
	return fence, false, nil
}

func (a acked) resume(ctx context.Context, token string, id *lockID) (bool, error) {
	c, err := a.master(ctx, id.lockKey())
	if err != nil {
		return false, err
	}
	cmd, wait := a.evalAcked(ctx, c, resumeScript, id.keys[:1], token, id.argv[1], id.token)
	n, err := cmd.Int64()
	if err != nil || n != 1 {
		return false, err
	}
	if err := a.confirmed(wait); err != nil {
		return false, err
	}
	return true, nil
}

// renew sends the batch as one pipeline per master, in parallel, each
// ending with a WAIT that confirms all of its renewals at once. Each master
// is waited for on its own, and its renewals settled as soon as it answers:
// a slow master or replica holds up only the locks of its own slots.
func (a acked) renew(ctx context.Context, batch []renewal, settled func(idx []int)) {
	groups := map[redis.UniversalClient][]int{}
	var failed []int
	for i := range batch {
		c, err := a.master(ctx, batch[i].id.lockKey())
		if err != nil {
			batch[i].ok, batch[i].err = false, err
			failed = append(failed, i)
			continue
		}
		groups[c] = append(groups[c], i)
	}
	renewEach(groups, failed, settled, func(c redis.UniversalClient, idx []int) { a.renewOn(ctx, c, batch, idx) })
}

// renewOn renews the renewals of batch at idx through c, the master of
// their slots, until the earliest of their deadlines.
func (a acked) renewOn(ctx context.Context, c redis.UniversalClient, batch []renewal, idx []int) {
	if d, ok := groupDeadline(batch, idx); ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithDeadline(ctx, d)
		defer cancel()
	}
	renewLoading(ctx, c, batch, idx, func(idx []int) (missing []int) {
		cmds := make([]*redis.Cmd, len(idx))
		var wait *redis.Cmd
		_, _ = c.Pipelined(ctx, func(p redis.Pipeliner) error {
			for j, i := range idx {
				r := &batch[i]
				cmds[j] = r.id.extender().queue(ctx, p, r.id.leaseKeys(), r.id.token, r.ttl.Milliseconds(), r.seq)
			}
			wait = p.Do(ctx, "WAIT", a.replicas, a.timeout.Milliseconds())
			return nil
		})
		confirmErr := a.confirmed(wait)
		for j, i := range idx {
			n, err := cmds[j].Int64()
			switch {
			case redis.HasErrorPrefix(err, "NOSCRIPT"):
				missing = append(missing, i)
			case err == nil && n >= 1 && confirmErr != nil:
				batch[i].ok, batch[i].err = false, confirmErr
			default:
				batch[i].ok, batch[i].err = n >= 1, err
			}
		}
		return missing
	})
}

// acquireSlot takes the keys of one slot as single does, and then waits
// for the replicas, as acquire does: a set that a failover may lose is
// not handed out, and its keys are given back.
func (a acked) acquireSlot(ctx context.Context, ids []*lockID, lockerID any, waiting bool, held string) (slotGrant, error) {
	keys, args, err := slotAttempt(ids, lockerID, waiting, held)
	if err != nil {
		return slotGrant{}, err
	}
	c, err := a.master(ctx, keys[0])
	if err != nil {
		return slotGrant{}, err
	}
	cmd, wait := a.evalAcked(ctx, c, a.multiScripts().acquire, keys, args...)
	g, err := slotGrantOf(ids, cmd)
	if err != nil || g.fences == nil {
		return g, err
	}
	if err := a.confirmed(wait); err != nil {
		rctx, cancel := cleanupContext(ctx)
		defer cancel()
		_, _ = a.single.releaseSlot(rctx, ids, make([]bool, len(ids)), false)
		return slotGrant{}, err
	}
	return g, nil
}
