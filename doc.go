// Package padlock provides Redis-backed distributed locks for Go services.
//
// # Start here
//
// Build one [Locker] per Redis deployment with [New] (a node, a Sentinel
// failover client or a Cluster client, with ContextTimeoutEnabled, so that
// go-redis keeps a context's deadline on the socket too); it is safe for
// concurrent use.
// Then four calls do most of the work: [Locker.Acquire] takes a lock on a
// key, waiting up to Options.Wait while another owner holds it;
// [Lock.Release] lets it go; [Lock.Context] returns a context that is
// cancelled if the lock is lost; [Lock.Fence] returns a number that grows
// with every holder, for the store you write to, so that it can turn away
// a holder that lost the lock.
//
//	rdb := redis.NewClient(&redis.Options{Addr: "localhost:6379", ContextTimeoutEnabled: true})
//	locker, err := padlock.New(rdb) // one per deployment; Close it at shutdown
//	if err != nil {
//		return err // ErrInvalid: a client that would not keep deadlines
//	}
//
//	lk, err := locker.Acquire(ctx, "order:42", padlock.Options{Wait: 2 * time.Second})
//	if err != nil {
//		return err // ErrNotAcquired: busy (RetryAfter says how long); ErrUnavailable: Redis down
//	}
//	defer lk.Release(context.WithoutCancel(ctx))
//
//	ctx = lk.Context(ctx) // cancelled if the lock is lost
//	return store.Pay(ctx, orderID, lk.Fence())
//
// The zero [Options] is the recommended default: a 30s lease renewed while
// the lock is held, and one attempt. A busy key is [ErrNotAcquired]; an
// unreachable Redis is [ErrUnavailable], never a lock granted without it;
// a lock lost while held closes [Lock.Done] and matches [ErrLockLost].
//
// Then, by task:
//
//   - several keys at once, all or none: [Locker.AcquireAll];
//   - one leader among candidates, with a fence per term: [Locker.Election];
//   - N holders of a key: [Locker.Semaphore]; many readers or one writer:
//     [Locker.AcquireRead] and [Locker.AcquireWrite];
//   - a job once per interval across a fleet: package schedule;
//   - HTTP handlers and functions: packages middleware (Gin), httplock
//     (net/http) and decorator;
//   - tests of code that takes locks: package padlocktest;
//   - what happens to the locks: [WithObserver] (packages padlockotel,
//     padlockslog and lockview are observers), [Locker.Held],
//     [Locker.Waiting] and [Locker.Inspect];
//   - locks on a majority of independent masters: [NewRedlock].
//
// The README and the [guides] cover each in depth.
//
// The index lists every name in alphabetical order. The [Observer] and
// what it is told ([NopObserver], [JoinObservers], the types whose names
// end in Event, [AcquireOutcome], [LostCause]) are for whoever writes an
// observer, or reads the events one receives; code that takes locks can
// pass them by.
//
// # Guarantees
//
//   - Mutual exclusion: taking a lock is one atomic Lua step that stores a
//     crypto-random owner token; Release, Extend and TTL compare the token
//     inside Lua, so nobody releases or extends a lock they do not hold.
//   - No deadlock: every lock has a lease (Options.TTL, default 30s),
//     renewed while it is held; a crashed holder's lock frees itself when
//     the lease runs out.
//   - Fencing: Lock.Fence is strictly greater than the fence of every lock
//     on the same key whose Acquire returned before this lock's Acquire was
//     called, across lease expiry, restarts without persistence and
//     failovers. Not on a Redlock Locker, where Fence returns 0.
//   - Lock lost is loud: Done closes, and contexts from Lock.Context are
//     cancelled, no later than the earliest moment the lease can end in
//     Redis, as far as the client can know it. A lock Redis itself loses
//     before its lease ends (a restart without persistence, a failover to
//     a replica that had not received it, an eviction) is heard at the
//     next renewal or Extend, at most TTL/3 later, and fences order the two
//     owners meanwhile.
//   - Keys: every Redis key padlock writes starts with the Locker's prefix
//     (default "padlock:") and carries a Cluster hash tag made from the
//     whole user key, so a lock and its companions always share one slot.
//
// Waiting does not poll while release notices arrive: within a Locker a
// release hands the lock to the next waiter in arrival order, Lockers that
// want a key take turns, and Options.Fair queues waiters in Redis across
// processes. The guide [Locks in depth] tells how each guarantee is kept,
// and RELIABILITY.md what the chaos suite measured.
//
// # Redlock
//
// A Redlock Locker (NewRedlock) holds each lock on a majority of
// independent masters, asked in parallel, each within the node timeout
// (WithNodeTimeout, default 100ms); Extend and renewal need a majority
// too, and Release deletes the lock on every node that answers. A failure
// wraps a [*QuorumError] saying what each node did.
//
// Delayed restart: a node that restarts without persistence forgets the
// locks it granted, so its grants count only once it has been up for the
// max lease (WithMaxLease), by when every lease it may have forgotten has
// run out; nodes that persist every write before answering vote at once
// (WithPersistentNodes).
//
// Fences: Lock.Fence returns 0, since counters on independent nodes do not
// add up to one sequence that only grows.
//
// The [Redlock guide] gives each rule in full: how locks are taken, kept
// and let go, how a restart is told, and what each failure reports.
//
// # Constructors
//
// New and NewRedlock follow one rule: what the program's code gets wrong
// in the arguments panics; a client whose settings cannot keep padlock's
// promises is returned as an error. Both are found at construction, never
// on a request, and both carry ErrInvalid with the name of the field.
//
//   - The code's mistakes panic: a nil client, an option value out of its
//     range or at odds with another option, an option that does not fit
//     the client (a WithReplicaAck timeout at or beyond the client's
//     ReadTimeout), a client of the wrong kind (a Cluster or Ring client
//     as a Redlock node), or one client passed twice. They are the same on
//     every start and only a change of code fixes them, so the program
//     stops at once, with the field named, as regexp.MustCompile does for
//     a bad constant, rather than starting to serve without locks.
//   - What the clients' settings break is returned: a client without
//     ContextTimeoutEnabled (go-redis then keeps a context's deadline off
//     the socket, and a request waits for a Redis that hangs as long as
//     the client's ReadTimeout, whatever Options.Wait says; NewRedlock
//     takes read and write timeouts within its node timeout instead), and
//     NewRedlock's list of nodes, empty or with two clients that reach
//     one address. Settings and nodes come from
//     configuration (a Redis URL, a list of addresses) as often as from
//     code, and a service may want to report that its own way.
//
// [guides]: https://github.com/padlockgo/padlock/tree/main/docs
// [Locks in depth]: https://github.com/padlockgo/padlock/blob/main/docs/locks.md
// [Redlock guide]: https://github.com/padlockgo/padlock/blob/main/docs/redlock.md
package padlock
