package padlock

import (
	"context"
)

// Holds: what a semaphore permit and a read-write lock's read and write
// holds share with the mutex, and where they differ.
//
// Each is a *Lock with a lease of its own, kept by the one watchdog:
// renewals of every kind go out in the same pipelined batch, one round
// trip per node. What differs is where the lease lives in Redis, and so
// which script resets it, reads it and gives it back:
//
//   - a mutex, and a read-write lock's writer: a string key holding the
//     owner token, whose expiry is the lease (extend.lua, pttl.lua);
//   - a semaphore permit, and a read-write lock's reader: a member of a
//     sorted set of holders, scored by the end of its lease on the server
//     clock (lua/hold_extend.lua, lua/hold_pttl.lua). Members whose lease
//     ended are dropped by whichever script next touches the set, which
//     expires with its last live member.
//
// A hold is never handed on inside its Locker (wait_handoff.go is the mutex's)
// and cannot be detached.
type holdKind uint8

const (
	holdMutex holdKind = iota
	holdPermit
	holdRead
	holdWrite
)

// extender returns the script that resets id's lease (KEYS[1] id's key;
// ARGV token, lease in ms; returns 1 or 0).
func (id *lockID) extender() *script {
	if id.kind == holdPermit || id.kind == holdRead {
		return holdExtendScript
	}
	return extendScript
}

// pttler returns the script that reads id's remaining lease (KEYS[1] id's
// key; ARGV token; returns ms or -3).
func (id *lockID) pttler() *script {
	if id.kind == holdPermit || id.kind == holdRead {
		return holdPTTLScript
	}
	return pttlScript
}

// newHoldID returns the identity of a hold of kind on keys (its own key,
// the slot's fence counter, its queue), whose release sends rel0 and
// rel1 after the token. Its token names o.Owner, as a mutex's does.
func newHoldID(kind holdKind, keys [3]string, o Options, rel0, rel1 any) *lockID {
	token := newToken()
	if o.Owner != "" {
		token += ownerSep + o.Owner // see Options.Owner
	}
	id := newLockIDKeys(keys, token, o)
	id.kind, id.rel = kind, &holdRel{args: [2]any{rel0, rel1}, leaseKeys: [2]string{keys[0], keys[0] + ":n"}}
	return id
}

// newLockIDKeys is newLockID for keys made already.
func newLockIDKeys(keys [3]string, token string, o Options) *lockID {
	id := &lockID{keys: keys, token: token, fair: o.Fair}
	id.argv[0], id.argv[1] = token, defaultLeaseArg
	if o.TTL != DefaultTTL {
		id.argv[1] = o.TTL.Milliseconds()
	}
	return id
}

// holdStore is the part of a store that semaphores and read-write locks
// need besides the store's own methods (which serve holds as they serve
// mutexes): a script that takes a hold, run on the deployment. Only a
// store on one deployment has it; a Redlock quorum does not.
type holdStore interface {
	// evalHold runs the script that which picks from the deployment's
	// flavour of holdScripts, as one attempt.
	evalHold(ctx context.Context, which func(*holdScripts) *script, keys []string, args ...any) (any, error)
}

// holds returns the flavour of hold scripts that matches s.scripts.
func (s single) holds() *holdScripts {
	if s.scripts == shardedScripts {
		return shardedHoldScripts
	}
	return plainHoldScripts
}

func (s single) evalHold(ctx context.Context, which func(*holdScripts) *script, keys []string, args ...any) (any, error) {
	return which(s.holds()).run(ctx, s.client, s.retries, keys, args...).Result()
}

// evalHold runs the script and a WAIT behind it: a hold no replica
// confirmed is given back (the caller's clean-up releases it) and the
// attempt fails, as acquire does for a mutex.
func (a acked) evalHold(ctx context.Context, which func(*holdScripts) *script, keys []string, args ...any) (any, error) {
	c, err := a.master(ctx, keys[0])
	if err != nil {
		return nil, err
	}
	cmd, wait := a.evalAcked(ctx, c, which(a.holds()), keys, args...)
	reply, err := cmd.Result()
	if n, ok := reply.(int64); err == nil && ok && n > 0 {
		if err := a.confirmed(wait); err != nil {
			return nil, err
		}
	}
	return reply, err
}

// releaseHold gives back the hold id names.
func (s single) releaseHold(ctx context.Context, id *lockID) (bool, error) {
	args := make([]any, 0, 1+len(id.rel.args))
	args = append(args, id.token)
	args = append(args, id.rel.args[:]...)
	sc := s.holds().rwRelease
	if id.kind == holdPermit {
		sc = s.holds().semRelease
	}
	cmd, again := sc.runCounted(ctx, s.client, s.retries, id.keys[:], args...)
	n, err := cmd.Int64()
	if err == nil && n != 1 && again {
		return false, errReleaseUnsure // as for a mutex (single.release)
	}
	return n == 1, err
}

// leaveHold takes a waiter that stops waiting, queued as place, out of
// its hold's queue.
func (s single) leaveHold(ctx context.Context, id *lockID, place string) error {
	if id.kind == holdPermit { // rel: N, fair
		return s.holds().semRelease.run(ctx, s.client, s.retries, id.keys[:], place, id.rel.args[0], id.rel.args[1], "1").Err()
	}
	// rel: kind, channel
	return s.holds().rwRelease.run(ctx, s.client, s.retries, id.keys[:], place, "q", id.rel.args[1]).Err()
}

// holdGrant reads the reply of a script that takes a hold: the fence
// (> 0), or -1 - the wait the holders' leases suggest, in ms, alone or
// with the value of the holder that frees first, when it named itself.
func holdGrant(reply any, err error) (grant, error) {
	g, err := grantOf(reply, err)
	if err == nil && g.first > 0 {
		g.last = g.first // holds reserve no fences to hand on
	}
	return g, err
}
