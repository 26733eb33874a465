package padlocktest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/padlockgo/padlock"
	"github.com/padlockgo/padlock/internal/miniclock"
)

// ErrControl reports that a control of an Env could not do what it was
// asked: a key that was to be made busy was not free, a lock that was to
// be lost had been released, or Redis could not be brought back.
var ErrControl = errors.New("padlocktest: control failed")

// Client timeouts. Loopback to an in-process server answers in
// microseconds and a stopped one refuses at once, so these only bound
// surprises; no command or dial is retried, so Down shows on the first
// command.
const (
	clientIOTimeout   = time.Second
	clientPoolTimeout = 2 * time.Second
)

// Env is a padlock deployment inside the test process: an in-process Redis
// (miniredis), a go-redis client on it, and a Locker on that client, plus
// controls that put Redis and the locks on it in the states a handler must
// cope with. Its methods are safe for concurrent use. Close it (New does
// that when the test ends).
type Env struct {
	m      *miniredis.Miniredis
	client *redis.Client
	locker *padlock.Locker
	opts   []padlock.LockerOption // the Locker's, for the other Locker
	clock  *miniclock.Clock       // nil with WithManualClock

	clockOnce sync.Once
	manual    *Clock // the test's clock (Clock), made on first use

	mu     sync.Mutex
	down   bool            // Down ran and Up did not
	other  *padlock.Locker // "someone else", for Busy; made on first use
	closed bool
}

// An Option configures an Env in New or Start.
type Option func(*config)

type config struct {
	lockerOpts []padlock.LockerOption
	manual     bool
}

// WithLockerOptions passes opts to padlock.New when the Env builds its
// Locker (and the Locker that holds keys for Busy). Set a short default
// lease here, padlock.WithDefaults(padlock.Options{TTL: time.Second}), for
// tests where a lock's holder must notice Lose within a fraction of a
// second. Default: none, padlock's defaults.
func WithLockerOptions(opts ...padlock.LockerOption) Option {
	return func(c *config) { c.lockerOpts = append(c.lockerOpts, opts...) }
}

// WithManualClock stops Redis's clock: keys expire only when the test
// calls Advance, so a busy key stays busy, however slow the test machine,
// until the test says its lease is over. Only Redis's clock is the test's:
// the Locker still renews held locks, and judges them lost, on the
// process's clock. Default: Redis's clock follows real time.
func WithManualClock() Option {
	return func(c *config) { c.manual = true }
}

// New starts an Env for t and closes it when t ends (t.Cleanup). It ends
// the test (t.Fatal) when Start fails: the in-process Redis cannot start,
// or an option given with WithLockerOptions is invalid.
func New(t testing.TB, opts ...Option) *Env {
	t.Helper()
	e, err := Start(opts...)
	if err != nil {
		t.Fatalf("padlocktest.New: %v", err)
	}
	t.Cleanup(func() { _ = e.Close() })
	return e
}

// Start starts an Env outside a test (in an Example, a TestMain or a
// local run of an app). The caller must Close it. New is Start for a test.
//
// It returns an error matching padlock.ErrInvalid, where padlock.New
// would panic, when an option given with WithLockerOptions is invalid.
func Start(opts ...Option) (*Env, error) {
	var cfg config
	for _, o := range opts {
		o(&cfg)
	}
	m := miniredis.NewMiniRedis()
	if err := m.StartAddr("127.0.0.1:0"); err != nil {
		return nil, fmt.Errorf("padlocktest: starting miniredis: %w", err)
	}
	e := &Env{m: m, opts: cfg.lockerOpts}
	client := redis.NewClient(&redis.Options{
		Addr:                  m.Addr(),
		Dialer:                e.dial,
		DialTimeout:           clientIOTimeout,
		DialerRetries:         1,
		ReadTimeout:           clientIOTimeout,
		WriteTimeout:          clientIOTimeout,
		PoolTimeout:           clientPoolTimeout,
		MaxRetries:            -1,
		ContextTimeoutEnabled: true,
	})
	e.client = client
	locker, err := newLocker(client, cfg.lockerOpts)
	if err == nil {
		e.locker = locker
	}
	if err != nil {
		if locker != nil {
			_ = locker.Close()
		}
		_ = client.Close()
		m.Close()
		return nil, err
	}
	if !cfg.manual {
		// miniredis expires keys only when told that time has passed:
		// without the clock, a lease would never end.
		e.clock = miniclock.Start(m)
	}
	return e, nil
}

// dial is the Env's client's dialer. While Redis is down (Down) it hands
// out a connection whose every read and write fails at once, instead of
// failing the dial: go-redis logs each failed dial through its one
// process-wide logger, and a test that takes Redis away would print a
// line for every redial of every pool. The commands fail as they would on
// a refused dial, and padlock reports them as padlock.ErrUnavailable.
func (e *Env) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	if e.isDown() {
		conn, peer := net.Pipe()
		_ = peer.Close()
		return conn, nil
	}
	var d net.Dialer
	return d.DialContext(ctx, network, addr)
}

// newLocker is padlock.New, with its panic on an invalid option turned
// back into the error it carries.
func newLocker(client redis.UniversalClient, opts []padlock.LockerOption) (l *padlock.Locker, err error) {
	defer func() {
		if r := recover(); r != nil {
			if rerr, ok := r.(error); ok && errors.Is(rerr, padlock.ErrInvalid) {
				err = rerr
				return
			}
			panic(r)
		}
	}()
	return padlock.New(client, opts...)
}

// Locker returns the Env's Locker. Build the code under test on it. The
// Env owns it: do not Close it.
func (e *Env) Locker() *padlock.Locker { return e.locker }

// Client returns the go-redis client the Locker uses, for code under test
// that needs one (an idempotency store, say) and for looking at Redis. It
// retries no command and no dial, so it fails at once while Redis is down,
// and has ContextTimeoutEnabled, as padlock.New requires of a client (a
// second Locker, for another instance of the service, may be built on it).
// The Env owns it: do not Close it.
func (e *Env) Client() *redis.Client { return e.client }

// Addr returns the in-process Redis's address, host:port, for clients of
// the test's own. It stays the same across Down and Up.
func (e *Env) Addr() string { return e.m.Addr() }

// Miniredis returns the in-process Redis itself, for what the controls do
// not cover (looking at keys, FlushAll to come back empty after Up). It has
// no SSUBSCRIBE, no INFO server, and keys expire only as its clock moves.
func (e *Env) Miniredis() *miniredis.Miniredis { return e.m }

// Close closes the Lockers, the client and the in-process Redis, in that
// order, and waits for their goroutines to end. Held locks are not
// released: their Done channels close (padlock.ErrLockLost), as
// padlock.Locker.Close says. Close is safe to call more than once; it
// always returns nil.
func (e *Env) Close() error {
	e.mu.Lock()
	if e.closed {
		e.mu.Unlock()
		return nil
	}
	e.closed = true
	other := e.other
	e.mu.Unlock()
	if other != nil {
		_ = other.Close()
	}
	_ = e.locker.Close()
	_ = e.client.Close()
	if e.clock != nil {
		e.clock.Stop()
	}
	e.m.Close()
	return nil
}
