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
// size of each batch the watchdog sends; with hold set, each renew waits
// until hold is closed. Only renew is called.
type batchRecorder struct {
	store
	hold    chan struct{} // nil: answer at once
	want    int           // renewals to see before all is closed
	all     chan struct{} // closed once want renewals were sent
	mu      sync.Mutex
	sizes   []int
	sent    []time.Time // when each batch was begun (its tick)
	seen    int
	settled sync.WaitGroup
}

func (b *batchRecorder) renew(_ context.Context, batch []renewal, settled func(idx []int)) {
	b.mu.Lock()
	b.sizes = append(b.sizes, len(batch))
	b.sent = append(b.sent, batch[0].sent)
	if b.seen += len(batch); b.seen == b.want {
		close(b.all)
	}
	b.mu.Unlock()
	if b.hold != nil {
		<-b.hold
	}
	idx := make([]int, len(batch))
	for i := range batch {
		batch[i].ok = true
		idx[i] = i
	}
	settled(idx)
	b.settled.Done()
}

// heldFor returns a Locker on rec and n locks of lease ttl that it took
// ago, all watched by its watchdog.
func heldFor(t *testing.T, rec *batchRecorder, n int, ttl, ago time.Duration) (*Locker, []*Lock) {
	t.Helper()
	cfg, err := lockerConfig(nil)
	if err != nil {
		t.Fatal(err)
	}
	client := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"}) // never dialled
	t.Cleanup(func() { client.Close() })
	l := newLocker(rec, client, keyspace{prefix: "padlock:"}, cfg)
	t.Cleanup(func() { l.Close() })
	rec.want, rec.all = n, make(chan struct{})
	sent := time.Now().Add(-ago)
	locks := make([]*Lock, n)
	for i := range locks {
		locks[i] = newLock(l, "k"+strconv.Itoa(i), &lockID{}, 1, Options{TTL: ttl}, sent, sent)
	}
	// Watched all at once, so that every renewal is due at the same
	// tick: the loop starts with the last one.
	l.watchdog.mu.Lock()
	for _, lk := range locks[1:] {
		l.watchdog.schedule(lk.lease)
	}
	l.watchdog.mu.Unlock()
	rec.settled.Add((n + maxRenewBatch - 1) / maxRenewBatch)
	if !l.watchdog.add(locks[0].lease) {
		t.Fatal("watchdog closed")
	}
	return l, locks
}

// checkRenewed fails unless every lock's lease was renewed once, and
// not more.
func checkRenewed(t *testing.T, l *Locker, locks []*Lock) {
	t.Helper()
	l.watchdog.mu.Lock()
	defer l.watchdog.mu.Unlock()
	for _, lk := range locks {
		if lk.lease.renewals != 1 || lk.lease.inFlight {
			t.Fatalf("lease %s: %d renewals confirmed (in flight: %v), want 1", lk.key, lk.lease.renewals, lk.lease.inFlight)
		}
	}
}

// TestRenewalBatchesAreBounded: when more renewals are due at once than one
// batch carries, with time to spare, they go in batches of at most
// maxRenewBatch, one after another (each from its own tick, at least the
// pace apart), and every lease is renewed.
func TestRenewalBatchesAreBounded(t *testing.T) {
	rec := &batchRecorder{}
	const n, ttl = 2*maxRenewBatch + 500, time.Minute
	l, locks := heldFor(t, rec, n, ttl, ttl/3+time.Second) // due a second ago
	<-rec.all
	rec.settled.Wait()
	rec.mu.Lock()
	sizes := slices.Clone(rec.sizes)
	rec.mu.Unlock()
	if len(sizes) != 3 || slices.Max(sizes) > maxRenewBatch {
		t.Fatalf("batches of %v for %d renewals due at once, want 3 of at most %d", sizes, n, maxRenewBatch)
	}
	// Each batch is renewed on a goroutine of its own, so the recorder may
	// see them in any order: compare their ticks in the order they came.
	begun := slices.SortedFunc(slices.Values(rec.sent), func(a, b time.Time) int { return a.Compare(b) })
	for i := 1; i < len(begun); i++ {
		if gap := begun[i].Sub(begun[i-1]); gap < minPace {
			t.Fatalf("batch %d begun %v after the one before, want at least %v", i, gap, minPace)
		}
	}
	checkRenewed(t, l, locks)
}

// TestShortTrustRenewalsGoAtOnce: renewals due at once whose leases have
// less than TTL/3 of trust left wait for nothing: every batch is begun at
// the same tick, and sent while the first is still on its way.
func TestShortTrustRenewalsGoAtOnce(t *testing.T) {
	rec := &batchRecorder{hold: make(chan struct{})}
	const n, ttl = 2*maxRenewBatch + 500, time.Minute
	l, locks := heldFor(t, rec, n, ttl, 3*ttl/4) // a quarter of the lease left
	<-rec.all                                    // every renewal sent, none answered yet
	close(rec.hold)
	rec.settled.Wait()
	rec.mu.Lock()
	sizes := slices.Clone(rec.sizes)
	rec.mu.Unlock()
	if slices.Max(sizes) > maxRenewBatch {
		t.Fatalf("batches of %v, want at most %d each", sizes, maxRenewBatch)
	}
	for i, at := range rec.sent {
		if !at.Equal(rec.sent[0]) {
			t.Fatalf("batch %d begun %v after the first: it waited", i, at.Sub(rec.sent[0]))
		}
	}
	checkRenewed(t, l, locks)
}
