package padlock

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// Leader election, after etcd's concurrency.Election: the leader is the
// holder of one lock, so leadership has the lock's lease, renewal, lost
// signal and fence. Beside the lock, one record in the lock's slot
// (<lock key>:leader) names the term in office: its fence, its owner token
// and the value the leader published. A record counts only while the
// token it names holds the lock (lua/leader.lua), so a leader whose lease
// ran out is never reported in office. Observers listen on the record's
// name as a channel: each new term publishes there.
//
// The record is one small key per election name. It is deleted when its
// leader resigns, and overwritten by the next leader otherwise.

var (
	//go:embed lua/elect.lua
	electLua string
	//go:embed lua/leader.lua
	leaderLua    string
	leaderScript = newScript(leaderLua)
	//go:embed lua/resign.lua
	resignLua    string
	resignScript = newScript(resignLua)

	electPlain   = newScript(grantLua + electLua)
	electSharded = newScript(grantLua + strings.ReplaceAll(electLua, "redis.pcall('publish'", "redis.pcall('spublish'"))
)

// ErrNoLeader reports that an election has no leader in office.
var ErrNoLeader = errors.New("padlock: no leader")

// Election is a leader election among the processes that campaign under
// one name through Lockers on the same Redis deployment. At most one
// candidate is leader at a time; it stays leader, its lease renewed, until
// it resigns or loses the lease. Make one with Locker.Election; it is safe
// for concurrent use and holds no resources.
type Election struct {
	l    *Locker
	name string
	o    Options
}

// Election returns the election called name. Leadership is a lock on the
// key name (the same lock Acquire(ctx, name, ...) takes, so pick a name
// that no other lock uses) with o's TTL and Retry. o.Wait is ignored:
// Campaign waits until it wins or its context ends. o.Fair and o.NoRenew
// are refused (ErrInvalid): a fair queue entry of a candidate that died
// would hold up the election for as long as its campaign could last.
// Default: the zero Options, a 30s lease renewed every 10s.
//
// Elections need one Redis deployment: on a Redlock Locker Campaign
// returns an ErrInvalid error.
func (l *Locker) Election(name string, o Options) *Election {
	return &Election{l: l, name: name, o: o}
}

// Leader is a term of office as observers see it.
type Leader struct {
	// Value is what the leader published (Campaign, Term.Proclaim): its
	// address, say.
	Value string
	// Fence is the term's fence, strictly greater than every earlier
	// term's: a store the leader writes to can refuse writes of a deposed
	// leader (see Lock.Fence).
	Fence int64
}

// Term is a candidate's term as leader, from a won Campaign until Resign or
// until the leadership is lost. Methods are safe for concurrent use.
type Term struct {
	e     *Election
	lock  *Lock
	value atomic.Pointer[string] // the value published last
}

// campaignWait is how long one Acquire of a campaign waits before
// Campaign asks again; Campaign as a whole waits for its context.
const campaignWait = time.Hour

// Campaign blocks until the candidate is elected, or ctx ends, and then
// publishes value as the leader's. It returns the Term, which the caller
// must end with Resign; its Done closes, and its contexts are cancelled,
// as soon as the leadership is lost: before the lease can run out in
// Redis, so that a deposed leader stops before another can begin. Each
// term's Fence is greater than every earlier term's.
//
// While another candidate leads, Campaign sleeps until that leader's lock
// is released or its lease runs out, as a waiting Acquire does. It returns
// ctx's error (wrapped in a *NotAcquiredError) when ctx ends first, an
// ErrUnavailable error when Redis cannot be reached, ErrClosed when the
// Locker is closed, and an ErrInvalid error when ctx carries a term of
// this election already (a term's Context).
func (e *Election) Campaign(ctx context.Context, value string) (*Term, error) {
	if e.name == "" {
		return nil, invalid("name", "must not be empty")
	}
	if e.o.NoRenew || e.l.defaults.NoRenew {
		return nil, invalid("Options.NoRenew", "a leader's lease is renewed (set here or by WithDefaults)")
	}
	if e.o.Fair {
		return nil, invalid("Options.Fair", "elections have no fair mode")
	}
	if e.l.cfg.redlock {
		return nil, invalid("Election", "needs one Redis deployment, not Redlock")
	}
	if e.l.holds(ctx, e.name) {
		// A term's context campaigning again would get the lock reentrantly
		// and then a second Term that could resign the first.
		return nil, invalid("ctx", "already carries a term of election %q", e.name)
	}
	o := e.o
	o.Wait = campaignWait
	o.Fair = false // not from WithDefaults either
	for {
		lk, err := e.l.Acquire(ctx, e.name, o)
		switch {
		case errors.Is(err, ErrNotAcquired) && ctx.Err() == nil:
			continue // an hour went by: campaign on
		case err != nil:
			return nil, err
		}
		t := &Term{e: e, lock: lk}
		t.value.Store(&value)
		switch err := t.record(ctx, value); {
		case err == nil:
			return t, nil
		case errors.Is(err, ErrNotHeld):
			continue // lost before it could take office
		default:
			rctx, cancel := cleanupContext(ctx)
			_ = lk.Release(rctx)
			cancel()
			return nil, err
		}
	}
}

// keys returns the election's lock key and leader record.
func (e *Election) keys() []string {
	k := e.l.keys.lock(e.name)
	return []string{k, k + ":leader"}
}

