package padlocktest_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/padlockgo/padlock"
	"github.com/padlockgo/padlock/padlocktest"
)

// shortLease is the lease of tests that wait for a renewal: one comes a
// third of a second in, and a loaded machine has most of a second to send
// it before the lease runs out on its own.
const shortLease = time.Second

// patience bounds every wait for something that must happen: generous,
// since the machine may be loaded; the tests never assert speed.
const patience = 10 * time.Second

func ctxFor(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), patience)
	t.Cleanup(cancel)
	return ctx
}

func acquire(t *testing.T, ctx context.Context, l *padlock.Locker, key string, o padlock.Options) *padlock.Lock {
	t.Helper()
	lk, err := l.Acquire(ctx, key, o)
	if err != nil {
		t.Fatalf("Acquire(%q): %v", key, err)
	}
	t.Cleanup(func() { _ = lk.Release(context.Background()) })
	return lk
}

// waitDone waits for lk to end and returns its Err.
func waitDone(t *testing.T, lk *padlock.Lock) error {
	t.Helper()
	select {
	case <-lk.Done():
		return lk.Err()
	case <-time.After(patience):
		t.Fatalf("lock on %q still held after %v", lk.Key(), patience)
		return nil
	}
}

func TestLeasesExpireInRealTime(t *testing.T) {
	env := padlocktest.New(t)
	ctx := ctxFor(t)
	if _, err := env.Busy(ctx, "k", 200*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	// No release notice comes: only the lease's end in Redis frees the key.
	lk, err := env.Locker().Acquire(ctx, "k", padlock.Options{Wait: patience})
	if err != nil {
		t.Fatalf("Acquire after the holder's lease ran out: got %v, want nil", err)
	}
	_ = lk.Release(ctx)
}

func TestManualClock(t *testing.T) {
	env := padlocktest.New(t, padlocktest.WithManualClock())
	ctx := ctxFor(t)
	if _, err := env.Busy(ctx, "k", 50*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	time.Sleep(200 * time.Millisecond) // four leases of real time
	if _, err := env.Locker().Acquire(ctx, "k", padlock.Options{}); !errors.Is(err, padlock.ErrNotAcquired) {
		t.Fatalf("Acquire before Advance: got %v, want ErrNotAcquired", err)
	}
	env.Advance(50 * time.Millisecond)
	lk, err := env.Locker().Acquire(ctx, "k", padlock.Options{})
	if err != nil {
		t.Fatalf("Acquire after Advance past the lease: got %v, want nil", err)
	}
	_ = lk.Release(ctx)
}

func TestBusy(t *testing.T) {
	tests := []struct {
		name  string
		lease time.Duration
		fair  bool
	}{
		{"fixed lease", time.Minute, false},
		{"held until released", 0, false},
		{"fair", time.Minute, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			env := padlocktest.New(t, padlocktest.WithLockerOptions(
				padlock.WithDefaults(padlock.Options{Fair: tt.fair})))
			ctx := ctxFor(t)
			holder, err := env.Busy(ctx, "order:42", tt.lease)
			if err != nil {
				t.Fatal(err)
			}
			_, err = env.Locker().Acquire(ctx, "order:42", padlock.Options{})
			if !errors.Is(err, padlock.ErrNotAcquired) {
				t.Fatalf("Acquire of a busy key: got %v, want ErrNotAcquired", err)
			}
			ra, ok := padlock.RetryAfter(err)
			max := tt.lease
			if max == 0 {
				max = padlock.DefaultTTL
			}
			if !ok || ra <= 0 || ra > max {
				t.Fatalf("RetryAfter: got %v, %v, want (0, %v], true", ra, ok, max)
			}
			if _, err := env.Busy(ctx, "order:42", tt.lease); !errors.Is(err, padlocktest.ErrControl) {
				t.Fatalf("Busy of a busy key: got %v, want ErrControl", err)
			}
			if err := holder.Release(ctx); err != nil {
				t.Fatalf("releasing the holder: %v", err)
			}
			acquire(t, ctx, env.Locker(), "order:42", padlock.Options{})
		})
	}
}

// A Busy that finds the key held must leave no trace in Redis: a fair
// waiter's queue entry left behind would be first in line when the holder
// lets go, and refuse the next Acquire of the free key. (The manual clock
// keeps such an entry from expiring before the test looks.)
func TestBusyOfAHeldKeyDoesNotQueue(t *testing.T) {
	env := padlocktest.New(t, padlocktest.WithManualClock(), padlocktest.WithLockerOptions(
		padlock.WithDefaults(padlock.Options{Fair: true, Wait: time.Hour})))
	ctx := ctxFor(t)
	if _, err := env.Busy(ctx, "k", time.Minute); err != nil {
		t.Fatal(err)
	}
	before := env.Miniredis().Keys()
	if _, err := env.Busy(ctx, "k", time.Minute); !errors.Is(err, padlocktest.ErrControl) {
		t.Fatalf("second Busy: got %v, want ErrControl", err)
	}
	if after := env.Miniredis().Keys(); !slices.Equal(after, before) {
		t.Fatalf("keys after a refused Busy: got %q, want %q", after, before)
	}
}

// A free key with a fair waiter first in line refuses Busy's attempt; Busy
// must return then, not wait as long as the Locker's defaults say.
func TestBusyIgnoresDefaultWait(t *testing.T) {
	fair := padlock.WithDefaults(padlock.Options{Fair: true, Wait: time.Hour})
	env := padlocktest.New(t, padlocktest.WithLockerOptions(fair))
	ctx := ctxFor(t)
	acquire(t, ctx, env.Locker(), "k", padlock.Options{})
	waiter, err := padlock.New(env.Client(), fair)
	if err != nil {
		t.Fatal(err)
	}
	defer waiter.Close()
	waited := make(chan *padlock.Lock, 1)
	go func() {
		lk, _ := waiter.Acquire(ctx, "k", padlock.Options{Wait: patience})
		waited <- lk
	}()
	defer func() { _ = (<-waited).Release(context.Background()) }()
	// Queued, the waiter sleeps until the holder's lease ends or a notice
	// comes; Lose sends none.
	for !slices.ContainsFunc(env.Miniredis().Keys(), func(k string) bool { return strings.HasSuffix(k, ":queue") }) {
		if ctx.Err() != nil {
			t.Fatal("the waiter never queued")
		}
		time.Sleep(time.Millisecond)
	}
	env.Lose("k")
	_, err = env.Busy(ctx, "k", time.Minute)
	if !errors.Is(err, padlocktest.ErrControl) || errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Busy behind a fair waiter: got %v, want ErrControl without waiting for the context", err)
	}
}

