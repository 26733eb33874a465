package padlock_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/padlockgo/padlock"
	"github.com/padlockgo/padlock/internal/redistest"
	"github.com/redis/go-redis/v9"
)

// aclDenials returns what srv's ACL refused since aclUser, one line each.
func aclDenials(t *testing.T, srv *redistest.Server) []string {
	t.Helper()
	entries, err := srv.Client(t, patient).ACLLog(ctxFor(t), 100).Result()
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range entries {
		out = append(out, fmt.Sprintf("%s %s %s (%s, %d times)", e.Reason, e.Context, e.Object, e.Username, e.Count))
	}
	return out
}

// patientTimeout is how long the tests' own reads and writes (the ACL
// log, a script flush) wait for Redis: a loaded machine once kept a
// Cluster node's answer from the test clients' 1 s, which says nothing
// of the permissions under test.
const patientTimeout = 10 * time.Second

// patient gives a test's own client patientTimeout.
func patient(o *redis.Options) {
	o.DialTimeout, o.ReadTimeout, o.WriteTimeout = patientTimeout, patientTimeout, patientTimeout
}

// scriptErrors is a go-redis hook that records the errors of the scripts
// a client runs (but NOSCRIPT, which Script.Run answers with EVAL).
type scriptErrors struct {
	mu   sync.Mutex
	errs []string
}

func (h *scriptErrors) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *scriptErrors) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		err := next(ctx, cmds)
		for _, cmd := range cmds {
			h.record(cmd, cmd.Err())
		}
		return err
	}
}

func (h *scriptErrors) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		err := next(ctx, cmd)
		h.record(cmd, err)
		return err
	}
}

// record notes err, cmd's error as the hooks below this one returned it.
func (h *scriptErrors) record(cmd redis.Cmder, err error) {
	if err == nil || errors.Is(err, redis.Nil) || redis.HasErrorPrefix(err, "NOSCRIPT") ||
		(cmd.Name() != "evalsha" && cmd.Name() != "eval") {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.errs = append(h.errs, err.Error())
}

func (h *scriptErrors) all() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.errs)
}

// awaitMarked waits until a waiter's attempt marked the lock on key ('*'
// appended to its token, acquire.lua): the attempt that also publishes
// the waiter's "want" notice has run.
func awaitMarked(t *testing.T, rdb redis.Cmdable, key string) {
	t.Helper()
	ctx := ctxFor(t)
	deadline := time.Now().Add(15 * time.Second)
	for time.Now().Before(deadline) {
		if v, _ := rdb.Get(ctx, "padlock:{"+key+"}").Result(); strings.HasSuffix(v, "*") {
			return
		}
		time.Sleep(2 * time.Millisecond)
	}
	t.Fatalf("no waiter marked the lock on %q in 15s", key)
}

