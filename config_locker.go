package padlock

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"net"
	"time"

	"github.com/redis/go-redis/v9"
)

// Locker takes and holds locks on one Redis deployment, or on a quorum of
// independent nodes (NewRedlock). It is safe for concurrent use; build one
// per deployment and share it. Close it when done.
type Locker struct {
	id       string // random: tells this Locker's notices and yields from others'
	idArg    any    // id, boxed once for the scripts' arguments
	bids     bool   // waiters leave bids, and releases grant them (wait_bid.go)
	store    store
	keys     keyspace
	defaults Options
	cfg      config
	watchdog *watchdog
	notifier *notifier
	recheck  time.Duration // noticeRecheck
	yield    time.Duration // yieldWindow
	// confirming, when set (tests only), runs as a release begins the
	// round trip that confirms a hand-off: the explorer's virtual clock
	// stands still until it sleeps, where a real one has moved on.
	confirming func()
	// extending, when set (tests only), runs in Extend between its check
	// that the lock is held and the change it begins: the explorer's
	// stall between a check and the send that follows.
	extending func()
	// proclaiming, when set (tests only), runs in Term.Proclaim between
	// its check that the term leads and the record it writes.
	proclaiming func()
}

// New returns a Locker on client: a *redis.Client, a Sentinel failover client
// or a *redis.ClusterClient. The Locker does not own client: close client
// after closing the Locker.
//
// client must have ContextTimeoutEnabled set in its options (Options,
// FailoverOptions, ClusterOptions; go-redis's default is off). Only then
// does go-redis apply a context's deadline to the socket: without it a
// request sent to a Redis that hangs waits for the client's ReadTimeout
// (or for ever, with ReadTimeout -1), whatever Options.Wait or the
// caller's deadline say. For a client without it New returns no Locker
// and an ErrInvalid error naming the option:
//
//	rdb := redis.NewClient(&redis.Options{Addr: "localhost:6379", ContextTimeoutEnabled: true})
//	locker, err := padlock.New(rdb)
//	if err != nil {
//		log.Fatal(err)
//	}
//	defer locker.Close()
//
// A Ring is checked alike (RingOptions); another implementation of
// redis.UniversalClient, whose options New cannot see, is taken as it is.
//
// On a Cluster, the locks of each master are renewed on their own: a slow
// or unreachable master costs only the locks in its slots. Redis Cluster
// itself, by default (cluster-require-full-coverage yes), refuses every
// command while a failed master is not yet replaced by its replica, and
// then no lock can be renewed; set it to no to keep the other masters'
// locks.
//
// New follows the constructors' rule (see "Constructors" in the package
// documentation): it panics, with an ErrInvalid error naming the problem,
// when client is nil, an option is invalid, or an option does not fit
// client (a WithReplicaAck timeout the client's ReadTimeout would cut
// short), all of which the program's code gets wrong; it returns the
// error above, since a client's settings may come from configuration.
func New(client redis.UniversalClient, opts ...LockerOption) (*Locker, error) {
	s, cfg := singleStore(client, opts)
	if err := keepsDeadlines(client); err != nil {
		return nil, err
	}
	return singleLocker(s, client, cfg), nil
}

// newOn is New without its check of ContextTimeoutEnabled, for the tests
// that watch go-redis wait out its ReadTimeout.
func newOn(client redis.UniversalClient, opts ...LockerOption) *Locker {
	s, cfg := singleStore(client, opts)
	return singleLocker(s, client, cfg)
}

// singleStore returns the store and configuration of a Locker on client,
// and panics on what the program's code got wrong.
func singleStore(client redis.UniversalClient, opts []LockerOption) (store, config) {
	if client == nil {
		panic(invalid("New", "redis client is nil"))
	}
	cfg, err := lockerConfig(opts)
	if err != nil {
		panic(err)
	}
	s, err := withReplicaAck(singleOn(client), cfg)
	if err != nil {
		panic(err)
	}
	return s, cfg
}

