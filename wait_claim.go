package padlock

import "time"

// A grant at release is an offer, not a lock (lua/claim.lua has the
// server's half). The release that grants a key to a waiter's bid sets it
// to the bid's token for claimWindow at most, and its notice only wakes
// the waiter, whose next attempt names the token and claims the grant in
// Redis with a grant of its own: its token, its lease, trusted from when
// that attempt was sent, and a fence from the counter. The attempt's reply
// is the evidence that the waiter holds the lock; a notice is never
// evidence of anything, so nothing a client that may read the keys and
// publish could send makes a holder or a fence.
//
// What a waiter that is not there costs the others is so bounded:
//   - a grant that nobody claims (its waiter died, gave up, was closed, or
//     forgot the token: a late copy of its attempt) ends within
//     claimWindow, and the waiters of other Lockers, told of the grant by
//     its notice, look again when it ends;
//   - a bid placed bidLife ago or more is not granted, and a fair queue
//     entry whose bid is that old leaves the queue: a waiter that bids
//     places its bid again every bidRefresh while it waits, so only one
//     that is gone has one so old;
//   - a waiter that gives up withdraws its bids, and so does the last
//     waiter to leave a Locker's line for the bids passed to the line.
//
// A dead holder still costs its lease, as with every lease-based lock.
const (
	claimWindow = 500 * time.Millisecond
	bidLife     = 2 * time.Second
	bidRefresh  = bidLife / 2
)
