package padlock

import (
	"context"
	"errors"
	"fmt"
	"math/rand"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestLeaseTrust plays lease changes in the orders Redis may run and answer
// them, on a clock the test drives, and checks the trusted end against the
// earliest end Redis can have set. The margin is 0, so the trusted end is
// exactly that bound.
func TestLeaseTrust(t *testing.T) {
	t0 := time.Unix(1000, 0)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	ms := func(n int) time.Duration { return time.Duration(n) * time.Millisecond }

	type step struct {
		at     int    // ms after the acquire was sent
		begin  string // name a change begun now...
		ttl    int    // ...with this lease in ms
		settle string // or settle the change of this name...
		lost   bool   // ...as unanswered (else as confirmed)
	}
	cases := []struct {
		name  string
		ttl   int // the acquire's lease, sent at 0 and answered at 1
		steps []step
		want  int // the trusted end, ms after 0
	}{
		{
			name:  "acquire alone",
			ttl:   300,
			steps: nil,
			want:  300,
		},
		{
			name: "renewal confirmed",
			ttl:  300,
			steps: []step{
				{at: 100, begin: "r", ttl: 300},
				{at: 101, settle: "r"},
			},
			want: 400,
		},
		{
			// The renewal, with the old lease, ran after the Extend but
			// answered first; the Extend's answer came last.
			name: "Extend racing renewal, renewal answered first",
			ttl:  30,
			steps: []step{
				{at: 5, begin: "ext", ttl: 3000},
				{at: 10, begin: "r", ttl: 30},
				{at: 11, settle: "r"},
				{at: 12, settle: "ext"},
			},
			want: 40, // the renewal may have run last: 10 + 30
		},
		{
			name: "Extend racing renewal, Extend answered first",
			ttl:  30,
			steps: []step{
				{at: 5, begin: "r", ttl: 30},
				{at: 8, begin: "ext", ttl: 3000},
				{at: 9, settle: "ext"},
				{at: 12, settle: "r"},
			},
			want: 3008, // the renewal, numbered below the Extend, is refused if it runs after it
		},
		{
			name: "two Extends, the longer answered last",
			ttl:  30000,
			steps: []step{
				{at: 10, begin: "long", ttl: 30000},
				{at: 50, begin: "short", ttl: 2000},
				{at: 51, settle: "short"},
				{at: 300, settle: "long"},
			},
			want: 2050,
		},
		{
			name: "two Extends, the shorter answered last",
			ttl:  30000,
			steps: []step{
				{at: 10, begin: "short", ttl: 2000},
				{at: 50, begin: "long", ttl: 30000},
				{at: 51, settle: "long"},
				{at: 300, settle: "short"},
			},
			want: 30050, // the shorter ran before the longer, or was refused after it
		},
		{
			name: "shorter Extend lost",
			ttl:  10000,
			steps: []step{
				{at: 100, begin: "ext", ttl: 1000},
				{at: 300, settle: "ext", lost: true},
			},
			want: 1100,
		},
		{
			// A lost change may still run, but Redis refuses it once a
			// later change ran: the confirmed renewal alone decides.
			name: "shorter Extend lost, then renewed",
			ttl:  10000,
			steps: []step{
				{at: 100, begin: "ext", ttl: 1000},
				{at: 300, settle: "ext", lost: true},
				{at: 400, begin: "r", ttl: 10000},
				{at: 401, settle: "r"},
			},
			want: 10400,
		},
		{
			name: "longer Extend lost",
			ttl:  1000,
			steps: []step{
				{at: 100, begin: "ext", ttl: 10000},
				{at: 300, settle: "ext", lost: true},
			},
			want: 1000,
		},
		{
			// Answered before the next renewal was sent: it ran before
			// that renewal, which alone decides.
			name: "Extend settled before the next renewal",
			ttl:  30,
			steps: []step{
				{at: 5, begin: "r", ttl: 30},
				{at: 8, begin: "ext", ttl: 3000},
				{at: 9, settle: "ext"},
				{at: 12, settle: "r"},
				{at: 20, begin: "r2", ttl: 3000},
				{at: 21, settle: "r2"},
			},
			want: 3020,
		},
		{
			name: "renewal in flight shorter than the anchor",
			ttl:  3000,
			steps: []step{
				{at: 100, begin: "r", ttl: 50},
			},
			want: 150,
		},
		{
			name: "renewal unanswered for now",
			ttl:  300,
			steps: []step{
				{at: 100, begin: "r", ttl: 300},
			},
			want: 300,
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var ls lease
			ls.init(nil, nil, ms(c.ttl), true, at(0), at(1), func(time.Duration) time.Duration { return 0 })
			seqs := map[string]uint64{}
			for _, s := range c.steps {
				if s.begin != "" {
					seqs[s.begin] = ls.begin(ms(s.ttl), at(s.at))
					continue
				}
				ls.settle(seqs[s.settle], !s.lost, at(s.at))
			}
			if got := ls.validUntil.Sub(t0); got != ms(c.want) {
				t.Fatalf("trusted end %v, want %v", got, ms(c.want))
			}
			if !ls.renewAt.Before(ls.validUntil) {
				t.Fatalf("renewal due at %v, not before the trusted end %v", ls.renewAt.Sub(t0), ls.validUntil.Sub(t0))
			}
		})
	}
}