func singleLocker(s store, client redis.UniversalClient, cfg config) *Locker {
	_, cluster := client.(*redis.ClusterClient)
	return newLocker(s, client, keyspace{prefix: cfg.prefix, slotted: cluster}, cfg)
}

// keepsDeadlines returns New's error for a client that does not apply
// context deadlines to its socket.
func keepsDeadlines(client redis.UniversalClient) error {
	var on bool
	var options string
	switch c := client.(type) {
	case *redis.Client:
		o := c.Options()
		on, options = o.ContextTimeoutEnabled, "redis.Options"
		if isFailover(o) {
			options = "redis.FailoverOptions"
		}
	case *redis.ClusterClient:
		on, options = c.Options().ContextTimeoutEnabled, "redis.ClusterOptions"
	case *redis.Ring:
		on, options = c.Options().ContextTimeoutEnabled, "redis.RingOptions"
	default:
		return nil
	}
	if on {
		return nil
	}
	return invalid("New", "the client's %s.ContextTimeoutEnabled is false; set it to true: "+
		"go-redis ignores context deadlines on the socket otherwise, so a request's deadline and Options.Wait "+
		"are not kept while Redis hangs (a reply is awaited for the client's ReadTimeout, or for ever with -1)", options)
}

// isFailover reports whether o are the options of a Sentinel failover
// client, whose master changes: go-redis names its address so.
func isFailover(o *redis.Options) bool { return o.Addr == "FailoverClient" }

func newLocker(s store, client redis.UniversalClient, ks keyspace, cfg config) *Locker {
	id := newToken()
	bids := false
	if one, ok := s.(single); ok {
		// One deployment, no replica acks: grants at release (wait_bid.go).
		one.self = id
		s, bids = one, true
	}
	return &Locker{
		bids:     bids,
		id:       id,
		idArg:    id,
		notifier: newNotifier(client, id),
		recheck:  noticeRecheck,
		yield:    yieldWindow,
		store:    s,
		keys:     ks,
		defaults: cfg.defaults,
		cfg:      cfg,
		watchdog: newWatchdog(s, cfg.margin),
	}
}

// Close stops the Locker's background work and waits for it to end. It does
// not release held locks: they stop being renewed and expire with their
// lease, and since nobody watches them any more their Done channels close
// (ErrLockLost). Acquire fails with ErrClosed afterwards, and so does every
// Acquire still waiting, at once, not at the end of its wait (a fair
// waiter first leaves the queue in Redis). Close is safe to call more than
// once.
func (l *Locker) Close() error {
	// Waiters first: they return while the watchdog waits for renewals in
	// flight.
	l.notifier.close()
	l.watchdog.close()
	return nil
}

// cleanupTimeout bounds the best-effort release after a failed attempt.
const cleanupTimeout = time.Second

// cleanupKey marks the context of a clean-up (cleanupContext).
type cleanupKey struct{}

// cleanupContext returns the context of a clean-up that follows ctx's
// operation (a release, a withdraw, a rollback): not ended with ctx, and
// bounded by cleanupTimeout. A clean-up's script that the server did not
// have (NOSCRIPT) is sent again as EVAL even when that bound ran out as
// the reply came (script.runCounted): the server said it did not run it,
// and a clean-up that never runs leaves a key locked for nobody.
func cleanupContext(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithValue(context.WithoutCancel(ctx), cleanupKey{}, true), cleanupTimeout)
}

// untilAnswered sends a clean-up with send until Redis answers it (a reply,
// an error reply among them), the client is closed, or ctx (a clean-up's,
// bounded by cleanupTimeout) ends, pausing cleanupRetryBackoff, doubling
// to eight times that, between sends. A clean-up that got no answer may
// never have reached Redis, and what it leaves undone may hold a key for
// nobody for a whole lease: a rollback's keys, or a lost attempt left
// unburied, whose copy held up in the network takes the key when it
// lands. Every clean-up is safe to send twice: it names one grant's token.
// Only work behind a caller waits so (notifier.goBehind): an operation
// returns at its deadline, and its clean-ups go on behind it.
func untilAnswered(ctx context.Context, send func() error) {
	untilAnsweredPast(ctx, time.Time{}, nil, send)
}