// TestACLWithoutPubSub runs padlock as a Redis 7 user without the notice
// rules: the documented commands, and either no channels (the default for
// new users) or no pub/sub commands either. Every lock operation must say
// what it did to the lock; only the notices are lost, and waiters poll.
func TestACLWithoutPubSub(t *testing.T) {
	rules := readmeACL(t)
	noChannels := slices.Clone(rules[aclNotices])
	noChannels = slices.DeleteFunc(noChannels, func(r string) bool { return strings.HasPrefix(r, "&") })
	for _, tc := range []struct {
		name   string
		rules  [][]string
		denied string // the refusal the notices meet
	}{
		{"no channels", [][]string{rules[aclEvery], noChannels}, "channel lua padlock:"},
		{"no pub/sub commands", [][]string{rules[aclEvery]}, "command lua publish"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := redistest.Start(t)
			rdb := srv.Client(t)
			user := aclUser(t, srv, tc.rules...)
			scripts := &scriptErrors{}
			user.AddHook(scripts)
			l := padlock.MustNew(t, user)
			t.Cleanup(func() { l.Close() })
			ctx := ctxFor(t)
			// Generous waits: without notices the waiters poll.
			wait := padlock.Options{Wait: 60 * time.Second, Retry: padlock.LinearBackoff(20 * time.Millisecond)}

			for _, fair := range []bool{false, true} {
				key := testKey(t) + fmt.Sprintf(":fair=%v", fair)
				// A holder whose lock cannot be handed on (one fence
				// reserved, or fair), so that Release goes to Redis with
				// a notice for the local waiter.
				holder, err := l.Acquire(ctx, key, padlock.Options{Fair: fair})
				if err != nil {
					t.Fatalf("fair=%v: holder's Acquire: %v", fair, err)
				}
				if err := holder.Extend(ctx, 20*time.Second); err != nil {
					t.Fatalf("fair=%v: Extend: got %v, want nil", fair, err)
				}
				got := make(chan error, 1)
				go func() {
					o := wait
					o.Fair = fair
					lk, err := l.Acquire(ctx, key, o)
					if err == nil {
						if err = lk.Extend(ctx, 10*time.Second); err == nil {
							err = lk.Release(ctx)
						}
					}
					got <- err
				}()
				if fair {
					waitQueueLen(t, rdb, key, 1)
				} else {
					awaitMarked(t, rdb, key)
				}
				if err := holder.Release(ctx); err != nil {
					t.Errorf("fair=%v: Release with a local waiter: got %v, want nil", fair, err)
				}
				if v, _ := rdb.Get(ctx, "padlock:{"+key+"}").Result(); strings.HasPrefix(v, holder.Token()) {
					t.Fatalf("fair=%v: the lock after Release: got the holder's token, want it gone", fair)
				}
				if err := <-got; err != nil {
					t.Fatalf("fair=%v: waiter: got %v, want the lock, then Extend and Release nil", fair, err)
				}
			}
			if errs := scripts.all(); len(errs) != 0 {
				t.Errorf("scripts that failed: %q, want none", errs)
			}
			denials := aclDenials(t, srv)
			if !slices.ContainsFunc(denials, func(d string) bool { return strings.HasPrefix(d, tc.denied) }) {
				t.Errorf("ACL log: %q, want a %q refusal (the notices were refused)", denials, tc.denied)
			}
		})
	}
}

