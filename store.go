package padlock

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"
)

// store is where a Locker's locks live: one Redis deployment (a node, a
// Sentinel-managed master or a Cluster), or a quorum of independent nodes.
// Each method is one attempt; waiting, renewal and signalling are the
// Locker's.
type store interface {
	// acquire takes the lock for id.token with a lease of id's TTL. at
	// is what an attempt of a waiting Acquire sends besides; nil for a
	// single attempt.
	acquire(ctx context.Context, id *lockID, at *attempt) (grant, error)
	// release deletes the lock if id.token holds it, as g says (see
	// wait_handoff.go); ok reports whether it did.
	release(ctx context.Context, id *lockID, g giveBack) (ok bool, err error)
	// extend resets the lease to ttl if id.token holds the lock, as lease
	// change number seq: Redis refuses it, changing nothing, if a change
	// with a higher number ran already (lua/grant.lua). ok reports whether
	// the token holds the lock.
	extend(ctx context.Context, id *lockID, ttl time.Duration, seq uint64) (ok bool, err error)
	// handover moves the lock id.token holds to next.token, resetting
	// its lease to ttl as lease change number seq (see wait_handoff.go); ok
	// reports whether id.token held it.
	handover(ctx context.Context, id, next *lockID, ttl time.Duration, seq uint64) (ok bool, err error)
	// handoverFair hands a fair lock on as handover does, to next, whose
	// waiter is queued as place, if that waiter is the oldest live one in
	// the key's queue, taking a fence for it; otherwise it releases the
	// lock as release does (lua/handover_fair.lua). It returns next's fence
	// when it handed the lock on, released when it let it go instead, and
	// neither when id.token did not hold it.
	handoverFair(ctx context.Context, id, next *lockID, place string, ttl time.Duration, seq uint64) (fence int64, released bool, err error)
	// resume hands the lock that token holds over to id.token, resetting
	// its lease to id's TTL; ok reports whether token held it.
	resume(ctx context.Context, token string, id *lockID) (ok bool, err error)
	// pttl returns the remaining lease if id.token holds the lock.
	pttl(ctx context.Context, id *lockID) (d time.Duration, ok bool, err error)
	// leaveQueue takes a waiter that stops waiting out of the queue of
	// id's key, where it is queued as place.
	leaveQueue(ctx context.Context, id *lockID, place string) error
	// renew extends every lock in batch to its ttl if its token still holds
	// it, in one pipelined round trip per Redis node, and fills in each
	// renewal's ok and err. Each node is waited for on its own, no longer
	// than the earliest deadline of the renewals it serves, so a slow node
	// holds up only its own locks. As soon as the results of one node's
	// renewals are in, renew calls settled with their indexes in batch,
	// possibly from several goroutines at once; every index is settled
	// exactly once, before renew returns.
	renew(ctx context.Context, batch []renewal, settled func(idx []int))
}

// grant is what an acquire attempt got: the lock with the fences reserved
// for it (first is Lock.Fence; the Locker may hand the lock on with the
// fences up to last, see wait_handoff.go), or, when first is 0, the holder's
// remaining lease (0 when unknown) and its Options.Owner, if it set one.
type grant struct {
	first, last int64
	holderTTL   time.Duration
	holder      string
	// unqueued: a fair attempt that left a bid found its waiter's place
	// out of the queue (lua/acquire_fair.lua).
	unqueued bool
}

// ownerSep ends the random part of a token that carries Options.Owner.
const ownerSep = "~"

// ownerOf returns the Options.Owner a lock's stored value (or a token)
// carries, if any: what follows the token's random part.
func ownerOf(value string) string {
	_, owner, ok := strings.Cut(tokenOf(value), ownerSep)
	if !ok {
		return ""
	}
	return owner
}

// tokenOf returns the grant token a lock's stored value names: the value
// without its lease-change number and the '*' a waiter may have appended
// (lua/grant.lua). A token alone is returned as it is.
func tokenOf(value string) string {
	token, _, _ := strings.Cut(value, "|")
	return strings.TrimSuffix(token, "*")
}

// grantOf reads an acquire script's reply: {first, last} reserved fence,
// a single fence (> 0), or -1 - the holder's remaining lease in ms, alone
// or as {-1 - lease, the holder's owner}.
func grantOf(reply any, err error) (grant, error) {
	if err != nil {
		return grant{}, err
	}
	switch r := reply.(type) {
	case []any:
		if len(r) == 2 {
			first, ok1 := r[0].(int64)
			last, ok2 := r[1].(int64)
			if ok1 && ok2 && first > 0 && last >= first {
				return grant{first: first, last: last}, nil
			}
			if owner, ok := r[1].(string); ok1 && ok && first < 0 {
				return grant{holderTTL: time.Duration(-1-first) * time.Millisecond, holder: ownerOf(owner)}, nil
			}
		}
		if len(r) == 3 {
			// Busy, and not queued: {-1 - lease, the holder's value or ”, 0}.
			busy, ok1 := r[0].(int64)
			owner, ok2 := r[1].(string)
			if ok1 && ok2 && busy < 0 {
				g := grant{holderTTL: time.Duration(-1-busy) * time.Millisecond, unqueued: true}
				if owner != "" {
					g.holder = ownerOf(owner)
				}
				return g, nil
			}
		}
	case int64:
		if r > 0 {
			return grant{first: r, last: r}, nil
		}
		return grant{holderTTL: time.Duration(-1-r) * time.Millisecond}, nil
	}
	return grant{}, fmt.Errorf("padlock: unexpected acquire reply %v", reply)
}

// renewal is one lock's part of a watchdog batch.
type renewal struct {
	id  *lockID
	ttl time.Duration
	// deadline is the end of the lock's trusted lease: an answer after it
	// comes too late to keep the lock. Zero: none.
	deadline time.Time
	ok       bool  // the token still held the lock and its lease was reset
	err      error // the lock's fate is unknown: Redis was not reached

	lease *lease // the watchdog's: the lease renewed, and the change's number
	seq   uint64

	planned, sent time.Time // when it was due, and sent: for observers
}

// renewEach settles the renewals at failed (their node is unknown) at
// once, then renews each node's group (groups: the indexes of a batch's
// renewals by the node that serves them) in parallel, settling each group
// as soon as its node answered: a slow node must not hold up the renewals
// that other nodes answer.
func renewEach[N comparable](groups map[N][]int, failed []int, settled func(idx []int), renew func(node N, idx []int)) {
	if len(failed) > 0 {
		settled(failed)
	}
	var wg sync.WaitGroup
	for node, idx := range groups {
		wg.Go(func() {
			renew(node, idx)
			settled(idx)
		})
	}
	wg.Wait()
}
