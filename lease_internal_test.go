package padlock

import (
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
