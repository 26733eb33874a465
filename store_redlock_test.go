package padlock_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/padlockgo/padlock"
	"github.com/padlockgo/padlock/internal/redistest"
	"github.com/redis/go-redis/v9"
)

func TestNewRedlockInvalid(t *testing.T) {
	srv := redistest.Start(t)
	deadlines := func(o *redis.Options) { o.ContextTimeoutEnabled = true }
	good := func() redis.UniversalClient { return srv.Client(t, deadlines) }
	shared := good()
	other := redistest.Start(t)
	cc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{srv.Addr()}})
	t.Cleanup(func() { cc.Close() })

	// panics: decided by the program's code; otherwise returned: decided by
	// the deployment's configuration (see "Constructors" in doc.go).
	tests := []struct {
		name    string
		clients []redis.UniversalClient
		opts    []padlock.RedlockOption
		panics  bool
		want    string // in the error message
	}{
		{"no clients", nil, nil, false, "no clients"},
		{"same node twice", []redis.UniversalClient{good(), good()}, nil, false, "clients[1]: reaches " + srv.Addr()},
		{"nil client", []redis.UniversalClient{good(), nil}, nil, true, "clients[1]: is nil"},
		{"same client twice", []redis.UniversalClient{shared, other.Client(t, deadlines), shared}, nil, true, "clients[2]: is clients[0] again"},
		{"cluster client", []redis.UniversalClient{cc}, nil, true, "Cluster client"},
		{"deadline ignored", []redis.UniversalClient{other.Client(t, func(o *redis.Options) { o.ReadTimeout, o.ContextTimeoutEnabled = 3*time.Second, false })}, nil, false, "ContextTimeoutEnabled"},
		{"node timeout", []redis.UniversalClient{good()}, []padlock.RedlockOption{padlock.WithNodeTimeout(-time.Second)}, true, "WithNodeTimeout"},
		{"node timeout above max lease", []redis.UniversalClient{good()},
			[]padlock.RedlockOption{padlock.WithMaxLease(time.Second), padlock.WithNodeTimeout(time.Second)}, true, "WithNodeTimeout"},
		{"max lease", []redis.UniversalClient{good()}, []padlock.RedlockOption{padlock.WithMaxLease(-1)}, true, "WithMaxLease"},
		{"default TTL above max lease", []redis.UniversalClient{good()},
			[]padlock.RedlockOption{padlock.WithMaxLease(time.Second), padlock.WithDefaults(padlock.Options{TTL: time.Minute})}, true, "WithDefaults"},
		{"fair", []redis.UniversalClient{good()}, []padlock.RedlockOption{padlock.WithDefaults(padlock.Options{Fair: true})}, true, "Fair"},
		{"brace in prefix", []redis.UniversalClient{good()}, []padlock.RedlockOption{padlock.WithKeyPrefix("a{b}")}, true, "WithKeyPrefix"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var (
				l        *padlock.Locker
				err      error
				panicked bool
			)
			func() {
				defer func() {
					if r := recover(); r != nil {
						panicked = true
						err, _ = r.(error)
					}
				}()
				l, err = padlock.NewRedlock(tt.clients, tt.opts...)
			}()
			if l != nil {
				l.Close()
			}
			if panicked != tt.panics {
				t.Fatalf("panicked: got %v, want %v (error %v)", panicked, tt.panics, err)
			}
			if !errors.Is(err, padlock.ErrInvalid) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("got %v, want ErrInvalid mentioning %q", err, tt.want)
			}
		})
	}
}

func ExampleNewRedlock() {
	// One client per independent Redis master. ContextTimeoutEnabled lets
	// the node timeout cut a hung node short: NewRedlock panics on a client
	// without it (or without read and write timeouts within the node timeout).
	var clients []redis.UniversalClient
	for _, addr := range []string{"redis-a:6379", "redis-b:6379", "redis-c:6379"} {
		clients = append(clients, redis.NewClient(&redis.Options{
			Addr:                  addr,
			ContextTimeoutEnabled: true,
		}))
	}
	locker, err := padlock.NewRedlock(clients,
		padlock.WithNodeTimeout(50*time.Millisecond),
		// Only if every node runs appendonly yes with appendfsync always:
		// padlock.WithPersistentNodes(),
	)
	if err != nil {
		fmt.Println(err) // ErrInvalid: no clients, or two reaching one address
		return
	}
	defer locker.Close()

	ctx := context.Background()
	lk, err := locker.Acquire(ctx, "report:daily", padlock.Options{TTL: 10 * time.Second})
	var qe *padlock.QuorumError
	switch {
	case errors.As(err, &qe): // too few nodes agreed: which, and why
		for _, n := range qe.Nodes {
			fmt.Println(n) // e.g. "redis-b:6379: restarting, votes in 12.5s"
		}
		return
	case err != nil:
		fmt.Println("not locked:", err) // busy: ErrNotAcquired
		return
	}
	defer lk.Release(ctx)
	// ... the work, under lk.Context(ctx); lk.Fence() is 0 here.
}

// A Redlock Locker keeps no semaphores or read-write locks: counts and
// reader sets on independent nodes would bound nothing. Each refuses with
// an ErrInvalid error naming why, instead of handing out a hold. Nor does
// it hold elections, which need one deployment: Campaign refuses too.
func TestHoldsRefusedOnRedlock(t *testing.T) {
	l := redlockOn(t, redistest.StartN(t, 3))
	ctx := context.Background()
	if _, err := l.Semaphore(2); !errors.Is(err, padlock.ErrInvalid) {
		t.Errorf("Semaphore: got %v, want ErrInvalid", err)
	}
	if _, err := l.AcquireRead(ctx, "k", padlock.Options{}); !errors.Is(err, padlock.ErrInvalid) {
		t.Errorf("AcquireRead: got %v, want ErrInvalid", err)
	}
	if _, err := l.AcquireWrite(ctx, "k", padlock.Options{}); !errors.Is(err, padlock.ErrInvalid) {
		t.Errorf("AcquireWrite: got %v, want ErrInvalid", err)
	}
	if _, err := l.Election("e", padlock.Options{}).Campaign(ctx, "v"); !errors.Is(err, padlock.ErrInvalid) {
		t.Errorf("Campaign: got %v, want ErrInvalid", err)
	}
}
