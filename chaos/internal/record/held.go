package record

import (
	"fmt"
	"math"
	"sort"
)

// Held is the time one lock was seen to report held: from the return of
// its Acquire to the last sample in which its Err() was nil, or to the
// moment its owner called Release if that came first (from then on the
// owner has let go, whatever Err says while Release is under way). Once a
// lock's
// Err is not nil it stays so, so the lock reported held for the whole
// interval: a lower bound of how long it did, whatever the sampler missed.
type Held struct {
	Worker, N int
	Key       string
	Fence     int64
	Call      int64 // Acquire was called
	Start     int64 // Acquire returned
	End       int64 // the last sample with Err()==nil
	Lost      bool  // its lock-lost signal fired
}

// HeldIntervals returns the held interval of every lock in events whose
// sampler saw it held at least once, sorted by start.
func HeldIntervals(events []Event) []Held {
	type id struct{ w, n int }
	acq := map[id]Event{}
	last := map[id]int64{}
	lost := map[id]bool{}
	released := map[id]int64{}
	for _, e := range events {
		k := id{e.Worker, e.N}
		switch e.Kind {
		case Acquire:
			acq[k] = e
		case HeldSample:
			last[k] = max(last[k], e.T)
		case Lost:
			lost[k] = true
		case Release:
			released[k] = e.T
		}
	}
	var out []Held
	for k, a := range acq {
		end, ok := last[k]
		if !ok || end < a.T {
			// Never seen held after Acquire returned; a sample taken
			// before the Acquire event was stamped still shows the lock
			// held from its return, but only for an instant.
			if !ok {
				continue
			}
			end = a.T
		}
		if r, ok := released[k]; ok {
			end = max(min(end, r), a.T)
		}
		out = append(out, Held{Worker: k.w, N: k.n, Key: a.Key, Fence: a.Fence, Call: a.T0, Start: a.T, End: end, Lost: lost[k]})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Start < out[j].Start })
	return out
}

// Window is a span of time in which the design allows a lock granted
// before it to go on reporting held while another lock on the key does:
// RELIABILITY.md names each kind (a Redis restart without persistence, an
// asynchronous failover, a frozen or starved process).
type Window struct {
	Name string
	// From and To bound the overlaps it excuses.
	From, To int64
	// GrantedBefore: only a lock whose Acquire returned before it is
	// excused (the lock the fault took away, not one granted after).
	GrantedBefore int64
	// Proc, if not 0, limits the window to the locks of that worker
	// process (worker id modulo GoroutineStride).
	Proc int
}

// HeldOverlap is two locks that both reported held at the same moment.
type HeldOverlap struct {
	A, B    Held  // A started first
	From    int64 // the overlap: [From, To]
	To      int64
	Excused string // the window that excuses it, or "" when none does
}

// Nanos is how long the overlap lasted.
func (o HeldOverlap) Nanos() int64 { return o.To - o.From }

func (o HeldOverlap) String() string {
	w := "in no window"
	if o.Excused != "" {
		w = "inside the window " + o.Excused
	}
	return fmt.Sprintf("worker %d (fence %d, held %.1fms–%.1fms, lost: %v) and worker %d (fence %d, held %.1fms–%.1fms, lost: %v) both reported held for %.1fms, %s",
		o.A.Worker, o.A.Fence, ms(o.A.Start, o.From), ms(o.A.End, o.From), o.A.Lost,
		o.B.Worker, o.B.Fence, ms(o.B.Start, o.From), ms(o.B.End, o.From), o.B.Lost,
		float64(o.Nanos())/1e6, w)
}

// ms is t relative to ref in milliseconds, for messages.
func ms(t, ref int64) float64 { return float64(t-ref) / 1e6 }

// HeldOverlaps returns every pair of locks on one key that reported held
// at the same moment, each marked with the window that excuses it, if any.
func HeldOverlaps(held []Held, windows []Window) []HeldOverlap {
	var out []HeldOverlap
	for i, a := range held {
		for _, b := range held[i+1:] {
			if b.Start > a.End {
				break // sorted by start: no later lock reaches into a
			}
			if a.Worker == b.Worker && a.N == b.N || a.Key != b.Key {
				continue
			}
			from, to := max(a.Start, b.Start), min(a.End, b.End)
			if to < from {
				continue
			}
			o := HeldOverlap{A: a, B: b, From: from, To: to}
			for _, w := range windows {
				if a.Start < w.GrantedBefore && from >= w.From && to <= w.To &&
					(w.Proc == 0 || a.Worker%GoroutineStride == w.Proc) {
					o.Excused = w.Name
					break
				}
			}
			out = append(out, o)
		}
	}
	return out
}

// Whole is a window over a whole run, for faults that may strike any lock
// at any time (a starved runtime).
func Whole(name string) Window {
	return Window{Name: name, From: math.MinInt64, To: math.MaxInt64, GrantedBefore: math.MaxInt64}
}
