package padlock

import (
	"strings"
	"time"
)

// Default values used where Options leaves a field at its zero value.
const (
	DefaultTTL       = 30 * time.Second
	DefaultKeyPrefix = "padlock:"
)

// Options say how one lock is taken and held. The zero value is the
// recommended default: a 30s lease renewed while held, one attempt, no wait.
// Fields left at zero take the Locker's defaults (see WithDefaults) first.
type Options struct {
	// TTL is the lease in Redis: how long the lock outlives a holder that
	// crashed. At least 1ms. Default: 30s.
	TTL time.Duration

	// Wait is how long Acquire waits for a held key before it gives up with
	// ErrNotAcquired. It is spent on a busy key only: when Redis cannot be
	// reached, Acquire returns ErrUnavailable after two failed attempts in
	// a row or a second of failures, whichever comes first. Default: 0, a
	// single attempt.
	Wait time.Duration

	// Retry paces attempts while waiting, and can end the wait early: it is
	// asked after every failed attempt, and a negative backoff gives up at
	// once (NoRetry, LimitAttempts). While release notices arrive they
	// pace the attempts; without them (pub/sub unreachable or refused) the
	// backoff is the time to the next attempt. Default: jittered
	// exponential backoff from 2ms to 256ms. The wait never sleeps past the
	// moment the holder's lease ends, the wait budget or the context.
	Retry RetryStrategy

	// NoRenew turns off the watchdog for this lock: the lease is fixed at
	// TTL from acquisition, as for "at most once per TTL" jobs. Default:
	// false, the lease is renewed every TTL/3 while the lock is held.
	NoRenew bool

	// Fair hands the lock to waiters in the order they arrived, across
	// processes: a waiter joins a queue in Redis, a release wakes only the
	// oldest live waiter, and newcomers do not jump the queue. When that
	// waiter is in the releasing Locker, the release hands the lock
	// straight to it. A waiter that gives up leaves the queue; one that
	// dies is dropped when its wait runs out. Every user of a key should
	// agree on Fair. Default: false,
	// where waiters of one Locker are served in arrival order (a release
	// hands the lock straight to the next of them), and Lockers that want
	// the same key take turns, each serving the waiters it had queued; a
	// newcomer that does not wait (Wait 0) may take a free key before
	// anyone.
	Fair bool

	// Owner says who holds the lock, for whoever lists the locks in Redis
	// (Locker.Inspect) or finds the key busy (NotAcquiredError.Holder):
	// a host, a process id, a request id, e.g. "host=web-3 pid=4121
	// req=9f2c". It is stored with the lock itself, as part of its owner
	// token (Lock.Token), so it costs no round trip and ends with the
	// lock; it travels with every command for the lock, so it is kept
	// short: at most MaxOwnerLen bytes of OwnerChars (no request data
	// that others must not see: it is shown to whoever may list the
	// locks). Default: the Locker's (WithDefaults), or none.
	Owner string

	// Caller says who in the process takes the lock, where Owner says
	// which process: the request, function or job, e.g. "route=POST
	// /orders/<id>/pay caller=#3fa9c1e2d4b5". The lock carries Owner, a
	// space and Caller, and whoever reads Owner (Inspect, Held,
	// NotAcquiredError.Holder) reads both; the faces set it (httplock,
	// middleware, idempotency, decorator, schedule), each in a bounded form
	// with no raw request data. The same rules as Owner's: at most
	// MaxOwnerLen bytes of OwnerChars, shown to whoever may list the
	// locks. Default: the Locker's (WithDefaults), or none.
	Caller string
}

// MaxOwnerLen bounds Options.Owner, and Options.Caller: a lock names its
// holder in at most 2*MaxOwnerLen+1 bytes.
const MaxOwnerLen = 64

// OwnerChars are the bytes Options.Owner and Options.Caller may hold
// besides ASCII letters and digits: a space and ._:/=@+,-#$%<> (enough for
// a route template as lockkey.EscapeRoute writes it, and a hash as a
// lockkey.Redactor shows it, "#3fa9c1e2d4b5").
const OwnerChars = " ._:/=@+,-#$%<>"

// ownerOK reports whether s may be an Options.Owner or Options.Caller.
func ownerOK(s string) bool {
	if len(s) > MaxOwnerLen {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		case strings.IndexByte(OwnerChars, c) >= 0:
		default:
			return false
		}
	}
	return true
}

// Validate reports the first invalid field: an error matching ErrInvalid
// that names it, or nil. The zero value is valid.
func (o Options) Validate() error {
	switch {
	case o.TTL < 0:
		return invalid("Options.TTL", "must not be negative, got %v", o.TTL)
	case o.TTL > 0 && o.TTL < time.Millisecond:
		return invalid("Options.TTL", "must be at least 1ms, got %v", o.TTL)
	case o.Wait < 0:
		return invalid("Options.Wait", "must not be negative, got %v", o.Wait)
	case !ownerOK(o.Owner):
		return invalid("Options.Owner", "must be at most %d bytes of ASCII letters, digits and %q, got %q", MaxOwnerLen, OwnerChars, o.Owner)
	case !ownerOK(o.Caller):
		return invalid("Options.Caller", "must be at most %d bytes of ASCII letters, digits and %q, got %q", MaxOwnerLen, OwnerChars, o.Caller)
	}
	return nil
}

// withDefaults fills zero fields from d, then from the package defaults.
func (o Options) withDefaults(d Options) Options {
	if o.TTL == 0 {
		o.TTL = d.TTL
	}
	if o.TTL == 0 {
		o.TTL = DefaultTTL
	}
	if o.Wait == 0 {
		o.Wait = d.Wait
	}
	if o.Retry == nil {
		o.Retry = d.Retry
	}
	if o.Retry == nil {
		o.Retry = defaultRetry
	}
	if o.Owner == "" {
		o.Owner = d.Owner
	}
	if o.Caller == "" {
		o.Caller = d.Caller
	}
	// From here on Owner is what the lock carries: the process, then who
	// in it.
	switch {
	case o.Caller == "":
	case o.Owner == "":
		o.Owner, o.Caller = o.Caller, ""
	default:
		o.Owner, o.Caller = o.Owner+" "+o.Caller, ""
	}
	o.NoRenew = o.NoRenew || d.NoRenew
	o.Fair = o.Fair || d.Fair
	return o
}
