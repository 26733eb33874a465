package padlock

import (
	"context"
	"errors"
	"time"
)

// Observer receives the lifecycle events of a Locker's locks: how each
// Acquire went, releases, renewals, losses, release notices that cannot be
// received, and on a Redlock Locker each node's vote. Set one with
// WithObserver; the adapters in padlockotel (OpenTelemetry) and
// padlockslog (log/slog) are ready-made ones.
//
// Methods are called synchronously, on the goroutine where the event
// happens, some of them while the Locker holds internal locks (renewals
// and losses are seen by the watchdog under its mutex). So a method must
// return quickly, must not block, and must not call the Locker or any of
// its Locks. Methods of one Observer may be called concurrently.
//
// Embed NopObserver to implement only the methods you need: methods added
// to Observer later are then no-ops for you.
//
// Every lock an AcquireEnd reports taken (OutcomeAcquired or
// OutcomeHandedOff) ends with exactly one LockReleased or LockLost, so an
// Observer can count the locks held. Reentrant handles are not locks of
// their own: they end with no event.
type Observer interface {
	// AcquireStart is called when Acquire begins. The context it returns
	// is the one the Acquire goes on with (its Redis commands included)
	// and the one AcquireAttempt and AcquireEnd receive: a tracer puts its
	// span there. Return ctx to add nothing.
	AcquireStart(ctx context.Context, e AcquireStartEvent) context.Context
	// AcquireAttempt is called after each attempt of an Acquire that did
	// not take the lock: the key was busy, or Redis failed the attempt.
	AcquireAttempt(ctx context.Context, e AcquireAttemptEvent)
	// AcquireWait is called when an Acquire starts to wait for a busy
	// key (in its Locker's line for the key), at most once per Acquire.
	// A newcomer behind other waiters of the same Locker waits without an
	// attempt first.
	AcquireWait(ctx context.Context, e AcquireWaitEvent)
	// AcquireEnd is called when Acquire returns, with its outcome.
	AcquireEnd(ctx context.Context, e AcquireEndEvent)
	// LockReleased is called when a lock's Release let it go: back to
	// Redis, or handed on to a waiter of the same Locker.
	LockReleased(e LockReleasedEvent)
	// LeaseRenewed is called when a background renewal was answered, or
	// failed for want of an answer.
	LeaseRenewed(e LeaseRenewedEvent)
	// LockLost is called when a held lock is lost (see ErrLockLost).
	LockLost(e LockLostEvent)
	// NoticesUnavailable is called when a waiter cannot subscribe to a
	// key's release notices and falls back to polling on its retry
	// strategy.
	NoticesUnavailable(e NoticesUnavailableEvent)
	// QuorumVoted is called on a Redlock Locker after the nodes voted on
	// a request, with each node's outcome.
	QuorumVoted(e QuorumVotedEvent)
}

// NopObserver implements Observer with methods that do nothing. Embed it
// in an Observer that needs only some of the events.
type NopObserver struct{}

// AcquireStart returns ctx.
func (NopObserver) AcquireStart(ctx context.Context, _ AcquireStartEvent) context.Context { return ctx }

// AcquireAttempt does nothing.
func (NopObserver) AcquireAttempt(context.Context, AcquireAttemptEvent) {}

// AcquireWait does nothing.
func (NopObserver) AcquireWait(context.Context, AcquireWaitEvent) {}

// AcquireEnd does nothing.
func (NopObserver) AcquireEnd(context.Context, AcquireEndEvent) {}

// LockReleased does nothing.
func (NopObserver) LockReleased(LockReleasedEvent) {}

// LeaseRenewed does nothing.
func (NopObserver) LeaseRenewed(LeaseRenewedEvent) {}

// LockLost does nothing.
func (NopObserver) LockLost(LockLostEvent) {}

// NoticesUnavailable does nothing.
func (NopObserver) NoticesUnavailable(NoticesUnavailableEvent) {}

// QuorumVoted does nothing.
func (NopObserver) QuorumVoted(QuorumVotedEvent) {}

// AcquireStartEvent describes an Acquire that begins.
type AcquireStartEvent struct {
	// Key is the lock key as passed to Acquire. It may carry user data:
	// keep it out of metric attributes.
	Key string
	// Options are the Options as passed to Acquire (before defaults).
	Options Options
}