// TestLeaseConfirmedSince: a hand-off needs a confirmation sent after the
// next holder asked.
func TestLeaseConfirmedSince(t *testing.T) {
	t0 := time.Unix(1000, 0)
	var ls lease
	ls.init(nil, nil, time.Second, true, t0, t0.Add(time.Millisecond), func(time.Duration) time.Duration { return 0 })
	asked := t0.Add(10 * time.Millisecond)
	if ls.confirmedSince(asked) {
		t.Fatal("confirmed since a waiter asked after the acquire was sent")
	}
	seq := ls.begin(time.Second, asked) // sent at the same instant: not after
	ls.settle(seq, true, asked.Add(time.Millisecond))
	if ls.confirmedSince(asked) {
		t.Fatal("confirmed by a change sent when the waiter asked, not after")
	}
	seq = ls.begin(time.Second, asked.Add(time.Microsecond))
	if ls.confirmedSince(asked) {
		t.Fatal("confirmed by a change not yet answered")
	}
	ls.settle(seq, false, asked.Add(time.Millisecond))
	if ls.confirmedSince(asked) {
		t.Fatal("confirmed by a change that was lost")
	}
	seq = ls.begin(time.Second, asked.Add(2*time.Millisecond))
	ls.settle(seq, true, asked.Add(3*time.Millisecond))
	if !ls.confirmedSince(asked) {
		t.Fatal("not confirmed by a change sent after the waiter asked and confirmed")
	}
}

// TestLeaseOrderedRetiresLostChanges: Redis refuses a change numbered
// below one it applied (lua/grant.lua), so a lost shorter change bounds
// the trust only until a later change is confirmed. A confirmed change
// numbered below the anchor, answered late, changes nothing.
func TestLeaseOrderedRetiresLostChanges(t *testing.T) {
	t0 := time.Unix(1000, 0)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	noMargin := func(time.Duration) time.Duration { return 0 }
	var ls lease
	ls.init(nil, nil, time.Second, true, t0, at(1), noMargin)
	short := ls.begin(50*time.Millisecond, at(10)) // an Extend(50ms)...
	ls.settle(short, false, at(20))                // ...whose reply was lost
	if want := at(60); !ls.validUntil.Equal(want) {
		t.Fatalf("trust after the lost Extend = %v, want %v", ls.validUntil.Sub(t0), want.Sub(t0))
	}
	renewal := ls.begin(time.Second, at(30))
	late := ls.begin(2*time.Second, at(31)) // sent after, answered first
	ls.settle(late, true, at(35))
	ls.settle(renewal, true, at(40))
	// Refused if it runs now; the anchor is the latest change.
	if want := at(31 + 2000); !ls.validUntil.Equal(want) {
		t.Errorf("trust after a later change confirmed = %v, want %v", ls.validUntil.Sub(t0), want.Sub(t0))
	}
}

