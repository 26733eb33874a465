package padlock

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/padlockgo/padlock/internal/redistest"
)

// WithReplicaAck waits for the replicas after every write that takes a
// lock, AcquireAll's included: on a server with no replica, AcquireAll
// fails as Acquire does, and leaves no key of its set behind. (AcquireAll
// once took its set with no WAIT: a failover could lose it to a second
// owner while the first held the MultiLock.)
func TestAcquireAllWaitsForReplicas(t *testing.T) {
	t.Parallel()
	l, _, rdb := startLocker(t, WithReplicaAck(1, 50*time.Millisecond))
	ctx := ctxFor(t)
	keys := []string{testKey(t) + ":a", testKey(t) + ":b"}
	m, err := l.AcquireAll(ctx, keys, Options{})
	if err == nil {
		_ = m.Release(ctx)
		t.Fatal("AcquireAll with no replica to acknowledge it succeeded, want ErrUnavailable")
	}
	if !errors.Is(err, ErrUnavailable) || !strings.Contains(err.Error(), "0 of 1 acknowledged") {
		t.Errorf("AcquireAll: got %v, want ErrUnavailable saying no replica acknowledged", err)
	}
	// The give-back is sent again behind the caller until Redis answers
	// (multiAcquisition.releaseAnswered): on a loaded machine the first
	// sends may time out, so the keys go within a clean-up's resends, not
	// always before AcquireAll returns.
	deadline := time.Now().Add(10 * time.Second)
	for _, k := range keys {
		for {
			n, err := rdb.Exists(ctx, l.keys.lock(k)).Result()
			if err == nil && n == 0 {
				break
			}
			if time.Now().After(deadline) {
				t.Errorf("%s is left behind after the refused AcquireAll (%d, %v)", k, n, err)
				break
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
}

// TestReplicaAckLostExtend: with WithReplicaAck, a shorter Extend that ran
// on the master but that no replica confirmed fails with ErrUnavailable;
// the master holds the shorter lease all the same, and once the holder
// has given its lock up as lost another Locker takes the key. It runs
// beside other tests: its servers are its own, and no load can make an
// unconfirmed Extend confirmed or a lease longer. Every wait in it is for
// an event, bounded far beyond what the event takes on a quiet machine.
// Regression: the other Locker waited shorter+2s, a guess that load beat:
// the holder's renewals, unconfirmed but run on the master, push the key's
// end on until the holder's trust runs out, and the last of them may run
// late, so the key can outlive the holder's lock by more than a lease.
func TestReplicaAckLostExtend(t *testing.T) {
	t.Parallel()
	srvs := redistest.StartN(t, 2)
	master, replica := srvs[0], srvs[1]
	if !master.Real() {
		t.Skip("needs redis-servers to replicate and pause")
	}
	ctx := context.Background()
	host, port, _ := strings.Cut(master.Addr(), ":")
	rc := replica.Client(t)
	if err := rc.ReplicaOf(ctx, host, port).Err(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		info, _ := rc.Info(ctx, "replication").Result()
		if strings.Contains(info, "master_link_status:up") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("replica not in sync: %s", info)
		}
		time.Sleep(20 * time.Millisecond)
	}
	// The replica's link is up before the master counts its acks: wait
	// until one write is acknowledged, so that the acquisition below does
	// not meet a replica still starting to stream. WAIT counts the acks of
	// its own connection's writes: one conn for the write and the WAITs,
	// each well under the client's 1s ReadTimeout.
	rdb := master.Client(t)
	conn := rdb.Conn()
	defer conn.Close()
	if err := conn.Set(ctx, "warm", "1", 0).Err(); err != nil {
		t.Fatal(err)
	}
	for {
		if n, err := conn.Do(ctx, "WAIT", 1, 100).Int64(); err == nil && n == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the replica never acknowledged a write")
		}
	}
	l := mustNew(t, rdb, WithReplicaAck(1, 800*time.Millisecond)) // under the 1s ReadTimeout, with slack for a loaded machine
	defer l.Close()
	// A replica that is up may still confirm late on a loaded machine:
	// the refused acquisition leaves nothing behind, so ask again.
	lk, err := l.Acquire(ctx, "acked", Options{TTL: 10 * time.Second})
	for errors.Is(err, ErrUnavailable) && time.Now().Before(deadline) {
		t.Logf("Acquire: %v; asking again", err)
		lk, err = l.Acquire(ctx, "acked", Options{TTL: 10 * time.Second})
	}
	if err != nil {
		t.Fatal(err)
	}
	defer lk.Release(ctx)
	replica.Pause(t)
	defer replica.Resume(t)
	// Shorter than the 10s in force, and long enough to outlast the WAIT
	// and the TTL read after it on a loaded machine.
	const shorter = 3 * time.Second
	if err := lk.Extend(ctx, shorter); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("Extend no replica confirmed: %v, want ErrUnavailable", err)
	}
	if d, err := lk.TTL(ctx); err != nil || d > shorter {
		t.Fatalf("lease on the master after the unconfirmed Extend: %v, %v; want at most %v", d, err, shorter)
	}
	// No renewal can be confirmed now, so the holder's trust runs out
	// within shorter and its lock is lost; the key ends a lease after the
	// last renewal the master ran. The other Locker waits for that
	// release, with a bound no loaded machine reaches (it returns as
	// soon as the key is free), and must not get the key while the
	// holder still reports it held.
	contend(t, master.Client(t), "acked", lk, 10*shorter)
	if lk.Err() == nil {
		t.Error("the holder still reports its lock held, with no renewal confirmed for over its lease")
	}
}

// TestHoldsReplicaAckWithoutReplicas: on a server with no replica,
// WithReplicaAck cannot confirm a permit, a read or a write hold, so each
// acquisition fails with ErrUnavailable and leaves nothing held behind.
// It runs beside other tests: its server is its own, and with no replica
// no load can make a write acknowledged.
func TestHoldsReplicaAckWithoutReplicas(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	l, s := newSemaphore(t, srv.Client(t), 2, WithReplicaAck(1, 50*time.Millisecond))
	ctx := context.Background()
	for _, tc := range []struct {
		name    string
		acquire func() (*Lock, error)
	}{
		{"permit", func() (*Lock, error) { return s.Acquire(ctx, "k", Options{}) }},
		{"read", func() (*Lock, error) { return l.AcquireRead(ctx, "k", Options{}) }},
		{"write", func() (*Lock, error) { return l.AcquireWrite(ctx, "k", Options{}) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := tc.acquire(); !errors.Is(err, ErrUnavailable) {
				t.Fatalf("got %v, want ErrUnavailable", err)
			}
		})
	}
	if keys := srv.Keys(t); len(keys) != 1 || keys[0] != "padlock:fence" {
		t.Errorf("keys left in Redis: got %v, want only the fence counter", keys)
	}
}