// AcquireAttemptEvent describes one attempt that did not take the lock.
type AcquireAttemptEvent struct {
	Key string // the lock key as passed to Acquire
	// Attempt counts the Acquire's attempts, from 1.
	Attempt int
	// HolderTTL is the holder's remaining lease the attempt saw; 0 when
	// unknown or when the attempt failed.
	HolderTTL time.Duration
	// Err is the attempt's error when Redis failed it; nil when the key
	// was busy.
	Err error
}

// AcquireWaitEvent describes an Acquire that starts to wait.
type AcquireWaitEvent struct {
	Key string // the lock key as passed to Acquire
}

// AcquireOutcome says how an Acquire ended.
type AcquireOutcome int

// The outcomes of an Acquire. Their String values are the ones the
// adapters use as attribute values.
const (
	OutcomeAcquired    AcquireOutcome = iota + 1 // taken from Redis
	OutcomeHandedOff                             // handed over by a holder of the same Locker
	OutcomeReentrant                             // the context already carried the lock
	OutcomeBusy                                  // the key stayed held for the whole wait
	OutcomeUnavailable                           // Redis could not be reached
	OutcomeCancelled                             // the context ended first
	OutcomeClosed                                // the Locker was closed
	OutcomeInvalid                               // a bad key or Options
)

var outcomeNames = [...]string{"", "acquired", "handed_off", "reentrant", "busy", "unavailable", "cancelled", "closed", "invalid"}

// String returns the outcome's attribute value: "acquired", "handed_off",
// "reentrant", "busy", "unavailable", "cancelled", "closed", "invalid",
// or "unknown".
func (o AcquireOutcome) String() string {
	if o > 0 && int(o) < len(outcomeNames) {
		return outcomeNames[o]
	}
	return "unknown"
}

// Held reports whether the outcome gave the caller a new lock
// (OutcomeAcquired or OutcomeHandedOff), one that ends with a
// LockReleased or LockLost event.
func (o AcquireOutcome) Held() bool { return o == OutcomeAcquired || o == OutcomeHandedOff }

// AcquireEndEvent describes an Acquire that returns.
type AcquireEndEvent struct {
	Key     string         // the lock key as passed to Acquire
	Outcome AcquireOutcome // how the Acquire ended
	// Wait is how long the Acquire took, from its call to its return.
	Wait time.Duration
	// Attempts is how many attempts were sent to Redis (0 for a
	// reentrant or handed-off lock taken without one).
	Attempts int
	// Waited is true when the Acquire waited in its Locker's line (an
	// AcquireWait came before).
	Waited bool
	// Fence is the lock's fence when it was taken; 0 otherwise.
	Fence int64
	// Err is the error Acquire returns; nil when it returns a lock.
	Err error
}

// LockReleasedEvent describes a lock that its holder let go.
type LockReleasedEvent struct {
	Key   string // the lock key as passed to Acquire
	Fence int64  // the lock's fence (0 on a Redlock Locker)
	// Held is how long the lock was held, from its Acquire's reply.
	Held time.Duration
	// HandedOn is true when the lock went straight to a waiter of the
	// same Locker instead of back to Redis.
	HandedOn bool
	// Err is an error matching ErrUnavailable when Redis did not answer
	// the release (the lock ends with its lease then); nil otherwise.
	Err error
}

// LeaseRenewedEvent describes one background renewal of a lock's lease.
type LeaseRenewedEvent struct {
	Key string // the lock key as passed to Acquire
	// OK is true when Redis confirmed the renewal; false when no answer
	// came (Err says why) and the renewal will be tried again until the
	// lease's trust runs out. A renewal that finds the lock gone is a
	// LockLost event instead.
	OK  bool
	Err error // why no answer came, when OK is false; nil otherwise
	// Lag is how long after its scheduled time the renewal was
	// confirmed (or given up): its round trip plus any delay in sending
	// it. Negative for a renewal that rode along early with a batch.
	Lag time.Duration
	// RoundTrip is the time from sending the renewal to its outcome.
	RoundTrip time.Duration
	// Renewals counts the lock's confirmed renewals so far.
	Renewals int
}

// LostCause says why a lock was lost.
type LostCause int

// Why a lock is lost. Their String values are the ones the adapters use
// as attribute values.
const (
	// LostTokenGone: Redis answered that the owner token no longer holds
	// the lock (it expired there, was deleted, or the server forgot it).
	LostTokenGone LostCause = iota + 1
	// LostExpired: no renewal was confirmed before the lease's trusted
	// end, typically because Redis could not be reached.
	LostExpired
	// LostClosed: the Locker was closed while the lock was held.
	LostClosed
)

