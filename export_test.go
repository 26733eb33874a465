package padlock

import (
	"testing"
	"time"
)

// What the external tests (package padlock_test) may use of the
// package's insides: the shared helpers of helpers_internal_test.go, and a
// few views of internal state that black-box tests check.

var (
	StartLocker  = startLocker
	MustNew      = mustNew
	TestKey      = testKey
	CtxFor       = ctxFor
	MustAcquire  = mustAcquire
	StartCluster = startCluster
	StartRedlock = startRedlock
	RedlockOn    = redlockOn
	AwaitVotes   = awaitVotes
	ClusterKeys  = clusterKeys
	LeaseRanOut  = leaseRanOut
	// StoredToken is the grant token a lock key's value names.
	StoredToken = tokenOf
)

// The Redlock tests' timings (helpers_internal_test.go).
const (
	RLMaxLease    = rlMaxLease
	RLNodesVote   = rlNodesVote
	RLNodeTimeout = rlNodeTimeout
)

// NewUnchecked is New without its check that the client has
// ContextTimeoutEnabled: for the explorer's runs that watch go-redis wait
// out its ReadTimeout instead.
var NewUnchecked = newOn

// GuardedContexts returns how many contexts from Lock.Context the lock
// still keeps to cancel when it ends.
func GuardedContexts(lk *Lock) int {
	lk.mu.Lock()
	defer lk.mu.Unlock()
	return len(lk.guarded)
}

// SetNoticeRecheck sets how long a waiter of l that hears release notices
// sleeps before it tries Redis anyway (default noticeRecheck).
func SetNoticeRecheck(l *Locker, d time.Duration) { l.recheck = d }

// WaitForWaiters waits until n Acquires of l wait for key.
func WaitForWaiters(t *testing.T, l *Locker, key string, n int) { waitForWaiters(t, l, key, n) }

// WaitParked waits until n Acquires of l are asleep in key's line, where
// a Release of l may hand them the lock.
func WaitParked(t *testing.T, l *Locker, key string, n int) { waitParked(t, l, key, n) }

// LockRun identifies the lock in Redis that lk holds: the same for every
// holder a hand-off within a Locker passed it to (each under a token of
// its own), different for every lock taken from Redis.
func LockRun(lk *Lock) any { return lk.root().lease }

// SetConfirming makes l call f as a release begins the round trip that
// confirms a hand-off (the explorer lets its virtual clock move there).
func SetConfirming(l *Locker, f func()) { l.confirming = f }

// SetWatchdogLate makes l's watchdog wake f() late each time it wakes, as
// a starved runtime's would.
func SetWatchdogLate(l *Locker, f func() time.Duration) { l.watchdog.late = f }

// SetExtending makes l call f in Extend, between its check that the lock
// is held and the lease change it begins (the explorer stalls there).
func SetExtending(l *Locker, f func()) { l.extending = f }

// SetProclaiming makes Term.Proclaim on l's elections run f between its
// check that the term leads and the record it writes.
func SetProclaiming(l *Locker, f func()) { l.proclaiming = f }

// SetNoticeFault makes l's notifier deliver each notice as f says: how
// many copies (0: lost) and how late. Set it before l's first Acquire.
func SetNoticeFault(l *Locker, f func(channel, payload string) (copies int, late time.Duration)) {
	l.notifier.fault = f
}

// The SHA1s of the hand-off and Resume scripts, for tests that fault
// their commands.
var (
	ResumeSHA = resumeScript.Hash()
)

// TrustedUntil returns the end of lk's trusted lease as the watchdog last
// set it, even once the lock is lost (ValidUntil then says zero): the
// explorer on the wall clock asks whether a lock was returned after it.
func TrustedUntil(lk *Lock) time.Time {
	r := lk.root()
	w := r.locker.watchdog
	w.mu.Lock()
	defer w.mu.Unlock()
	return r.lease.validUntil
}

// SetTrustedUntil returns the earliest TrustedUntil of m's keys.
func SetTrustedUntil(m *MultiLock) time.Time {
	var v time.Time
	for _, lk := range m.members {
		if u := TrustedUntil(lk); v.IsZero() || u.Before(v) {
			v = u
		}
	}
	return v
}

// MaxRenewBatch is the most renewals the watchdog sends in one pipeline.
const MaxRenewBatch = maxRenewBatch

// GrantScript names a script that may make a grant, and where, among its
// ARGV (from 1), the new grant's token is.
type GrantScript struct {
	Name  string
	Token int
	// Place, when not 0, is where among its ARGV a fair waiter's place
	// is; its queue is then its third key.
	Place int
}

// GrantScripts maps the SHA1 and the source of every script that may
// make a grant (an attempt, a hand-off's rename, a Resume) to where its
// new grant's token is: the explorer's token-fresh invariant reads each
// command by it.
func GrantScripts() map[string]GrantScript {
	m := map[string]GrantScript{}
	add := func(s *script, name string, token, place int) {
		m[s.sha] = GrantScript{name, token, place}
		m[s.src] = GrantScript{name, token, place}
	}
	for _, ps := range []*publishingScripts{plainScripts, shardedScripts} {
		add(ps.acquire, "acquire", 1, 0)
		add(ps.handoverFair, "handover_fair", 2, 0)
	}
	for _, ms := range []*multiScripts{multiPlain, multiSharded} {
		add(ms.acquire, "multi_acquire", 1, 0)
	}
	for _, hs := range []*holdScripts{plainHoldScripts, shardedHoldScripts} {
		add(hs.semAcquire, "sem_acquire", 1, 6)
		add(hs.rwRead, "rw_read", 1, 0)
		add(hs.rwWrite, "rw_write", 1, 4)
	}
	add(acquireFairScript, "acquire_fair", 1, 4)
	add(redlockAcquireScript, "redlock_acquire", 1, 0)
	add(handoverScript, "handover", 2, 0)
	add(resumeScript, "resume", 3, 0)
	return m
}

// CleanupScripts holds, by SHA1 and by source, the name of each script
// that gives back a mutex grant or a set's (release, release_fair,
// multi_release): the clean-up of an attempt whose reply was lost is one
// of them, with the attempt's token as its ARGV[1].
func CleanupScripts() map[string]string {
	m := map[string]string{}
	add := func(s *script, name string) { m[s.sha], m[s.src] = name, name }
	for _, ps := range []*publishingScripts{plainScripts, shardedScripts} {
		add(ps.release, "release")
		add(ps.releaseFair, "release_fair")
	}
	for _, ms := range []*multiScripts{multiPlain, multiSharded} {
		add(ms.release, "multi_release")
	}
	return m
}

// ElectScripts holds the SHA1 and the source of the script that writes
// an election's leader record (Campaign's, Proclaim's): the explorer
// reads its replies, 1 when the record was written and 0 when the term no
// longer held the lock.
func ElectScripts() map[string]bool {
	m := map[string]bool{}
	for _, s := range []*script{electPlain, electSharded} {
		m[s.sha], m[s.src] = true, true
	}
	return m
}

// ClosedConn reports whether err says the command's connection closed
// (or could not be made), after which padlock sends it again.
var ClosedConn = closedConn

// ClaimWindow is how long a grant at release holds the key unless its
// waiter claims it (wait_claim.go).
const ClaimWindow = claimWindow

// BidLife is the age at which a bid is no longer granted (wait_claim.go).
const BidLife = bidLife

// CleanupTimeout bounds a clean-up, with the sends again of one that got
// no answer (config_locker.go).
const CleanupTimeout = cleanupTimeout