// keyCases cover the key layout Lose must agree with padlock on: the
// default and a custom prefix, and keys with the characters padlock
// escapes.
var keyCases = []struct {
	name   string
	prefix string // "" for the default
	key    string
}{
	{"default prefix", "", "order:42"},
	{"custom prefix", "app:locks:", "order:42"},
	{"escaped key", "", `a{b}\c`},
}

func optionsFor(prefix string) []padlocktest.Option {
	opts := []padlock.LockerOption{padlock.WithDefaults(padlock.Options{TTL: shortLease})}
	if prefix != "" {
		opts = append(opts, padlock.WithKeyPrefix(prefix))
	}
	return []padlocktest.Option{padlocktest.WithLockerOptions(opts...)}
}

func TestLose(t *testing.T) {
	for _, tt := range keyCases {
		t.Run(tt.name, func(t *testing.T) {
			env := padlocktest.New(t, optionsFor(tt.prefix)...)
			ctx := ctxFor(t)
			if env.Lose(tt.key) {
				t.Fatalf("Lose(%q) of a free key: got true, want false", tt.key)
			}
			lk := acquire(t, ctx, env.Locker(), tt.key, padlock.Options{})
			if !env.Lose(tt.key) {
				t.Fatalf("Lose(%q) of a held key: got false, want true", tt.key)
			}
			// Nothing touches lk: its watchdog's next renewal finds out.
			if err := waitDone(t, lk); !errors.Is(err, padlock.ErrLockLost) {
				t.Fatalf("Err after Lose: got %v, want ErrLockLost", err)
			}
			if cause := context.Cause(lk.Context(ctx)); !errors.Is(cause, padlock.ErrLockLost) {
				t.Fatalf("cause of the lock's context: got %v, want ErrLockLost", cause)
			}
			acquire(t, ctx, env.Locker(), tt.key, padlock.Options{})
		})
	}
}

func TestLoseLock(t *testing.T) {
	for _, tt := range keyCases {
		t.Run(tt.name, func(t *testing.T) {
			// The default 30s lease: LoseLock must not wait for a renewal.
			opts := []padlocktest.Option{}
			if tt.prefix != "" {
				opts = append(opts, padlocktest.WithLockerOptions(padlock.WithKeyPrefix(tt.prefix)))
			}
			env := padlocktest.New(t, opts...)
			ctx := ctxFor(t)
			lk := acquire(t, ctx, env.Locker(), tt.key, padlock.Options{})
			guarded := lk.Context(ctx)
			if err := env.LoseLock(ctx, lk); err != nil {
				t.Fatalf("LoseLock: %v", err)
			}
			select {
			case <-lk.Done():
			default:
				t.Fatal("Done still open when LoseLock returned")
			}
			if err := lk.Err(); !errors.Is(err, padlock.ErrLockLost) {
				t.Fatalf("Err: got %v, want ErrLockLost", err)
			}
			if cause := context.Cause(guarded); !errors.Is(cause, padlock.ErrLockLost) {
				t.Fatalf("cause of the guarded context: got %v, want ErrLockLost", cause)
			}
			acquire(t, ctx, env.Locker(), tt.key, padlock.Options{})
		})
	}
}