var lostNames = [...]string{"", "token_gone", "lease_expired", "locker_closed"}

// String returns the cause's attribute value: "token_gone",
// "lease_expired", "locker_closed", or "unknown".
func (c LostCause) String() string {
	if c > 0 && int(c) < len(lostNames) {
		return lostNames[c]
	}
	return "unknown"
}

// LockLostEvent describes a held lock that was lost.
type LockLostEvent struct {
	Key   string    // the lock key as passed to Acquire
	Fence int64     // the lock's fence (0 on a Redlock Locker)
	Cause LostCause // why it was lost
	// Held is how long the lock was held before it was lost.
	Held time.Duration
}

// NoticesUnavailableEvent describes a waiter that falls back to polling.
type NoticesUnavailableEvent struct {
	Key string // the lock key the waiter waits for
	Err error  // why the subscription failed
}

// QuorumVotedEvent describes the votes of a Redlock Locker's nodes on one
// request.
type QuorumVotedEvent struct {
	// Op is the request: "acquire", "extend", "release", "ttl", "resume"
	// or "renew".
	Op string
	// Need is how many nodes must agree; Agreed how many did.
	Need, Agreed int
	// Nodes holds every node's outcome, in the order of the clients.
	Nodes []NodeResult
}

// WithObserver sets the Observer that receives the Locker's lifecycle
// events. An unset observer costs nothing: no event is built. Combine
// several with JoinObservers. Default: none.
func WithObserver(o Observer) SharedOption {
	return SharedOption{func(c *config) { c.observer = o }}
}

// JoinObservers returns an Observer that passes every event to each of
// obs in turn (nil ones left out); AcquireStart threads the context
// through them in order. It returns nil when none is left.
func JoinObservers(obs ...Observer) Observer {
	var j joined
	for _, o := range obs {
		if o != nil {
			j = append(j, o)
		}
	}
	switch len(j) {
	case 0:
		return nil // no observer: WithObserver(nil) costs nothing
	case 1:
		return j[0]
	}
	return j
}

type joined []Observer

func (j joined) AcquireStart(ctx context.Context, e AcquireStartEvent) context.Context {
	for _, o := range j {
		ctx = o.AcquireStart(ctx, e)
	}
	return ctx
}

func (j joined) AcquireAttempt(ctx context.Context, e AcquireAttemptEvent) {
	for _, o := range j {
		o.AcquireAttempt(ctx, e)
	}
}

func (j joined) AcquireWait(ctx context.Context, e AcquireWaitEvent) {
	for _, o := range j {
		o.AcquireWait(ctx, e)
	}
}

func (j joined) AcquireEnd(ctx context.Context, e AcquireEndEvent) {
	for _, o := range j {
		o.AcquireEnd(ctx, e)
	}
}

func (j joined) LockReleased(e LockReleasedEvent) {
	for _, o := range j {
		o.LockReleased(e)
	}
}

func (j joined) LeaseRenewed(e LeaseRenewedEvent) {
	for _, o := range j {
		o.LeaseRenewed(e)
	}
}

func (j joined) LockLost(e LockLostEvent) {
	for _, o := range j {
		o.LockLost(e)
	}
}

func (j joined) NoticesUnavailable(e NoticesUnavailableEvent) {
	for _, o := range j {
		o.NoticesUnavailable(e)
	}
}

func (j joined) QuorumVoted(e QuorumVotedEvent) {
	for _, o := range j {
		o.QuorumVoted(e)
	}
}

