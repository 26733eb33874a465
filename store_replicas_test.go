package padlock_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/padlockgo/padlock"
	"github.com/padlockgo/padlock/internal/redistest"
)

// eventBound bounds this file's waits for an event (a replica gone, a
// master promoted, a failover client following it): far beyond what
// each takes on a quiet machine, since each wait returns when its event
// comes, and a loaded machine stretches them.
const eventBound = 30 * time.Second

// cutReplication stops the replica from receiving the master's writes
// while it stays the master's replica, the one a failover promotes: the
// link is killed, and a wrong masterauth makes every reconnection fail at
// AUTH. It is the window every asynchronous replica has, held open.
func cutReplication(t *testing.T, s *redistest.SentinelSetup) {
	t.Helper()
	ctx := ctxFor(t)
	replica := s.Replica().Client(t)
	if err := replica.ConfigSet(ctx, "masterauth", "not-the-password").Err(); err != nil {
		t.Fatalf("replica: CONFIG SET masterauth: %v", err)
	}
	if err := replica.Do(ctx, "CLIENT", "KILL", "TYPE", "master").Err(); err != nil {
		t.Fatalf("replica: CLIENT KILL TYPE master: %v", err)
	}
	master := s.Master().Client(t)
	for deadline := time.Now().Add(eventBound); ; time.Sleep(20 * time.Millisecond) {
		info, err := master.Info(ctx, "replication").Result()
		if err == nil && strings.Contains(info, "connected_slaves:0") {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("master still has a replica after the link was cut: %v %s", err, info)
		}
	}
}

// failover kills the master and waits until the sentinels have promoted
// the replica.
func failover(t *testing.T, s *redistest.SentinelSetup) {
	t.Helper()
	start := time.Now()
	s.Master().Kill(t)
	s.WaitMaster(t, s.Replica().Addr())
	t.Logf("failover took %v", time.Since(start))
}

// acquireAfterFailover is Acquire by a Locker on the new master, retried
// while the failover client still finds no master to talk to.
func acquireAfterFailover(t *testing.T, l *padlock.Locker, key string) (*padlock.Lock, error) {
	t.Helper()
	ctx := ctxFor(t)
	for deadline := time.Now().Add(eventBound); ; time.Sleep(50 * time.Millisecond) {
		lk, err := l.Acquire(ctx, key, padlock.Options{})
		if !errors.Is(err, padlock.ErrUnavailable) || time.Now().After(deadline) {
			return lk, err
		}
	}
}

// TestSentinelFailoverHazard shows why plain locking on a Sentinel setup
// is not enough: the master grants a lock, dies before its replica has it,
// and the promoted replica grants the same lock again while the first
// owner still holds it.
func TestSentinelFailoverHazard(t *testing.T) {
	t.Parallel()
	s := redistest.StartSentinel(t, 3)
	la := padlock.MustNew(t, s.Client(t))
	defer la.Close()
	ctx := ctxFor(t)
	key := testKey(t)

	cutReplication(t, s)
	a := mustAcquire(t, la, ctx, key, padlock.Options{TTL: 30 * time.Second, NoRenew: true})
	failover(t, s)

	lb := padlock.MustNew(t, s.Client(t))
	defer lb.Close()
	b, err := acquireAfterFailover(t, lb, key)
	if err != nil {
		t.Fatalf("after the failover, B's Acquire: got %v, want the lock (the promoted replica never saw A's)", err)
	}
	defer b.Release(ctx)
	if err := a.Err(); err != nil {
		t.Fatalf("A's lock: Err() = %v, want nil: A still believes it holds the lock", err)
	}
	t.Logf("A (fence %d) and B (fence %d) both hold %q: the failover lost A's lock", a.Fence(), b.Fence(), key)
	// Fences still tell them apart: they rise across the failover, so a
	// store that checks them rejects A's writes once B has written.
	if b.Fence() <= a.Fence() {
		t.Errorf("B's fence %d is not above A's %d after the failover", b.Fence(), a.Fence())
	}
}

// TestSentinelReplicaAckRefusesUnconfirmedLock replays the hazard with
// WithReplicaAck: A's acquisition fails instead of being lost later.
func TestSentinelReplicaAckRefusesUnconfirmedLock(t *testing.T) {
	t.Parallel()
	s := redistest.StartSentinel(t, 3)
	la := padlock.MustNew(t, s.Client(t), padlock.WithReplicaAck(1, 200*time.Millisecond))
	defer la.Close()
	ctx := ctxFor(t)
	key := testKey(t)

	cutReplication(t, s)
	_, err := la.Acquire(ctx, key, padlock.Options{TTL: 30 * time.Second})
	if !errors.Is(err, padlock.ErrUnavailable) || !strings.Contains(err.Error(), "replicas did not confirm") {
		t.Fatalf("A's Acquire with no replica listening: got %v, want ErrUnavailable saying replicas did not confirm", err)
	}
	for _, k := range s.Master().Keys(t) {
		if strings.HasPrefix(k, padlock.DefaultKeyPrefix+"{") { // not the fence counter
			t.Errorf("master holds lock key %q after the refused acquisition, want none", k)
		}
	}
	failover(t, s)

	lb := padlock.MustNew(t, s.Client(t))
	defer lb.Close()
	b, err := acquireAfterFailover(t, lb, key)
	if err != nil {
		t.Fatalf("after the failover, B's Acquire: %v", err)
	}
	_ = b.Release(ctx) // B is the only owner there ever was
}

