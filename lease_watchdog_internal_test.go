package padlock

import (
	"context"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
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
// pace apart), and every lease is renewed. It runs on virtual time: a
// tick the machine's load delays is not what this checks.
func TestRenewalBatchesAreBounded(t *testing.T) {
	synctest.Test(t, testRenewalBatchesAreBounded)
}

func testRenewalBatchesAreBounded(t *testing.T) {
	rec := &batchRecorder{}
	const n, ttl = 2*maxRenewBatch + 500, time.Minute
	l, locks := heldFor(t, rec, n, ttl, ttl/3+time.Second) // due a second ago
	<-rec.all
	rec.settled.Wait()
	rec.mu.Lock()
	sizes := slices.Clone(rec.sizes)
	rec.mu.Unlock()
	if want := (n + maxRenewBatch - 1) / maxRenewBatch; len(sizes) != want || slices.Max(sizes) > maxRenewBatch {
		t.Fatalf("batches of %v for %d renewals due at once, want %d of at most %d", sizes, n, want, maxRenewBatch)
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

// scheduled returns a Locker on rec and n locks of lease ttl, lock i taken
// i µs after the one before, the last ago, scheduled in its watchdog
// without its loop running: the test calls tick itself, once (one batch
// to send).
func scheduled(t *testing.T, rec *batchRecorder, n int, ttl, ago time.Duration) (*Locker, []*Lock) {
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
	rec.settled.Add(1)
	last := time.Now().Add(-ago)
	locks := make([]*Lock, n)
	l.watchdog.mu.Lock()
	defer l.watchdog.mu.Unlock()
	for i := range locks {
		sent := last.Add(-time.Duration(n-1-i) * time.Microsecond)
		locks[i] = newLock(l, "k"+strconv.Itoa(i), &lockID{}, 1, Options{TTL: ttl}, sent, sent)
		l.watchdog.schedule(locks[i].lease)
	}
	return l, locks
}

// putOffTimes returns the times the renewals of locks that tick put off were
// scheduled for, in the locks' order, and how many went at once.
func putOffTimes(l *Locker, locks []*Lock) (at []time.Time, sent int) {
	l.watchdog.mu.Lock()
	defer l.watchdog.mu.Unlock()
	for _, lk := range locks {
		if lk.lease.inFlight {
			sent++
			continue
		}
		at = append(at, lk.lease.renewAt)
	}
	return at, sent
}

// TestPutOffRenewalsWaitForTheirBatch: when more renewals with time to
// spare are due at once than a batch carries, one tick sends a full batch
// and puts each of the others off once, to the batch it will go in: at
// most maxRenewBatch to a batch, the batches a pace apart, in the order
// the renewals fell due. A later tick finds only its own batch due, so a
// backlog of renewals costs each tick no more than the batch it sends.
func TestPutOffRenewalsWaitForTheirBatch(t *testing.T) {
	rec := &batchRecorder{hold: make(chan struct{})}
	defer close(rec.hold)
	const n, ttl = 3*maxRenewBatch + 500, time.Minute
	l, locks := scheduled(t, rec, n, ttl, ttl/3+time.Second) // due a second ago
	w := l.watchdog
	w.tick(time.Now())
	at, sent := putOffTimes(l, locks)
	if sent != maxRenewBatch {
		t.Fatalf("%d renewals sent at once, want a full batch of %d", sent, maxRenewBatch)
	}
	w.mu.Lock()
	pace, first, next := w.pace, w.paceUntil, w.leases[0].time()
	w.mu.Unlock()
	if !next.Equal(first) {
		t.Fatalf("the next event is %v after the pace ends, want the first batch put off, when it ends", next.Sub(first))
	}
	for i, a := range at {
		want := first.Add(time.Duration(i/maxRenewBatch) * pace)
		if !a.Equal(want) {
			t.Fatalf("renewal %d put off by %v, want %v (batch %d, a pace of %v apart)", i, a.Sub(first), want.Sub(first), i/maxRenewBatch, pace)
		}
	}
}

// TestPutOffNoFurtherThanShortOfTrust: a renewal is put off no further
// than the moment its lease has TTL/3 of trust left, however many batches
// go before it; from then on it waits for nothing.
func TestPutOffNoFurtherThanShortOfTrust(t *testing.T) {
	rec := &batchRecorder{hold: make(chan struct{})}
	defer close(rec.hold)
	const n, ttl = 3*maxRenewBatch + 500, time.Second
	l, locks := scheduled(t, rec, n, ttl, 0)
	w := l.watchdog
	w.mu.Lock()
	w.pace = maxPace
	// Now is when the last lock has TTL/3 and a little more than a pace
	// of trust left: one batch fits in before it runs short, not three.
	now := locks[n-1].lease.validUntil.Add(-ttl/3 - maxPace - 10*time.Millisecond)
	w.mu.Unlock()
	w.tick(now)
	at, _ := putOffTimes(l, locks)
	w.mu.Lock()
	defer w.mu.Unlock()
	later := 0
	for i, lk := range locks[n-len(at):] {
		if short := lk.lease.validUntil.Add(-ttl / 3); at[i].After(short) {
			t.Fatalf("renewal %d put off %v past the moment its lease runs short of trust", i, at[i].Sub(short))
		}
		if at[i].After(w.paceUntil) {
			later++
		}
	}
	if later == 0 {
		t.Fatal("every renewal put off to the first batch: the test shows nothing")
	}
}

// TestFullBatchOfEarlyRenewalsPacesTheNext: a tick that fills a batch with
// renewals riding along early (due within TTL/6, none of them yet due)
// makes the next batch wait a pace, like a batch that overflowed does: a
// tick that follows at once sends nothing more, so that batches of early
// renewals do not pile up in Redis one on another.
func TestFullBatchOfEarlyRenewalsPacesTheNext(t *testing.T) {
	rec := &batchRecorder{hold: make(chan struct{})}
	defer close(rec.hold)
	const n, ttl = 2 * maxRenewBatch, time.Minute
	l, locks := scheduled(t, rec, n, ttl, ttl/3-time.Second) // due in a second
	w := l.watchdog
	now := time.Now()
	w.tick(now)
	if _, sent := putOffTimes(l, locks); sent != maxRenewBatch {
		t.Fatalf("%d renewals sent by the first tick, want a full batch of %d", sent, maxRenewBatch)
	}
	w.mu.Lock()
	paceUntil := w.paceUntil
	w.mu.Unlock()
	if !paceUntil.After(now) {
		t.Fatal("a full batch of early renewals set no pace for the next")
	}
	w.tick(now.Add((paceUntil.Sub(now)) / 2))
	if _, sent := putOffTimes(l, locks); sent != maxRenewBatch {
		t.Fatalf("%d renewals sent within the pace, want still %d: the next batch went at once", sent, maxRenewBatch)
	}
}

// TestHandOffKeepsRenewing hands a short-lease lock round and round among
// goroutines of one Locker for several leases: the watchdog must go on
// renewing it through every hand-off, including those that happen while a
// renewal is on its way, and nobody may ever find it lost or shared. It
// runs in a bubble.
func TestHandOffKeepsRenewing(t *testing.T) {
	inBubble(t, func(t *testing.T, b *bubble) {
		l := b.locker(b.client())
		ctx := context.Background()
		const key, workers = "round", 4
		// Short leases so that hand-offs span renewals, long enough that a
		// loaded machine renews in time.
		o := Options{TTL: 800 * time.Millisecond, Wait: 10 * time.Second}
		var (
			inside atomic.Int32
			wg     sync.WaitGroup
			mu     sync.Mutex
			runs   = map[*lease]int{} // acquisitions per Redis lock (a hand-off moves its lease on)
		)
		stop := time.Now().Add(8 * o.TTL) // eight leases
		for range workers {
			wg.Go(func() {
				for time.Now().Before(stop) {
					lk, err := l.Acquire(ctx, key, o)
					if err != nil {
						t.Error(err)
						return
					}
					mu.Lock()
					runs[lk.lease]++
					mu.Unlock()
					if inside.Add(1) != 1 {
						t.Error("two holders at once")
					}
					time.Sleep(20 * time.Millisecond) // hand-offs span renewals
					inside.Add(-1)
					if err := lk.Err(); err != nil {
						t.Errorf("lock ended while held: %v", err)
					}
					if err := lk.Release(ctx); err != nil {
						t.Errorf("release: %v", err)
					}
				}
			})
		}
		wg.Wait()
		longest := 0
		for _, n := range runs {
			longest = max(longest, n)
		}
		// 20ms holds, renewed every 50ms: a lock held by 4 or more holders in
		// a row was renewed while being handed on.
		if longest < 4 {
			t.Fatalf("the most holders one Redis lock was handed to was %d; want a run long enough to span renewals", longest)
		}
	})
}

// TestExtendFollowsHandOff has an Extend of the releasing handle land after
// the lock was handed on: the new holder must trust the lease that Extend
// may have set in Redis, not the one it inherited.
func TestExtendFollowsHandOff(t *testing.T) {
	l, _, _ := startLocker(t)
	ctx := context.Background()
	holder, got := holderWithWaiter(t, l, "late-extend", Options{Wait: 30 * time.Second})
	// What Extend does before it sends its PEXPIRE of the shared token,
	// with the lease the waiter asked for, so the lock may be handed on.
	seq, _, _ := l.watchdog.begin(holder.lease, holder, DefaultTTL, true)
	sent := time.Now()
	if err := holder.Release(ctx); err != nil {
		t.Fatal(err)
	}
	h := <-got
	if h.lk == nil || h.lk.lease != holder.lease {
		t.Fatal("the lock was not handed on")
	}
	defer h.lk.Release(ctx)
	// Its reply is lost after the hand-off: it may run at any time.
	l.watchdog.settle(holder.lease, seq, false)
	l.watchdog.mu.Lock()
	until := h.lk.lease.validUntil
	l.watchdog.mu.Unlock()
	if until.After(sent.Add(DefaultTTL)) {
		t.Fatalf("new holder trusts its lease until %v after the Extend was sent; want at most %v", until.Sub(sent), DefaultTTL)
	}
}