// acquireObserved is Acquire with an observer set: the same call, framed
// by AcquireStart and AcquireEnd.
func (l *Locker) acquireObserved(ctx context.Context, key string, o Options, began time.Time) (*Lock, error) {
	obs := l.cfg.observer
	ctx = obs.AcquireStart(ctx, AcquireStartEvent{Key: key, Options: o})
	var st acquireStats
	lk, err := l.acquire(ctx, key, o, began, &st)
	e := AcquireEndEvent{Key: key, Wait: time.Since(began), Attempts: st.tries, Waited: st.waited, Err: err}
	switch {
	case lk != nil && lk.outer != nil:
		e.Outcome = OutcomeReentrant
	case lk != nil && lk.lease != &lk.own:
		e.Outcome, e.Fence = OutcomeHandedOff, lk.Fence()
	case lk != nil:
		e.Outcome, e.Fence = OutcomeAcquired, lk.Fence()
	default:
		e.Outcome = acquireOutcomeOf(ctx, err)
	}
	obs.AcquireEnd(ctx, e)
	if e.Outcome.Held() {
		// From now on the lock's end is reported; if it ended already
		// (lost before anyone watched), report that now.
		lk.obsState.Store(obsWatched)
		if lk.Err() == ErrLockLost {
			lk.observeLost(LostExpired)
		}
	}
	return lk, err
}

// acquireStats is what an observed Acquire tells AcquireEnd.
type acquireStats struct {
	tries  int
	waited bool
}

// acquireOutcomeOf classifies the error of an Acquire that returned no lock.
func acquireOutcomeOf(ctx context.Context, err error) AcquireOutcome {
	switch {
	case errors.Is(err, ErrInvalid):
		return OutcomeInvalid
	case errors.Is(err, ErrClosed):
		return OutcomeClosed
	case ctx.Err() != nil:
		return OutcomeCancelled
	case errors.Is(err, ErrUnavailable):
		return OutcomeUnavailable
	}
	return OutcomeBusy
}

// A Lock's obsState: whether its end is yet to be reported to the
// observer. Only a lock AcquireEnd reported held is watched, and its end
// is reported once: LockReleased or LockLost, whichever comes first.
const (
	obsNone     int32 = iota // no observer, or not reported held
	obsWatched               // reported held; its end not yet
	obsReported              // its end reported
)

// lost ends lk as lost for why, and tells the observer.
func (lk *Lock) lost(why LostCause) {
	if lk.finish(ErrLockLost) {
		lk.observeLost(why)
	}
}

func (lk *Lock) observeLost(why LostCause) {
	if lk.obsState.CompareAndSwap(obsWatched, obsReported) {
		lk.locker.cfg.observer.LockLost(LockLostEvent{Key: lk.key, Fence: lk.Fence(), Cause: why, Held: time.Since(lk.since)})
	}
}

// observeReleased tells the observer that lk's Release let it go.
func (lk *Lock) observeReleased(handedOn bool, err error) {
	if lk.obsState.CompareAndSwap(obsWatched, obsReported) {
		lk.locker.cfg.observer.LockReleased(LockReleasedEvent{Key: lk.key, Fence: lk.Fence(), Held: time.Since(lk.since), HandedOn: handedOn, Err: err})
	}
}

// errNoSubscription and errUnconfirmed say why a waiter polls.
var (
	errNoSubscription = errors.New("padlock: subscribing to release notices failed")
	errUnconfirmed    = errors.New("padlock: the subscription to release notices was not confirmed in time (refused by an ACL?)")
)

// observePolling tells the observer, once per Acquire, that a waiter first
// in line has no release notices to wait for and polls: the subscription
// failed (pending is nil), or Redis has not confirmed it for longer than
// a SUBSCRIBE may take (go-redis drops a refusal).
func (a *acquisition) observePolling(pending <-chan struct{}) {
	err := errNoSubscription
	if pending != nil {
		if time.Since(a.began) < subscribeTimeout {
			return
		}
		err = errUnconfirmed
	}
	a.polling = true
	a.l.cfg.observer.NoticesUnavailable(NoticesUnavailableEvent{Key: a.key, Err: err})
}

// observeRenewal tells the observer how renewal r went, answered at now.
// The watchdog's mutex is held.
func observeRenewal(r *renewal, now time.Time) {
	holder := r.lease.holder
	obs := holder.locker.cfg.observer
	if obs == nil {
		return
	}
	e := LeaseRenewedEvent{Key: holder.key, OK: r.err == nil, Err: r.err, Lag: now.Sub(r.planned), RoundTrip: now.Sub(r.sent), Renewals: r.lease.renewals}
	obs.LeaseRenewed(e)
}

// observeVotes tells the quorum's observer how its nodes voted on op.
func (q *quorum) observeVotes(op string, votes []vote, agreed int) {
	if q.obs == nil {
		return
	}
	q.obs.QuorumVoted(QuorumVotedEvent{Op: op, Need: q.need, Agreed: agreed, Nodes: q.failure(op, votes).Nodes})
}