// TestACLDocumentedPermissions runs padlock as a Redis 7 user with exactly
// the rules the README documents, on each kind of deployment they name, and
// checks that Redis refused nothing padlock sent: taking, extending,
// renewing (after a SCRIPT FLUSH, so the watchdog loads its script again)
// and releasing locks, waiting on release notices, fair queues, multi-key
// locks, Inspect, and (on one deployment) semaphores and read-write locks.
func TestACLDocumentedPermissions(t *testing.T) {
	t.Parallel() // its deployments are servers of its own
	rules := readmeACL(t)
	base := [][]string{rules[aclEvery], rules[aclNotices], rules[aclInspect]}
	user := func(o *redis.Options) { o.Username, o.Password = rules[aclEvery][2], "secret" }
	for _, tc := range []struct {
		name string
		// start starts the servers, applies the rules to them and returns
		// them, a client of the default user that reaches the lock keys
		// (nil on Redlock), and a function that makes a Locker as another
		// process would (clients of its own).
		start func(t *testing.T) ([]*redistest.Server, redis.Cmdable, func() *padlock.Locker)
		fair  bool // try fair mode too (not on Redlock)
		ttl   time.Duration
		// hold keeps a fair waiter waiting this long: it sends no
		// notices, so its subscription idles, and past 3s go-redis
		// checks an idle subscription with a PING.
		hold time.Duration
	}{
		{
			name: "node",
			start: func(t *testing.T) ([]*redistest.Server, redis.Cmdable, func() *padlock.Locker) {
				srv := redistest.Start(t)
				aclUser(t, srv, base...)
				return []*redistest.Server{srv}, srv.Client(t, patient), func() *padlock.Locker { return padlock.MustNew(t, srv.Client(t, user)) }
			},
			fair: true,
			ttl:  time.Second,
			hold: 4 * time.Second,
		},
		{
			name: "cluster",
			start: func(t *testing.T) ([]*redistest.Server, redis.Cmdable, func() *padlock.Locker) {
				c := redistest.StartCluster(t, 3)
				for _, srv := range c.Nodes() {
					aclUser(t, srv, rules[aclEvery], rules[aclCluster], rules[aclTopology], rules[aclInspect])
				}
				return c.Nodes(), c.Client(t, func(o *redis.ClusterOptions) {
						o.ReadTimeout, o.WriteTimeout = patientTimeout, patientTimeout
					}), func() *padlock.Locker {
						return padlock.MustNew(t, c.Client(t, func(o *redis.ClusterOptions) {
							o.Username, o.Password = rules[aclEvery][2], "secret"
							// A Cluster client's round trip once took longer
							// than the test clients' 1 s on a loaded machine,
							// which says nothing of the permissions.
							o.ReadTimeout, o.WriteTimeout = 10*time.Second, 10*time.Second
						}))
					}
			},
			fair: true,
			// A lease the watchdog keeps on a loaded machine too.
			ttl:  3 * time.Second,
			hold: 4 * time.Second,
		},
		{
			name: "redlock",
			start: func(t *testing.T) ([]*redistest.Server, redis.Cmdable, func() *padlock.Locker) {
				srvs := redistest.StartAged(t, 3, rlNodesVote)
				for _, srv := range srvs {
					aclUser(t, srv, append(base, rules[aclRedlock])...)
				}
				return srvs, nil, func() *padlock.Locker {
					clients := make([]redis.UniversalClient, len(srvs))
					for i, srv := range srvs {
						clients[i] = srv.Client(t, user, func(o *redis.Options) { o.ContextTimeoutEnabled = true })
					}
					l, err := padlock.NewRedlock(clients, padlock.WithMaxLease(rlMaxLease),
						padlock.WithNodeTimeout(rlNodeTimeout), padlock.WithDefaults(padlock.Options{TTL: rlMaxLease}))
					if err != nil {
						t.Fatalf("NewRedlock: %v", err)
					}
					return l
				}
			},
			ttl: rlMaxLease,
		},
		{
			name: "sentinel with replica ack",
			start: func(t *testing.T) ([]*redistest.Server, redis.Cmdable, func() *padlock.Locker) {
				s := redistest.StartSentinel(t, 1)
				aclUser(t, s.Master(), append(base, rules[aclReplicaAck])...)
				return []*redistest.Server{s.Master()}, s.Master().Client(t, patient), func() *padlock.Locker {
					c := s.Client(t, func(o *redis.FailoverOptions) { o.Username, o.Password = rules[aclEvery][2], "secret" })
					return padlock.MustNew(t, c, padlock.WithReplicaAck(1, 800*time.Millisecond))
				}
			},
			fair: true,
			ttl:  time.Second,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// Each deployment is servers of its own, and most of the
			// time is waiting for leases and an idle subscription's PING.
			t.Parallel()
			srvs, admin, newLocker := tc.start(t)
			la, lb := newLocker(), newLocker()
			t.Cleanup(func() { la.Close(); lb.Close() })
			ctx := ctxFor(t)
			key := testKey(t)
			wait := padlock.Options{Wait: 20 * time.Second}

			// Taken, extended, waited for by another process, released.
			lk, err := la.Acquire(ctx, key, wait)
			if err != nil {
				t.Fatalf("Acquire: %v", err)
			}
			if err := lk.Extend(ctx, tc.ttl); err != nil {
				t.Fatalf("Extend: %v", err)
			}
			if _, err := lk.TTL(ctx); err != nil {
				t.Fatalf("TTL: %v", err)
			}
			got := make(chan error, 1)
			go func() {
				lk, err := lb.Acquire(ctx, key, wait)
				if err == nil {
					err = lk.Release(ctx)
				}
				got <- err
			}()
			if admin != nil {
				awaitMarked(t, admin, key)
			}
			if err := lk.Release(ctx); err != nil {
				t.Fatalf("Release: %v", err)
			}
			if err := <-got; err != nil {
				t.Fatalf("waiter in another Locker: %v", err)
			}

			// Renewed by the watchdog, also after the scripts were flushed.
			lk, err = la.Acquire(ctx, key+":renewed", padlock.Options{TTL: tc.ttl, Wait: 5 * time.Second})
			if err != nil {
				t.Fatalf("Acquire: %v", err)
			}
			for _, srv := range srvs {
				if err := srv.Client(t, patient).ScriptFlush(ctx).Err(); err != nil {
					t.Fatal(err)
				}
			}
			time.Sleep(tc.ttl + tc.ttl/2)
			if err := lk.Err(); err != nil {
				t.Fatalf("lock renewed past its TTL: got %v, want held", err)
			}
			if err := lk.Release(ctx); err != nil {
				t.Fatalf("Release of the renewed lock: %v", err)
			}

			if tc.fair {
				// A holder, a waiter in another process, and one here that
				// gives up while queued.
				fair := padlock.Options{Fair: true, Wait: 20 * time.Second}
				fkey := key + ":fair"
				holder, err := la.Acquire(ctx, fkey, fair)
				if err != nil {
					t.Fatalf("fair Acquire: %v", err)
				}
				go func() {
					lk, err := lb.Acquire(ctx, fkey, fair)
					if err == nil {
						err = lk.Release(ctx)
					}
					got <- err
				}()
				waitQueueLen(t, admin, fkey, 1)
				time.Sleep(tc.hold)
				wctx, giveUp := context.WithCancel(ctx)
				gaveUp := make(chan error, 1)
				go func() {
					_, err := la.Acquire(wctx, fkey, fair)
					gaveUp <- err
				}()
				waitQueueLen(t, admin, fkey, 2)
				giveUp()
				if err := <-gaveUp; !errors.Is(err, padlock.ErrNotAcquired) {
					t.Fatalf("fair waiter that gave up: got %v, want ErrNotAcquired", err)
				}
				if err := holder.Release(ctx); err != nil {
					t.Fatalf("fair Release: %v", err)
				}
				if err := <-got; err != nil {
					t.Fatalf("fair waiter in another Locker: %v", err)
				}
			}

			// A multi-key lock, and the lock listing (SCAN).
			m, err := la.AcquireAll(ctx, []string{key + ":a", key + ":b"}, wait)
			if err != nil {
				t.Fatalf("AcquireAll: %v", err)
			}
			if _, err := la.Inspect(ctx, 100); err != nil {
				t.Fatalf("Inspect: %v", err)
			}
			if err := m.Release(ctx); err != nil {
				t.Fatalf("Release of the multi-key lock: %v", err)
			}

			if tc.fair { // semaphores and read-write locks need one deployment
				// A permit, extended, waited for by another process, released;
				// then the same in fair mode.
				for _, opts := range []padlock.Options{wait, {Fair: true, Wait: 20 * time.Second}} {
					skey := fmt.Sprintf("%s:sem:%t", key, opts.Fair)
					sa, err := la.Semaphore(1)
					if err != nil {
						t.Fatal(err)
					}
					sb, err := lb.Semaphore(1)
					if err != nil {
						t.Fatal(err)
					}
					p, err := sa.Acquire(ctx, skey, opts)
					if err != nil {
						t.Fatalf("semaphore Acquire (fair %t): %v", opts.Fair, err)
					}
					if err := p.Extend(ctx, tc.ttl); err != nil {
						t.Fatalf("semaphore Extend: %v", err)
					}
					go func() {
						p, err := sb.Acquire(ctx, skey, opts)
						if err == nil {
							err = p.Release(ctx)
						}
						got <- err
					}()
					time.Sleep(200 * time.Millisecond)
					if err := p.Release(ctx); err != nil {
						t.Fatalf("semaphore Release: %v", err)
					}
					if err := <-got; err != nil {
						t.Fatalf("semaphore waiter in another Locker (fair %t): %v", opts.Fair, err)
					}
				}

				// A reader, a writer in another process queued behind it,
				// then the reader leaves and the writer goes in.
				rkey := key + ":rw"
				r, err := la.AcquireRead(ctx, rkey, wait)
				if err != nil {
					t.Fatalf("AcquireRead: %v", err)
				}
				go func() {
					w, err := lb.AcquireWrite(ctx, rkey, wait)
					if err == nil {
						err = w.Release(ctx)
					}
					got <- err
				}()
				time.Sleep(200 * time.Millisecond)
				if err := r.Release(ctx); err != nil {
					t.Fatalf("read Release: %v", err)
				}
				if err := <-got; err != nil {
					t.Fatalf("writer in another Locker: %v", err)
				}
			}

			for _, srv := range srvs {
				// go-redis sends CLIENT SETINFO when it connects and ignores
				// a refusal (servers before 7.2 do not know the command).
				denials := slices.DeleteFunc(aclDenials(t, srv), func(d string) bool {
					return strings.HasPrefix(d, "command toplevel client|")
				})
				if len(denials) != 0 {
					t.Errorf("%s refused: %q, want nothing", srv, denials)
				}
			}
		})
	}
}
