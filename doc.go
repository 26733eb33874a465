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
// Beside the lock, the same Locker keeps two more primitives with the same
// promises (token-checked Lua, leases renewed by the one watchdog, the
// lost signal, fences, notices instead of polling, one hash slot per key,
// nothing left behind in Redis): a Semaphore, which admits N holders of a
// key at once (Locker.Semaphore), and a read-write lock, many readers or
// one writer, whose waiting writers keep new readers out
// (Locker.AcquireRead, Locker.AcquireWrite). Their holds are Locks too.
package padlock
