package padlock

import (
	"fmt"
	"math/rand"
	"slices"
	"strings"
	"testing"
	"time"
)

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
