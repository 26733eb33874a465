package record

import "sort"

// Roles of a hold, as a worker records them in its Acquire event's Value:
// a semaphore permit, a read-write lock's reader or its writer. A mutex
// records none.
const (
	RolePermit = "permit"
	RoleRead   = "read"
	RoleWrite  = "write"
)

// Crowd is a moment when more locks on one key reported held than the
// primitive allows: more than its permits for a semaphore, a writer with
// anyone else for a read-write lock.
type Crowd struct {
	Key      string
	From, To int64
	Held     []Held // the locks held then
	Excused  string // the window that excuses it, or "" when none does
}

// Nanos is how long the crowd lasted.
func (c Crowd) Nanos() int64 { return c.To - c.From }

// Crowds returns every span in which the held intervals of one key break
// the bound of their primitive: more than permits holders (semaphores;
// readers count as permits with no bound), or a writer sharing the lock.
// roles gives each lock's role by worker and iteration. A crowd whose span
// lies inside a window, with a lock granted before the window's
// GrantedBefore, is marked excused, as HeldOverlaps does.
func Crowds(held []Held, roles map[[2]int]string, permits int, windows []Window) []Crowd {
	type edge struct {
		t     int64
		open  bool
		index int
	}
	byKey := map[string][]int{}
	for i, h := range held {
		byKey[h.Key] = append(byKey[h.Key], i)
	}
	var out []Crowd
	for key, idx := range byKey {
		var edges []edge
		for _, i := range idx {
			edges = append(edges, edge{held[i].Start, true, i}, edge{held[i].End, false, i})
		}
		// Opens before closes at one instant: touching intervals overlap,
		// as HeldOverlaps counts them.
		sort.Slice(edges, func(a, b int) bool {
			if edges[a].t != edges[b].t {
				return edges[a].t < edges[b].t
			}
			return edges[a].open && !edges[b].open
		})
		in := map[int]bool{}
		var cur *Crowd
		for _, e := range edges {
			if e.open {
				in[e.index] = true
			} else {
				delete(in, e.index)
			}
			bad := crowded(held, in, roles, permits)
			switch {
			case bad && cur == nil:
				cur = &Crowd{Key: key, From: e.t}
				for i := range in {
					cur.Held = append(cur.Held, held[i])
				}
			case !bad && cur != nil:
				cur.To = e.t
				cur.Excused = excuse(*cur, windows)
				out = append(out, *cur)
				cur = nil
			}
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].From < out[j].From })
	return out
}

// crowded reports whether the locks in break their primitive's bound.
func crowded(held []Held, in map[int]bool, roles map[[2]int]string, permits int) bool {
	writers, permitted := 0, 0
	for i := range in {
		switch roles[[2]int{held[i].Worker, held[i].N}] {
		case RoleWrite:
			writers++
		case RolePermit:
			permitted++
		}
	}
	return permitted > permits || writers > 0 && len(in) > 1
}

func excuse(c Crowd, windows []Window) string {
	for _, w := range windows {
		if c.From < w.From || c.To > w.To {
			continue
		}
		for _, h := range c.Held {
			if h.Start < w.GrantedBefore && (w.Proc == 0 || h.Worker%GoroutineStride == w.Proc) {
				return w.Name
			}
		}
	}
	return ""
}

// Roles returns the role each Acquire in events recorded, by worker and
// iteration.
func Roles(events []Event) map[[2]int]string {
	out := map[[2]int]string{}
	for _, e := range events {
		if e.Kind == Acquire && e.Value != "" {
			out[[2]int{e.Worker, e.N}] = e.Value
		}
	}
	return out
}

// SectionCrowds is Crowds for critical sections: how often, and for how
// long at most, the sections of one key broke the primitive's bound (a
// paused holder working on after its lease, say).
func SectionCrowds(secs []Section, roles map[[2]int]string, permits int) (n int, longest int64) {
	held := make([]Held, len(secs))
	for i, s := range secs {
		held[i] = Held{Worker: s.Worker, N: s.N, Key: s.Key, Start: s.Start, End: s.End}
	}
	for _, c := range Crowds(held, roles, permits, nil) {
		n++
		longest = max(longest, c.Nanos())
	}
	return n, longest
}