// TestLeaseTrustBruteForce derives the earliest moment the key can leave
// Redis independently of lease.go: it tries every time at which each lease
// change may have run (on a quarter-millisecond grid), keeps the executions
// that agree with what the client saw (a confirmed change ran after it was
// sent and before its answer, while the token still held the key; an
// unanswered or lost one ran after it was sent, or never), and takes the
// first expiry of the key. Redis applies a change only if it is numbered
// above the last one it applied (lua/grant.lua). After every step of random sequences of begin
// and settle, the trusted end must not be later than that.
func TestLeaseTrustBruteForce(t *testing.T) {
	const (
		q      = 4 // grid points per millisecond
		cases  = 400
		extra  = 3 // ms past the last step that unanswered changes may run
		maxMs  = 9
		maxChg = 3
	)
	ttls := []int{2, 3, 6, 15}
	rng := rand.New(rand.NewSource(13))
	t0 := time.Unix(1000, 0)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }

	type change struct {
		ttl, sent, answered int // ms; answered -1: not (yet)
		lost                bool
		seq                 uint64 // the number begin gave it; 0: the acquire
	}
	type event struct {
		at     int
		idx    int // change index (1-based; 0 is the acquire)
		settle bool
	}

	// bound returns the earliest first expiry, in grid units, over the
	// executions that agree with chg as seen at now (ms), and whether any
	// execution agrees.
	bound := func(chg []change, now int) (int, bool) {
		n := len(chg)
		opts := make([][]int, n) // run times; -1: never
		for i, c := range chg {
			lo := c.sent*q + 1
			switch {
			case c.answered >= 0 && !c.lost:
				for r := lo; r < c.answered*q; r++ {
					opts[i] = append(opts[i], r)
				}
			default:
				opts[i] = append(opts[i], -1)
				for r := lo; r <= (now+extra)*q; r++ {
					opts[i] = append(opts[i], r)
				}
			}
		}
		best, found := 0, false
		runs := make([]int, n)
		order := make([]int, 0, n)
		var rec func(i int)
		rec = func(i int) {
			if i < n {
				for _, r := range opts[i] {
					runs[i] = r
					rec(i + 1)
				}
				return
			}
			order = order[:0]
			for j := range n {
				if runs[j] >= 0 {
					order = append(order, j)
				}
			}
			slices.SortFunc(order, func(a, b int) int { return runs[a] - runs[b] })
			for k := 1; k < len(order); k++ {
				if runs[order[k]] == runs[order[k-1]] {
					return // a finer grid point gives either order
				}
			}
			if len(order) == 0 || order[0] != 0 {
				return // the acquire ran first: nothing else could find the token
			}
			end, gone, applied := runs[0]+chg[0].ttl*q, false, 0
			for _, j := range order[1:] {
				if !gone && runs[j] < end {
					// Redis applies a change numbered above the last it
					// applied, and refuses (but answers held to) an older one.
					if chg[j].seq > chg[applied].seq {
						end, applied = runs[j]+chg[j].ttl*q, j
					}
					continue
				}
				if chg[j].answered >= 0 && !chg[j].lost {
					return // confirmed, so it found the token: not this way
				}
				gone = true // the key is gone; later changes fail
			}
			if !found || end < best {
				best, found = end, true
			}
		}
		rec(0)
		return best, found
	}

	for n := range cases {
		k := 1 + rng.Intn(maxChg)
		chg := []change{{ttl: ttls[rng.Intn(len(ttls))], sent: 0, answered: 1}}
		var evs []event
		for i := 1; i <= k; i++ {
			c := change{ttl: ttls[rng.Intn(len(ttls))], sent: 1 + rng.Intn(maxMs-1), answered: -1}
			chg = append(chg, c)
			evs = append(evs, event{at: c.sent, idx: i})
			switch rng.Intn(3) {
			case 0: // never settled
			case 1, 2:
				a := c.sent + 1 + rng.Intn(maxMs-c.sent)
				evs = append(evs, event{at: a, idx: i, settle: true})
			}
		}
		slices.SortStableFunc(evs, func(a, b event) int { return a.at - b.at })
		// What the client knew at each step; settle outcomes drawn now.
		lostOf := map[int]bool{}
		for _, e := range evs {
			if e.settle {
				lostOf[e.idx] = rng.Intn(3) == 0
			}
		}

		var ls lease
		ls.init(nil, nil, time.Duration(chg[0].ttl)*time.Millisecond, true, at(0), at(1), func(time.Duration) time.Duration { return 0 })
		seen := make([]change, 1, k+1)
		seen[0] = chg[0]
		seqs := map[int]uint64{}
		var log strings.Builder
		fmt.Fprintf(&log, "acquire ttl %d sent 0 answered 1\n", chg[0].ttl)
		for _, e := range evs {
			if !e.settle {
				seqs[e.idx] = ls.begin(time.Duration(chg[e.idx].ttl)*time.Millisecond, at(e.at))
				for len(seen) <= e.idx {
					seen = append(seen, change{answered: -1})
				}
				seen[e.idx] = change{ttl: chg[e.idx].ttl, sent: e.at, answered: -1, seq: seqs[e.idx]}
				fmt.Fprintf(&log, "at %d begin c%d ttl %d\n", e.at, e.idx, chg[e.idx].ttl)
			} else {
				lost := lostOf[e.idx]
				ls.settle(seqs[e.idx], !lost, at(e.at))
				seen[e.idx].answered, seen[e.idx].lost = e.at, lost
				fmt.Fprintf(&log, "at %d settle c%d lost=%v\n", e.at, e.idx, lost)
			}
			// Changes begun later are not known yet; they cannot have run.
			known := make([]change, 0, len(seen))
			for _, c := range seen {
				if c.ttl > 0 {
					known = append(known, c)
				}
			}
			b, ok := bound(known, e.at)
			if !ok {
				break // the observations cannot happen together
			}
			got := ls.validUntil.Sub(t0)
			if want := time.Duration(b) * time.Millisecond / q; got > want {
				t.Fatalf("case %d: trusted end %v, but the key may leave Redis at %v\n%s", n, got, want, log.String())
			}
		}
	}
}