// TestSentinelReplicaAckLockSurvivesFailover: a lock a replica confirmed
// is still held after that replica is promoted.
func TestSentinelReplicaAckLockSurvivesFailover(t *testing.T) {
	t.Parallel()
	s := redistest.StartSentinel(t, 3)
	la := padlock.MustNew(t, s.Client(t), padlock.WithReplicaAck(1, 800*time.Millisecond))
	defer la.Close()
	ctx := ctxFor(t)
	key := testKey(t)

	// A replica that is up may confirm late on a loaded machine: the
	// refused acquisition leaves nothing behind, so ask again.
	const lease = 30 * time.Second
	asked := time.Now()
	a, err := la.Acquire(ctx, key, padlock.Options{TTL: lease, NoRenew: true})
	for deadline := time.Now().Add(eventBound); errors.Is(err, padlock.ErrUnavailable) && time.Now().Before(deadline); {
		t.Logf("A's Acquire: %v; asking again", err)
		asked = time.Now()
		a, err = la.Acquire(ctx, key, padlock.Options{TTL: lease, NoRenew: true})
	}
	// left is at most what remains of A's lease in Redis, however long
	// the failover took: the lease began after A asked (less a second,
	// for the rounding of what Redis reports).
	left := func() time.Duration { return lease - time.Since(asked) - time.Second }
	if err != nil {
		t.Fatalf("A's Acquire: %v", err)
	}
	failover(t, s)

	lb := padlock.MustNew(t, s.Client(t))
	defer lb.Close()
	_, err = acquireAfterFailover(t, lb, key)
	if !errors.Is(err, padlock.ErrNotAcquired) {
		t.Fatalf("after the failover, B's Acquire of A's key: got %v, want ErrNotAcquired", err)
	}
	if d, ok := padlock.RetryAfter(err); !ok || d < left() {
		t.Errorf("RetryAfter = %v, %v; want A's remaining lease, at least %v", d, ok, left())
	}
	// A's lock lives on under A's token. (Extending it would fail now:
	// the new master has no replica left to confirm it.)
	var d time.Duration
	for deadline := time.Now().Add(eventBound); ; time.Sleep(50 * time.Millisecond) {
		if d, err = a.TTL(ctx); !errors.Is(err, padlock.ErrUnavailable) || time.Now().After(deadline) {
			break
		}
	}
	if err != nil || d < left() {
		t.Errorf("A's TTL() after the failover = %v, %v; want at least %v", d, err, left())
	}
}

// TestClusterReplicaAckWithoutReplicas: a Cluster of masters only cannot
// confirm a lock on a replica, so WithReplicaAck fails the acquisition,
// and leaves nothing behind, on every node.
func TestClusterReplicaAckWithoutReplicas(t *testing.T) {
	t.Parallel()
	c, l := startCluster(t, padlock.WithReplicaAck(1, 50*time.Millisecond))
	ctx := context.Background()
	for node, nodeKeys := range clusterKeys(l, 3, 1) {
		_, err := l.Acquire(ctx, nodeKeys[0], padlock.Options{})
		if !errors.Is(err, padlock.ErrUnavailable) || !strings.Contains(err.Error(), "0 of 1 acknowledged") {
			t.Errorf("node %d: Acquire: got %v, want padlock.ErrUnavailable saying no replica acknowledged", node, err)
		}
	}
	var set []string
	for _, nodeKeys := range clusterKeys(l, 3, 1) {
		set = append(set, nodeKeys[0]+":set")
	}
	if m, err := l.AcquireAll(ctx, set, padlock.Options{}); !errors.Is(err, padlock.ErrUnavailable) || !strings.Contains(err.Error(), "0 of 1 acknowledged") {
		_ = m.Release(ctx)
		t.Errorf("AcquireAll across the nodes: got %v, want padlock.ErrUnavailable saying no replica acknowledged", err)
	}
	for i, n := range c.Nodes() {
		for _, k := range n.Keys(t) {
			if strings.HasPrefix(k, padlock.DefaultKeyPrefix+"{") {
				t.Errorf("node %d holds lock key %q after the failed acquisitions, want none", i, k)
			}
		}
	}
}