func (e *Election) client() redis.UniversalClient { return e.l.notifier.client }

// record writes the term into the leader record, if the term's lock is
// still held.
func (t *Term) record(ctx context.Context, value string) error {
	e := t.e
	sc := electPlain
	if e.l.notifier.sharded {
		sc = electSharded
	}
	n, err := sc.run(ctx, e.client(), closedRetries, e.keys(), t.lock.Token(), t.lock.Fence(), value).Int64()
	switch {
	case err != nil:
		return unavailable("campaign", err)
	case n != 1:
		t.lock.locker.watchdog.gone(t.lock.lease, t.lock.id)
		return ErrNotHeld
	}
	return nil
}

// Fence returns the term's fence (its lock's): greater than every earlier
// term's fence in this election.
func (t *Term) Fence() int64 { return t.lock.Fence() }

// Value returns the value the leader published last.
func (t *Term) Value() string { return *t.value.Load() }

// Done returns a channel that is closed when the term ends: resigned, or
// leadership lost. Err says which.
func (t *Term) Done() <-chan struct{} { return t.lock.Done() }

// Err returns nil while the candidate leads, ErrLockLost once the
// leadership was lost, and ErrReleased after Resign.
func (t *Term) Err() error { return t.lock.Err() }

// Context returns a copy of parent that is cancelled when the term ends;
// context.Cause says why. Run the leader's work under it: it is cancelled
// before the lease can run out in Redis, before any other candidate can
// be elected.
func (t *Term) Context(parent context.Context) context.Context { return t.lock.Context(parent) }

// Proclaim publishes a new value for the term, without an election. It
// returns ErrNotHeld when the leadership was lost.
func (t *Term) Proclaim(ctx context.Context, value string) error {
	if t.Err() != nil {
		return ErrNotHeld
	}
	if f := t.e.l.proclaiming; f != nil {
		f()
	}
	if err := t.record(ctx, value); err != nil {
		return err
	}
	t.value.Store(&value)
	return nil
}

// Resign ends the term: it takes the leader record down and releases the
// leadership, so that another candidate can be elected at once. It
// returns ErrNotHeld when the leadership was lost already, and an
// ErrUnavailable error when Redis could not be reached. Resign is safe
// on a nil Term and when called twice.
func (t *Term) Resign(ctx context.Context) error {
	if t == nil {
		return nil
	}
	e := t.e
	if t.lock.Err() == nil {
		if err := resignScript.run(ctx, e.client(), closedRetries, e.keys()[1:], t.lock.Token()).Err(); err != nil {
			_ = t.lock.Release(ctx)
			return unavailable("resign", err)
		}
	}
	return t.lock.Release(ctx)
}

// Leader returns the leader in office, or ErrNoLeader when there is none,
// and an ErrUnavailable error when Redis could not be reached. Between an
// election and the new leader's record (one round trip) there is briefly
// none.
func (e *Election) Leader(ctx context.Context) (Leader, error) {
	if e.name == "" {
		return Leader{}, invalid("name", "must not be empty")
	}
	reply, err := leaderScript.run(ctx, e.client(), closedRetries, e.keys()).StringSlice()
	switch {
	case errors.Is(err, redis.Nil):
		return Leader{}, ErrNoLeader
	case err != nil:
		return Leader{}, unavailable("leader", err)
	case len(reply) != 2:
		return Leader{}, fmt.Errorf("padlock: unexpected leader reply %q", reply)
	}
	fence, err := strconv.ParseInt(reply[0], 10, 64)
	if err != nil {
		return Leader{}, fmt.Errorf("padlock: unexpected leader reply %q", reply)
	}
	return Leader{Value: reply[1], Fence: fence}, nil
}

// observeRecheck is how often Observe reads the record, in case a notice
// was lost (a reconnect, or a server that refuses the subscription).
const observeRecheck = time.Second

// Observe returns a channel that receives the leader in office now, if
// any, and then every new term, or new value (Proclaim), as it is
// published. It does not report the absence of a leader: after a
// resignation or a lost lease the next value is the next leader. A term
// that began and ended between two looks may be missed, but the values
// received always have non-decreasing fences. The channel is closed when
// ctx ends; Observe's goroutine, which ctx owns, ends with it. A slow
// reader holds it back, nothing is queued.
func (e *Election) Observe(ctx context.Context) <-chan Leader {
	out := make(chan Leader)
	go e.observe(ctx, out)
	return out
}

func (e *Election) observe(ctx context.Context, out chan<- Leader) {
	defer close(out)
	channel := e.keys()[1]
	var ps *redis.PubSub
	if e.l.notifier.sharded {
		ps = e.client().SSubscribe(ctx, channel)
	} else {
		ps = e.client().Subscribe(ctx, channel)
	}
	defer ps.Close()
	msgs := ps.Channel(redis.WithChannelSize(16))
	tick := time.NewTicker(observeRecheck)
	defer tick.Stop()
	var last Leader
	look := func() bool {
		ld, err := e.Leader(ctx)
		if err != nil || ld.Fence < last.Fence || ld == last {
			return true
		}
		select {
		case out <- ld:
			last = ld
			return true
		case <-ctx.Done():
			return false
		}
	}
	if !look() {
		return
	}
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		case _, ok := <-msgs:
			if !ok {
				return
			}
		}
		// A notice only says that something changed: read the record,
		// which counts only while its leader holds the lock.
		if !look() {
			return
		}
	}
}