func TestLoseLockOfAReleasedLock(t *testing.T) {
	env := padlocktest.New(t)
	ctx := ctxFor(t)
	lk := acquire(t, ctx, env.Locker(), "k", padlock.Options{})
	if err := lk.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if err := env.LoseLock(ctx, lk); !errors.Is(err, padlocktest.ErrControl) {
		t.Fatalf("LoseLock of a released lock: got %v, want ErrControl", err)
	}
	if err := lk.Err(); !errors.Is(err, padlock.ErrReleased) {
		t.Fatalf("Err after LoseLock of a released lock: got %v, want ErrReleased", err)
	}
}

func TestLoseLockSparesTheNextHolder(t *testing.T) {
	env := padlocktest.New(t)
	ctx := ctxFor(t)
	first := acquire(t, ctx, env.Locker(), "k", padlock.Options{})
	if err := env.LoseLock(ctx, first); err != nil {
		t.Fatal(err)
	}
	second := acquire(t, ctx, env.Locker(), "k", padlock.Options{})
	if err := env.LoseLock(ctx, first); err != nil {
		t.Fatalf("LoseLock of a lock lost already: got %v, want nil", err)
	}
	if _, err := second.TTL(ctx); err != nil {
		t.Fatalf("TTL of the key's next holder: got %v, want nil", err)
	}
}

func TestDownUp(t *testing.T) {
	env := padlocktest.New(t)
	ctx := ctxFor(t)
	addr := env.Addr()
	env.Down()
	env.Down() // a second Down does nothing
	if _, err := env.Locker().Acquire(ctx, "k", padlock.Options{}); !errors.Is(err, padlock.ErrUnavailable) {
		t.Fatalf("Acquire while down: got %v, want ErrUnavailable", err)
	}
	if _, err := env.Busy(ctx, "k", time.Minute); !errors.Is(err, padlock.ErrUnavailable) {
		t.Fatalf("Busy while down: got %v, want ErrUnavailable", err)
	}
	if err := env.Up(); err != nil {
		t.Fatalf("Up: %v", err)
	}
	if err := env.Up(); err != nil {
		t.Fatalf("second Up: got %v, want nil", err)
	}
	if got := env.Addr(); got != addr {
		t.Fatalf("Addr after Up: got %q, want %q", got, addr)
	}
	acquire(t, ctx, env.Locker(), "k", padlock.Options{})
}

func TestDownKeepsData(t *testing.T) {
	env := padlocktest.New(t)
	ctx := ctxFor(t)
	if _, err := env.Busy(ctx, "k", time.Minute); err != nil {
		t.Fatal(err)
	}
	env.Down()
	if err := env.Up(); err != nil {
		t.Fatal(err)
	}
	if _, err := env.Locker().Acquire(ctx, "k", padlock.Options{}); !errors.Is(err, padlock.ErrNotAcquired) {
		t.Fatalf("Acquire of a key made busy before Down: got %v, want ErrNotAcquired", err)
	}
}

func TestLockLostWhileDown(t *testing.T) {
	env := padlocktest.New(t, padlocktest.WithLockerOptions(
		padlock.WithDefaults(padlock.Options{TTL: shortLease})))
	ctx := ctxFor(t)
	lk := acquire(t, ctx, env.Locker(), "k", padlock.Options{})
	env.Down()
	if err := waitDone(t, lk); !errors.Is(err, padlock.ErrLockLost) {
		t.Fatalf("Err after Redis went away: got %v, want ErrLockLost", err)
	}
}

func TestInvalidLockerOption(t *testing.T) {
	_, err := padlocktest.Start(padlocktest.WithLockerOptions(padlock.WithKeyPrefix("{bad}")))
	if !errors.Is(err, padlock.ErrInvalid) {
		t.Fatalf("Start with an invalid prefix: got %v, want ErrInvalid", err)
	}
}