// untilAnsweredPast is untilAnswered, which past a time that is not zero
// lets its pauses grow on to releaseRetryMaxBackoff and stops once
// closing is closed.
func untilAnsweredPast(ctx context.Context, past time.Time, closing <-chan struct{}, send func() error) {
	backoff := cleanupRetryBackoff
	for !answered(ctx, send()) {
		var stop <-chan struct{}
		longest := 8 * cleanupRetryBackoff
		if !past.IsZero() && time.Now().After(past) {
			stop, longest = closing, releaseRetryMaxBackoff
		}
		t := time.NewTimer(backoff)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return
		case <-stop:
			t.Stop()
			return
		}
		backoff = min(2*backoff, longest)
	}
}

// answered reports whether a clean-up that ended with err needs no other
// send: it ran, Redis answered it, the client is closed, or ctx ended.
func answered(ctx context.Context, err error) bool {
	return ctx.Err() != nil || redisAnswered(err)
}

// redisAnswered reports whether a command that ended with err was
// answered by Redis (a reply, an error reply among them), or needs no
// answer: the client is closed.
func redisAnswered(err error) bool {
	var reply redis.Error
	return err == nil || errors.As(err, &reply) || errors.Is(err, redis.ErrClosed)
}

// answeredBehind sends a clean-up with send, in the caller, with a
// clean-up's bound; when Redis did not answer it, it is sent again behind
// the caller (notifier.goBehind), which has moved on, until Redis answers
// (untilAnswered), with a clean-up's bound of its own. A closed Locker
// sends it once.
func (l *Locker) answeredBehind(ctx context.Context, send func(context.Context) error) {
	first, cancel := cleanupContext(ctx)
	done := answered(first, send(first))
	cancel()
	if !done {
		l.resendBehind(ctx, send)
	}
}

// resendBehind sends a clean-up with send again behind the caller
// (notifier.goBehind), which has moved on, until Redis answers it
// (untilAnswered), with a clean-up's bound; a closed Locker sends nothing
// more.
func (l *Locker) resendBehind(ctx context.Context, send func(context.Context) error) {
	l.notifier.goBehind(func() {
		ctx, cancel := cleanupContext(ctx)
		defer cancel()
		untilAnswered(ctx, func() error { return send(ctx) })
	})
}

// cleanupRetryBackoff is the first pause before a clean-up that got no
// answer is sent again (untilAnswered).
const cleanupRetryBackoff = 10 * time.Millisecond

// releaseRetryMaxBackoff is the longest pause between the sends of a
// release that got no answer once its first clean-up bound has passed
// (resendRelease): about how often go-redis dials again once it stopped
// dialling a server that refused it.
const releaseRetryMaxBackoff = time.Second

// releaseAnswered sends a release with send, in the caller, with a
// clean-up's bound, and when Redis did not answer it, again behind the
// caller (resendRelease) until Redis does or until.
func (l *Locker) releaseAnswered(ctx context.Context, until time.Time, send func(context.Context) error) {
	first, cancel := cleanupContext(ctx)
	err := send(first)
	cancel()
	if !redisAnswered(err) {
		l.resendRelease(ctx, until, send)
	}
}

// resendRelease sends a release that Redis did not answer again, behind
// the caller (notifier.goBehind), until Redis answers it or until the
// lease it lets go of would have ended anyway (until), and for a clean-up's
// bound at least. A release that never reached Redis leaves the key
// locked, for nobody, until its lease ends, and a bound shorter than the
// lease may end before Redis can be reached again: once a client's dials
// have failed, go-redis stops dialling and tries again only about once a
// second (its dial circuit breaker). The pauses double from
// cleanupRetryBackoff to eight times that within the first bound, and on
// to releaseRetryMaxBackoff after it. Close waits for the first bound
// and cuts the rest short; a closed Locker sends nothing more.
func (l *Locker) resendRelease(ctx context.Context, until time.Time, send func(context.Context) error) {
	n := l.notifier
	n.goBehind(func() {
		first := time.Now().Add(cleanupTimeout)
		ctx, cancel := context.WithDeadline(context.WithValue(context.WithoutCancel(ctx), cleanupKey{}, true), latest(first, until))
		defer cancel()
		untilAnsweredPast(ctx, first, n.done, func() error { return send(ctx) })
	})
}

