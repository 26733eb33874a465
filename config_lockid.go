package padlock

import (
	"errors"
	"time"
)

// lockID names one lock in Redis: its keys, owner token and the lease an
// Acquire asks for. It is shared by every holder the lock is handed to, so
// it holds nothing that changes from one attempt to the next (see
// attempt).
type lockID struct {
	keys  [3]string // the lock key, its slot's fence counter, its fair queue
	token string
	ttl   time.Duration // the lease an Acquire (or Resume) asks for, in whole ms as Redis keeps it
	// fair and kind share one word, and a hold's rel sits behind a
	// pointer: every lock cycle allocates a lockID, and a mutex has no rel
	// to pay for (see TestLockSizeClass).
	fair bool     // Options.Fair: acquire through the queue, release to it
	kind holdKind // a mutex (the zero value), or a hold (store_hold.go)
	// claimed: a command that may create a grant (an attempt, a
	// hand-off's rename, a Resume) was sent under this identity; a second
	// one is refused (claim).
	claimed bool
	// argv is what the scripts of one deployment (store_single.go) send for this
	// lock; only that store reads it.
	argv scriptArgs
	rel  *holdRel // what only a hold needs; nil for a mutex
}

// holdRel is what a hold's identity needs beyond a mutex's: its release
// ARGV after the token, and the keys its lease changes name.
type holdRel struct {
	args [2]any
	// leaseKeys: a permit's or a reader's sorted set of holders, and the
	// hash of the numbers of their last lease changes (lua/hold_extend.lua).
	leaseKeys [2]string
}

// leaseKeys returns the keys the script that changes id's lease names:
// the lock key, or a permit's or a reader's two.
func (id *lockID) leaseKeys() []string {
	if id.kind == holdPermit || id.kind == holdRead {
		return id.rel.leaseKeys[:]
	}
	return id.keys[:1]
}

// Every attempt sends a token no earlier attempt sent. An attempt is one
// command that may create a grant: an Acquire's attempt (plain, waiting or
// fair), one attempt of AcquireAll at a whole set (every hash slot's call
// and their rollback), a hold's attempt (a permit, a read or a write
// hold), a hand-off's rename and a Resume. Each gets its identity from
// mintID, at its start, and nowhere else: a busy, failed or late attempt
// leaves nothing the next one reuses, so whatever an earlier attempt still
// has on its way (its command delayed, its clean-up or rollback run late)
// names a token nobody holds and changes nothing. Copies of one command,
// sent again after a closed connection or a NOSCRIPT, are that same
// attempt. The store holds the other half of the rule: it sends a
// grant-making command only under an identity it can claim, and refuses a
// second (errTokenReused), so a site that kept an identity across
// attempts fails its first test instead of giving two holders.

// mintID returns the identity of a new attempt at key: a token of its
// own, with the lease and mode o asks for.
func mintID(ks keyspace, key string, o Options) *lockID {
	return newLockID(ks, key, newToken(), o)
}

// mintOn is mintID for keys made already (a hand-off's next grant).
func mintOn(keys [3]string, o Options) *lockID { return lockIDOn(keys, newToken(), o) }

// claim marks id as sent by a command that may create a grant, and
// reports whether it was not sent so before.
func (id *lockID) claim() bool {
	if id.claimed {
		return false
	}
	id.claimed = true
	return true
}

// wasClaimed reports whether id was sent by a command that may create a
// grant.
func (id *lockID) wasClaimed() bool { return id.claimed }

// errTokenReused is the error of a grant-making command whose identity an
// earlier attempt sent: a bug in padlock, never sent to Redis.
var errTokenReused = errors.New("padlock: internal error: an attempt reused an earlier attempt's token (not sent)")

func newLockID(ks keyspace, key, token string, o Options) *lockID {
	var keys [3]string
	keys[0], keys[1], keys[2] = ks.lockKeys(key)
	return lockIDOn(keys, token, o)
}

// lockIDOn is newLockID for keys made already.
func lockIDOn(keys [3]string, token string, o Options) *lockID {
	if o.Owner != "" {
		token += ownerSep + o.Owner // see Options.Owner
	}
	ttl := o.TTL.Truncate(time.Millisecond)
	return &lockID{keys: keys, token: token, ttl: ttl, fair: o.Fair, argv: newScriptArgs(token, ttl)}
}

// attempt is what one attempt of a waiting Acquire sends besides the
// lock's identity. It belongs to that Acquire (acquisition.at), so that
// filling it in for each attempt costs no allocation and touches nothing
// a holder of the lock shares.
type attempt struct {
	// argv is acquire.lua's ARGV (see setArgs in store_single.go).
	argv [5]any
	// queueFor is how long a fair waiter asks to stay queued; set until
	// Redis has confirmed it queued the waiter, 0 otherwise.
	queueFor time.Duration
	// place is the name a fair waiter queues under and release notices
	// name it by: one per Acquire, set before its first attempt and never
	// changed, apart from the token of each attempt's grant (a place kept
	// across attempts never makes a grant token reused).
	place string
	// bids: the attempt leaves a bid if it finds the key held, and takes
	// over a grant to one of prev, the tokens of the waiter's earlier
	// attempts that may have left one (wait_bid.go).
	bids bool
	prev []string
}

// placeOf returns the place a fair attempt queues under: a single
// attempt, which never queues, names its token.
func (at *attempt) placeOf(id *lockID) string {
	if at == nil || at.place == "" {
		return id.token
	}
	return at.place
}

// queueTime returns how long a fair attempt asks to stay queued, in ms.
func (at *attempt) queueTime() int64 {
	if at == nil {
		return 0
	}
	return at.queueFor.Milliseconds()
}

// lockKey returns the key of the lock itself.
func (id *lockID) lockKey() string { return id.keys[0] }

// bidsKey returns the key of the bids for id's lock key (lua/bids.lua):
// it shares the lock key's slot, and is no lock key (those end with '}').
func (id *lockID) bidsKey() string { return id.keys[0] + ":bids" }

// bidKeys returns the keys of a script that may grant at release: the
// lock key, its slot's fence counter and its bids.
func (id *lockID) bidKeys() []string { return []string{id.keys[0], id.keys[1], id.bidsKey()} }

// lostKey returns the key of the lost set of id's lock key, where the
// clean-up of an attempt whose reply was lost buries its token
// (lua/claim.lua): in the lock key's slot, and no lock key.
func (id *lockID) lostKey() string { return id.keys[0] + ":lost" }

// bidLostKeys returns bidKeys and the lost set: the keys of an attempt
// that bids, and of the clean-up that buries a lost one.
func (id *lockID) bidLostKeys() []string {
	return []string{id.keys[0], id.keys[1], id.bidsKey(), id.lostKey()}
}

// fairBidKeys returns the keys of a fair attempt that takes part in
// grants at release, and of the release that cleans up after a lost one:
// the lock key, its slot's counter, its queue and its lost set.
func (id *lockID) fairBidKeys() []string {
	return []string{id.keys[0], id.keys[1], id.keys[2], id.lostKey()}
}