func TestClose(t *testing.T) {
	env, err := padlocktest.Start()
	if err != nil {
		t.Fatal(err)
	}
	ctx := ctxFor(t)
	lk := acquire(t, ctx, env.Locker(), "k", padlock.Options{})
	if _, err := env.Busy(ctx, "other", 0); err != nil {
		t.Fatal(err)
	}
	env.Down()
	if err := env.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if err := env.Close(); err != nil {
		t.Fatalf("second Close: got %v, want nil", err)
	}
	if err := lk.Err(); !errors.Is(err, padlock.ErrLockLost) {
		t.Fatalf("Err of a lock held at Close: got %v, want ErrLockLost", err)
	}
	if _, err := env.Busy(ctx, "k2", time.Minute); !errors.Is(err, padlock.ErrClosed) {
		t.Fatalf("Busy after Close: got %v, want ErrClosed", err)
	}
}

// A lock the test cannot reach, taken by the handler as a middleware
// would: Lose must end the handler's work with ErrLockLost.
func TestLoseReachesAHandlersLock(t *testing.T) {
	env := padlocktest.New(t, padlocktest.WithLockerOptions(
		padlock.WithDefaults(padlock.Options{TTL: shortLease})))
	ctx := ctxFor(t)
	working := make(chan struct{})
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		lk, err := env.Locker().Acquire(r.Context(), "order:42", padlock.Options{})
		if err != nil {
			http.Error(w, err.Error(), http.StatusConflict)
			return
		}
		defer lk.Release(context.WithoutCancel(r.Context()))
		work := lk.Context(r.Context())
		close(working)
		<-work.Done()
		if errors.Is(context.Cause(work), padlock.ErrLockLost) {
			http.Error(w, "lock lost", http.StatusInternalServerError)
		}
	})
	codes := make(chan int, 1)
	go func() {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest("POST", "/orders/42/pay", nil).WithContext(ctx))
		codes <- rec.Code
	}()
	<-working
	if !env.Lose("order:42") {
		t.Fatal("Lose of the handler's key: got false, want true")
	}
	if got := <-codes; got != http.StatusInternalServerError {
		t.Fatalf("status: got %d, want %d (the handler saw its lock lost)", got, http.StatusInternalServerError)
	}
}

// A waiter of another Locker marks the holder's stored token (a "*"
// suffix) to ask for a release notice; LoseLock must still find the lock.
func TestLoseLockAfterAWaiterAsked(t *testing.T) {
	env := padlocktest.New(t)
	ctx := ctxFor(t)
	lk := acquire(t, ctx, env.Locker(), "k", padlock.Options{})
	other, err := padlock.New(env.Client())
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	if _, err := other.Acquire(ctx, "k", padlock.Options{Wait: 50 * time.Millisecond}); !errors.Is(err, padlock.ErrNotAcquired) {
		t.Fatalf("waiter's Acquire: got %v, want ErrNotAcquired", err)
	}
	marked := false
	for _, k := range env.Miniredis().Keys() {
		if v, err := env.Miniredis().Get(k); err == nil && strings.HasPrefix(v, lk.Token()+"|") && strings.HasSuffix(v, "*") {
			marked = true
		}
	}
	if !marked {
		t.Fatal("no key holds the token with a \"*\" suffix: the waiter did not ask for a notice, so this test proves nothing")
	}
	if err := env.LoseLock(ctx, lk); err != nil {
		t.Fatalf("LoseLock: got %v, want nil", err)
	}
}

// TestDownIsQuiet: while Redis is down, the Env's Locker meets failed
// commands, its pub/sub connection among them, with nothing logged by
// go-redis, whose failed dials used to print a line each unless the test
// silenced its logger.
func TestDownIsQuiet(t *testing.T) {
	env := padlocktest.New(t)
	ctx := ctxFor(t)
	acquire(t, ctx, env.Locker(), "held", padlock.Options{}) // the notifier's connection is up
	before := redisLog.len()
	env.Down()
	for i := range 3 {
		if _, err := env.Locker().Acquire(ctx, "k", padlock.Options{}); !errors.Is(err, padlock.ErrUnavailable) {
			t.Fatalf("Acquire %d while down: got %v, want ErrUnavailable", i+1, err)
		}
	}
	if _, err := env.Busy(ctx, "k", time.Minute); !errors.Is(err, padlock.ErrUnavailable) {
		t.Fatalf("Busy while down: got %v, want ErrUnavailable", err)
	}
	if lines := redisLog.since(before); len(lines) > 0 {
		t.Errorf("go-redis logged %d lines while Redis was down, want none: %q", len(lines), lines)
	}
	if err := env.Up(); err != nil {
		t.Fatal(err)
	}
	acquire(t, ctx, env.Locker(), "k", padlock.Options{})
}