// releaseContext returns ctx for a release, or, when ctx is done already
// (a request whose client went away, a deadline that passed during a
// hand-off's round trip), a clean-up's context: an ended context must
// not leave a key locked, for nobody, for the rest of its lease.
func releaseContext(ctx context.Context) (context.Context, context.CancelFunc) {
	if ctx.Err() != nil {
		return cleanupContext(ctx)
	}
	return ctx, func() {}
}

// endedOnItsWay reports whether a command sent on ctx failed with err
// because ctx ended on the command's way: a release that may never have
// left, which must not leave the key locked for nobody for the rest of
// its lease, is then sent once more on a fresh clean-up's context, as
// releaseContext does for a context that ended before. So is one on a
// clean-up's context that something before it (a hand-off's round trip,
// slow to come back) spent.
func endedOnItsWay(ctx context.Context, err error) bool {
	return err != nil && ctx.Err() != nil
}

func (l *Locker) cleanup(ctx context.Context, id *lockID) {
	l.cleanupAs(ctx, id, giveBack{notify: true, withdraw: true})
}

// cleanupLost is cleanup for an attempt of a waiting Acquire whose reply
// was lost: it also buries the attempt's token, so that a copy of it that
// reaches Redis after this clean-up (held up in the network) takes
// nothing, whenever the wait ends (lua/claim.lua). It reports whether
// Redis answered: if not, the burial may not have reached it either.
func (l *Locker) cleanupLost(ctx context.Context, id *lockID) (buried bool) {
	return l.cleanupAs(ctx, id, giveBack{notify: true, withdraw: true, bury: true}) == nil
}

func (l *Locker) cleanupAs(ctx context.Context, id *lockID, g giveBack) error {
	ctx, cancel := cleanupContext(ctx)
	defer cancel()
	_, err := l.store.release(ctx, id, g)
	return err
}

// maybeSent reports whether a failed command may have reached Redis: not
// when the connection could not even be made.
func maybeSent(err error) bool {
	var op *net.OpError
	if errors.As(err, &op) && op.Op == "dial" || errors.Is(err, errTokenReused) {
		return false
	}
	return !errors.Is(err, redis.ErrPoolTimeout) && !errors.Is(err, redis.ErrClosed)
}

// newToken returns 128 crypto-random bits, base64url-encoded: an owner value
// no other process can guess or repeat.
func newToken() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // never fails (crypto/rand panics instead)
	var s [22]byte
	base64.RawURLEncoding.Encode(s[:], b[:])
	return string(s[:])
}

// RedisKey returns the Redis key that holds the lock on key, as Acquire
// names it: the Locker's prefix and key as a Cluster hash tag (see "What
// lives in Redis" in docs/locks.md). Release notices for the lock go to the
// channel of the same name. For tools and tests that look at Redis
// directly; padlock's own calls need no such key.
func (l *Locker) RedisKey(key string) string { return l.keys.lock(key) }

// Client returns the client New was given, for the parts of an app that
// keep their own records beside the locks on the same Redis (the
// Idempotency-Key middleware: ginidem.NewFromLocker). It returns nil for
// a Locker from NewRedlock, whose clients are independent nodes none of
// which holds such records alone. The Locker does not own the client.
func (l *Locker) Client() redis.UniversalClient {
	if l.cfg.redlock {
		return nil
	}
	return l.notifier.client
}

// String names the Locker by its key prefix, for logs:
// padlock.Locker(prefix "padlock:").
func (l *Locker) String() string { return fmt.Sprintf("padlock.Locker(prefix %q)", l.keys.prefix) }
