package padlock

import (
	"context"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// batchRecorder is a store whose renewals always succeed, recording the
// size of each batch the watchdog sends. Only renew is called.
type batchRecorder struct {
	store
	want  int           // renewals to see before all is closed
	all   chan struct{} // closed once want renewals were settled
	mu    sync.Mutex
	sizes []int
	seen  int
}

func (b *batchRecorder) renew(_ context.Context, batch []renewal, settled func(idx []int)) {
	idx := make([]int, len(batch))
	for i := range batch {
		batch[i].ok = true
		idx[i] = i
	}
	settled(idx)
	b.mu.Lock()
	defer b.mu.Unlock()
	b.sizes = append(b.sizes, len(batch))
	if b.seen += len(batch); b.seen == b.want {
		close(b.all)
	}
}

// TestRenewalBatchesAreBounded: when more renewals are due at once than one
// batch carries, they go in several batches of at most maxRenewBatch, every
// one of them, and each lease is renewed.
func TestRenewalBatchesAreBounded(t *testing.T) {
	const n, ttl = 2*maxRenewBatch + 500, time.Minute
	rec := &batchRecorder{want: n, all: make(chan struct{})}
	cfg, err := lockerConfig(nil)
	if err != nil {
		t.Fatal(err)
	}
	client := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"}) // never dialled
	t.Cleanup(func() { client.Close() })
	l := newLocker(rec, client, keyspace{prefix: "padlock:"}, cfg)
	t.Cleanup(func() { l.Close() })
	sent := time.Now()
	locks := make([]*Lock, n)
	for i := range locks {
		locks[i] = newLock(l, "k"+strconv.Itoa(i), &lockID{}, 1, Options{TTL: ttl}, sent, sent)
		if !l.watchdog.add(locks[i].lease) {
			t.Fatal("watchdog closed")
		}
	}
	// Every lease is due: the tick comes a third into the lease.
	l.watchdog.tick(sent.Add(ttl/3 + time.Second))
	<-rec.all
	rec.mu.Lock()
	sizes := slices.Clone(rec.sizes)
	rec.mu.Unlock()
	if len(sizes) != 3 || slices.Max(sizes) > maxRenewBatch {
		t.Fatalf("batches of %v for %d renewals due at once, want 3 of at most %d", sizes, n, maxRenewBatch)
	}
	l.watchdog.mu.Lock()
	defer l.watchdog.mu.Unlock()
	for _, lk := range locks {
		if lk.lease.renewals != 1 || lk.lease.inFlight {
			t.Fatalf("lease %s: %d renewals confirmed (in flight: %v), want 1", lk.key, lk.lease.renewals, lk.lease.inFlight)
		}
	}
}
