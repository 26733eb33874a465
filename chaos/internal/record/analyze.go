package record

import (
	"math"
	"sort"

	"github.com/anishathalye/porcupine"

	"github.com/padlockgo/padlock/chaos/internal/fenced"
)

// Section is one critical section as a worker lived it: from the return of
// Acquire until the worker called Release, saw its lock lost, or died,
// whichever came first.
type Section struct {
	Worker, N  int
	Key        string
	Fence      int64
	Call       int64 // Acquire was called
	Start      int64 // Acquire returned
	End        int64
	Lost       bool   // the lock-lost signal fired during it (or at its Release)
	Died       bool   // the worker died inside it
	ReleaseErr string // what Release returned, if not nil
}

// Sections returns the critical sections in events (every worker's, in any
// order), sorted by start. died gives, for workers that did not end
// normally, when they died (a SIGKILL sent); a section still open when a
// worker's record ends is cut there, or at its last event if died has no
// time for it.
func Sections(events []Event, died map[int]int64) []Section {
	byWorker := map[int][]Event{}
	for _, e := range events {
		byWorker[e.Worker] = append(byWorker[e.Worker], e)
	}
	var out []Section
	for w, evs := range byWorker {
		var cur *Section
		closeAt := func(t int64) {
			if cur != nil {
				cur.End = min(cur.End, t)
				out = append(out, *cur)
				cur = nil
			}
		}
		last := int64(0)
		for _, e := range evs {
			last = max(last, e.T)
			switch e.Kind {
			case Acquire:
				closeAt(e.T) // cannot happen: a worker releases first
				cur = &Section{Worker: w, N: e.N, Key: e.Key, Fence: e.Fence, Call: e.T0, Start: e.T, End: math.MaxInt64}
			case Lost:
				if cur != nil && cur.N == e.N {
					cur.Lost = true
					cur.End = min(cur.End, e.T)
				} else {
					// Lost noticed at Release, after the section closed.
					for i := len(out) - 1; i >= 0; i-- {
						if out[i].Worker == w && out[i].N == e.N {
							out[i].Lost = true
							break
						}
					}
				}
			case Release:
				if cur != nil && cur.N == e.N {
					cur.End = min(cur.End, e.T)
				}
			case Released:
				if cur != nil && cur.N == e.N {
					cur.ReleaseErr = e.Err
					closeAt(cur.End)
				}
			}
		}
		if cur != nil {
			end, ok := died[w]
			if !ok {
				end = last
			}
			cur.Died = ok
			closeAt(end)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Start < out[j].Start })
	return out
}

// Overlap is two critical sections of different workers that intersect in
// time: both workers believed they held the lock at once.
type Overlap struct {
	A, B  Section
	Nanos int64 // how long they overlapped
}

// Overlaps returns every overlapping pair among sections of one key.
func Overlaps(sections []Section) []Overlap {
	var out []Overlap
	for i, a := range sections {
		for _, b := range sections[i+1:] {
			if b.Start >= a.End {
				break // sorted by start: no later section reaches into a
			}
			if a.Worker != b.Worker && a.Key == b.Key {
				if d := min(a.End, b.End) - max(a.Start, b.Start); d > 0 {
					out = append(out, Overlap{A: a, B: b, Nanos: d})
				}
			}
		}
	}
	return out
}

// FenceRegressions returns the pairs of fenced sections where the later
// one's Acquire was called after the earlier one's had returned and yet got
// a fence no greater: a breach of Lock.Fence's promise.
func FenceRegressions(sections []Section) [][2]Section {
	var out [][2]Section
	for _, a := range sections {
		for _, b := range sections {
			if a.Key == b.Key && a.Fence > 0 && b.Fence > 0 && b.Call > a.Start && b.Fence <= a.Fence {
				out = append(out, [2]Section{a, b})
			}
		}
	}
	return out
}

// Count returns how many events are of kind.
func Count(events []Event, kind string) int {
	n := 0
	for _, e := range events {
		if e.Kind == kind {
			n++
		}
	}
	return n
}

// SlippedWrites counts the store writes invoked after the writer's lock
// context had ended: the ones only the fence can stop.
func SlippedWrites(events []Event) int {
	n := 0
	for _, e := range events {
		if e.Kind == Call && e.Write && e.CtxErr {
			n++
		}
	}
	return n
}

// Operations turns the store calls in events into a porcupine history. A
// call whose answer never came (the worker died, or the request failed) is
// a write of unknown outcome that stays open for ever, or, for a read, is
// left out: it constrains nothing.
func Operations(events []Event) []porcupine.Operation {
	type id struct{ w, op int }
	calls := map[id]Event{}
	var order []id
	rets := map[id]Event{}
	for _, e := range events {
		k := id{e.Worker, e.Op}
		switch e.Kind {
		case Call:
			calls[k] = e
			order = append(order, k)
		case Return:
			rets[k] = e
		}
	}
	var ops []porcupine.Operation
	for _, k := range order {
		c := calls[k]
		in := fenced.Input{Key: c.Key, Write: c.Write, Fence: c.Fence, Value: c.Value}
		op := porcupine.Operation{ClientId: c.Worker, Input: in, Call: c.T}
		r, ok := rets[k]
		switch {
		case ok && r.Err == "":
			op.Return = r.T
			op.Output = fenced.Output{OK: r.OK, Fence: r.Fence, Value: r.Value}
		case !c.Write:
			continue
		default:
			op.Return = math.MaxInt64
			op.Output = fenced.Output{Unknown: true}
		}
		ops = append(ops, op)
	}
	return ops
}