// TestLeaseOpenBounded: however long a lease lives, with a few changes in
// flight at a time, some of them lost and answers in any order, what it
// remembers stays bounded.
func TestLeaseOpenBounded(t *testing.T) {
	const inFlight = 4
	rng := rand.New(rand.NewSource(7))
	t0 := time.Unix(1000, 0)
	now := t0
	var ls lease
	ls.init(nil, nil, time.Second, true, now, now.Add(time.Millisecond), func(time.Duration) time.Duration { return 0 })
	var pending []uint64
	most := 0
	for range 200000 {
		now = now.Add(time.Duration(rng.Intn(3)) * time.Millisecond)
		if len(pending) < inFlight && (len(pending) == 0 || rng.Intn(2) == 0) {
			ttl := time.Duration(500+rng.Intn(1000)) * time.Millisecond
			pending = append(pending, ls.begin(ttl, now))
		} else {
			i := rng.Intn(len(pending))
			ls.settle(pending[i], rng.Intn(5) != 0, now)
			pending = append(pending[:i], pending[i+1:]...)
		}
		most = max(most, len(ls.open))
	}
	// Lost changes sent after the anchor stay until a confirmed change sent
	// after them arrives, so a few more than are in flight may be kept; a
	// leak would grow with the length of the run.
	if most > 4*inFlight {
		t.Fatalf("the lease remembered up to %d changes with at most %d in flight, want at most %d", most, inFlight, 4*inFlight)
	}
	t.Logf("at most %d changes remembered", most)
}

