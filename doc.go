// Package padlock provides Redis-backed distributed locks for Go services.
//
// A Locker is built once per Redis deployment with New (one node, a Sentinel
// failover client or a Cluster client) and is safe for concurrent use.
// Acquire takes a lock on a key, waiting up to Options.Wait while another
// owner holds it:
//
//	lk, err := locker.Acquire(ctx, "order:42", padlock.Options{Wait: 2 * time.Second})
//	if errors.Is(err, padlock.ErrNotAcquired) {
//		// busy: padlock.RetryAfter(err) says how long the holder still has
//	}
//	defer lk.Release(context.Background())
//
// Guarantees, and how they are kept:
//
//   - Mutual exclusion: taking a lock is one atomic Lua step (SET NX PX) that
//     stores a crypto-random owner token; Release, Extend and TTL compare the
//     token inside Lua, so nobody releases or extends a lock they do not hold.
//     (A lock handed on within its Locker keeps its token; the Locker ends
//     the releasing handle before the next holder starts.)
//   - No deadlock: every lock has a lease (Options.TTL, default 30s). A crashed
//     holder's lock frees itself when the lease runs out.
//   - Fencing: Lock.Fence is strictly greater than the fence of every lock on
//     the same key whose Acquire returned before this lock's Acquire was
//     called, across lease expiry. Hand it to the store you write to and let
//     the store reject writes with an older fence. Fences come from one
//     counter per deployment (on Cluster, one per hash slot: at most 16384,
//     however many distinct keys are locked), floored at the server's clock
//     in microseconds so that they keep rising even after Redis restarts
//     without persistence or fails over to a replica that missed the last
//     increments. After a failover that holds as long as the new master's
//     clock is not behind the old one's by more than the failover took
//     (seconds, with Sentinel's defaults; NTP keeps clocks within
//     milliseconds); WithReplicaAck removes the condition, since a replica
//     that confirmed an acquisition has its counter too. A Redlock Locker
//     (NewRedlock) offers no fences: Fence returns 0 there.
//   - Lock lost is loud: Done closes, and contexts from Lock.Context are
//     cancelled, no later than the earliest moment the lease can end in
//     Redis, as far as the client can know it: every change of the lease
//     (renewal, Extend) is counted from before it was sent, and when two
//     are in flight at once, or a reply is lost, the shorter lease is
//     trusted. What the client cannot know is a lock Redis loses before its
//     lease ends (a restart without persistence, a failover to a replica
//     that had not received it, an eviction): the holder hears of it at its
//     next renewal or Extend, at most TTL/3 later, and fences order the two
//     owners meanwhile. RELIABILITY.md names these windows.
//   - Keys: every Redis key padlock writes starts with the Locker's prefix
//     (default "padlock:") and carries a Cluster hash tag made from the whole
//     user key, so a lock and its companions always share one slot.
//
// Waiting never hammers Redis. A failed attempt returns the holder's
// remaining lease, and the waiter sleeps no longer than that, the jittered
// retry backoff, and the wait budget, unless a release notice wakes it
// first. Within one Locker, waiters queue in arrival order and a release
// hands the lock straight to the first of them (the Redis lock and its
// token stay; the new holder gets the next fence from a block reserved
// when the lock was taken), after one round trip that confirms Redis still
// holds it, so a lock Redis lost is never passed on. Between Lockers, a waiter that
// finds the key busy says so on the key's channel, and the holder's Locker
// yields the key to the Lockers that asked, in turn, when it is done with
// its own queue. Options.Fair instead keeps one queue in Redis, first come
// first served across all processes.
//
// # Redlock
//
// How a Redlock Locker (NewRedlock) takes, keeps and lets go of locks:
//
//   - Acquire asks every node at once, not one after another, and waits for
//     each at most the node timeout (WithNodeTimeout, default 100ms). The
//     lock is taken when a majority granted it and the lease left after the
//     round trip, TTL − elapsed − drift (WithClockDrift, default 1% of TTL
//     plus 2ms), is still positive. Otherwise the attempt is undone on every
//     node that may hold it, those that did not answer in time included.
//     When too many nodes are held by another owner, Acquire fails with
//     ErrNotAcquired, and the holder's remaining lease it reports is the time
//     until enough of those nodes' leases end for a majority to be free.
//     When too few nodes answer, the error matches both ErrNotAcquired and
//     ErrUnavailable.
//   - Extend and the background renewal need a majority of nodes to reset
//     the lease, within that same validity. When more nodes than a majority
//     can spare say the lock is gone, it is lost at once (Done closes); when
//     too few answer, renewal is tried again until the trusted lease runs
//     out, and the lock is lost then.
//   - Release deletes the lock on every node that answers. It returns nil
//     when a majority still held it; ErrNotHeld when more nodes than a
//     majority can spare no longer did (the lock had been lost, and another
//     owner may have held it meanwhile); and an ErrUnavailable error when
//     too few nodes answered to tell. The nodes that did not answer let the
//     lock go when its lease ends.
//   - Lock.TTL reports how long a majority of nodes still holds the lock.
//
// Delayed restart. A node that restarts without persistence forgets the
// locks it held, and would grant one again at once while its owner still
// holds it on other nodes. So a node's grants do not count until it has
// been up for the max lease (WithMaxLease; default the Locker's default
// TTL, 30s unless WithDefaults sets another), by when every lease it may
// have forgotten has run out. Acquire and Extend reject a longer TTL with
// ErrInvalid. Which process a node runs, and since when, is read (INFO
// server) after a new connection to it was made, not on every Acquire: a
// restart always breaks the connections, so a node is checked again
// exactly when it may have restarted. A process the client sees replace
// one it saw before (a new run_id) votes a max lease after the client
// first saw it, on the client's monotonic clock; only a process the client
// sees first is judged by its uptime_in_seconds, which Redis derives from
// the wall clock, so a clock stepped forward between its start and the
// client's first look lets it vote early. Uptime comes in whole seconds, so
// a node votes a second or two after the max lease. Locking goes on
// meanwhile while a majority of the other nodes is up; a freshly started
// set of nodes grants its first lock only that long after starting, and
// until then Acquire fails with a QuorumError naming each waiting node and
// how long it still waits (NodeRestarting). Nodes that persist every write
// before answering need no wait: see WithPersistentNodes. Clients must be
// allowed INFO.
//
// A Redlock failure says what each node did: the error wraps a
// *QuorumError (errors.As) whose Nodes give each node's outcome (agreed,
// busy, not held, restarting, timeout, unreachable, error reply). A node
// that timed out does not make the error match context.DeadlineExceeded;
// only the caller's own context ending does.
//
// Fences. Lock.Fence returns 0 on a Redlock Locker. Each node could count
// acquisitions, but counters on independent nodes do not add up to one
// sequence that only grows (two owners that never overlapped can get their
// fences in either order), and a fence that is not monotonic protects
// nothing. Fencing needs one Redis deployment (New) or a consensus system.
//
// # Constructors
//
// New and NewRedlock follow one rule on bad arguments: what the program's
// code decides panics, and what a deployment's configuration decides is
// returned as an error. Both kinds are found at construction, never on a
// request, and both carry ErrInvalid with the name of the field.
//
//   - Programmer errors panic, in both constructors: a nil client, an
//     option value out of its range or at odds with another option, a
//     client whose settings do not fit the options or the algorithm (a
//     WithReplicaAck timeout at or beyond the client's ReadTimeout; a
//     Redlock node client without bounded socket waits; a Cluster or Ring
//     client as a Redlock node), or one client passed twice. They are the
//     same on every start and only a change of code fixes them, so the
//     program stops at once, with the field named, as regexp.MustCompile
//     does for a bad constant, rather than starting to serve without locks.
//   - Deployment errors are returned: NewRedlock's list of nodes, which
//     usually comes from configuration (a list of addresses), may be empty
//     or name one node twice, and a service may want to report that its
//     own way or fall back. New takes one client, whose address padlock
//     does not judge, so it has no such error and returns none.
//
// # Beyond one key
//
// Beside the lock on one key: AcquireAll takes a set of keys, all or none
// (MultiLock); Election elects one leader among candidates, with a fence
// per term; package schedule runs jobs once per interval across a fleet.
//
// # Observing
//
// WithObserver gives an Observer every lock's lifecycle (how
// each Acquire ended and how long it waited, releases, renewals and their
// lag, losses and their cause); packages padlockotel (OpenTelemetry),
// padlockslog (log/slog) and lockview (a live page) are ready-made ones.
// Locker.Held and Locker.Waiting tell what one Locker holds and waits for;
// Locker.Inspect lists what every process holds in Redis.
//
// # Semaphores and read-write locks
//
// Beside the lock, the same Locker keeps two more primitives with the same
// promises (token-checked Lua, leases renewed by the one watchdog, the
// lost signal, fences, notices instead of polling, one hash slot per key,
// nothing left behind in Redis): a Semaphore, which admits N holders of a
// key at once (Locker.Semaphore), and a read-write lock, many readers or
// one writer, whose waiting writers keep new readers out
// (Locker.AcquireRead, Locker.AcquireWrite). Their holds are Locks too.
package padlock