// TestRenewalRunAfterExtendBoundsTrust: the watchdog's renewal, with the
// old lease, is sent before an Extend to a longer lease but runs after it,
// and answers before it. Redis then holds the old lease; the holder must
// not trust the Extend's.
// It runs in a bubble.
// Regression: the holder trusted the lease the late renewal had undone.
func TestRenewalRunAfterExtendBoundsTrust(t *testing.T) {
	inBubble(t, func(t *testing.T, b *bubble) {
		const ttl = 600 * time.Millisecond
		hook := &lagHook{
			before:      func(args []any) bool { return extendCall(args, ttl) },
			beforeDelay: 100 * time.Millisecond,
			after:       func(args []any) bool { return extendCall(args, 3*time.Second) },
			afterDelay:  150 * time.Millisecond, // answers after the renewal, before the next is due
			held:        make(chan struct{}, 1),
		}
		rdb := b.client()
		rdb.AddHook(hook)
		l := mustNew(t, rdb)
		defer l.Close()
		ctx := context.Background()
		lk, err := l.Acquire(ctx, "race", Options{TTL: ttl})
		if err != nil {
			t.Fatal(err)
		}
		defer lk.Release(ctx)
		// Loaded, so that each change is one EVALSHA that runs at once.
		if err := extendScript.Load(ctx, rdb).Err(); err != nil {
			t.Fatal(err)
		}
		hook.armed.Store(true)
		<-hook.held // the renewal is on its way, held back before Redis
		if err := lk.Extend(ctx, 3*time.Second); err != nil {
			t.Fatalf("Extend: %v", err)
		}
		hook.armed.Store(false)
		contend(t, b.client(), "race", lk, 2*time.Second)
	})
}

// TestConcurrentExtendsTrustTheLastRun: two Extends at once, to 30s and to
// 2s; the 30s one runs first and answers last. Redis holds 2s.
// It runs in a bubble.
// Regression: the holder trusted the 30s answered last, not the 2s Redis held.
func TestConcurrentExtendsTrustTheLastRun(t *testing.T) {
	inBubble(t, func(t *testing.T, b *bubble) {
		hook := &lagHook{
			after:      func(args []any) bool { return extendCall(args, 30*time.Second) },
			afterDelay: 300 * time.Millisecond,
		}
		rdb := b.client()
		rdb.AddHook(hook)
		l := mustNew(t, rdb)
		defer l.Close()
		ctx := context.Background()
		lk, err := l.Acquire(ctx, "two", Options{})
		if err != nil {
			t.Fatal(err)
		}
		defer lk.Release(ctx)
		// Loaded, so that each change is one EVALSHA that runs at once.
		if err := extendScript.Load(ctx, rdb).Err(); err != nil {
			t.Fatal(err)
		}
		hook.armed.Store(true)
		long := make(chan error, 1)
		go func() { long <- lk.Extend(ctx, 30*time.Second) }()
		time.Sleep(50 * time.Millisecond) // the 30s Extend has run; its reply waits
		if err := lk.Extend(ctx, 2*time.Second); err != nil {
			t.Fatalf("Extend(2s): %v", err)
		}
		if err := <-long; err != nil {
			t.Fatalf("Extend(30s): %v", err)
		}
		contend(t, b.client(), "two", lk, 3500*time.Millisecond)
	})
}

// TestLostShorterExtendBoundsTrust: an Extend to a shorter lease is sent
// while the server is stopped; the client gives up on it (ErrUnavailable),
// and the server runs it when it resumes. The holder must trust the shorter
// lease. It runs in a bubble, where a caller gives up on a paused server
// after go-redis's read timeout (3 s): the server is paused for 4 s, and
// the lease (30 s) is renewed only well after it resumes.
// Regression: the holder trusted the longer lease the lost Extend had cut.
func TestLostShorterExtendBoundsTrust(t *testing.T) {
	inBubble(t, func(t *testing.T, b *bubble) {
		rdb := b.client()
		l := mustNew(t, rdb)
		defer l.Close()
		ctx := context.Background()
		lk, err := l.Acquire(ctx, "lost", Options{TTL: 30 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		defer lk.Release(ctx)
		if err := extendScript.Load(ctx, rdb).Err(); err != nil {
			t.Fatal(err)
		}
		resumes := time.Now().Add(4 * time.Second)
		b.srv.Pause(time.Until(resumes)) // on resuming, it runs the Extend the client gave up on
		err = lk.Extend(ctx, time.Second)
		if !errors.Is(err, ErrUnavailable) {
			t.Fatalf("Extend while the server was stopped: %v, want ErrUnavailable", err)
		}
		time.Sleep(time.Until(resumes))
		contend(t, b.client(), "lost", lk, 4*time.Second)
	})
}
