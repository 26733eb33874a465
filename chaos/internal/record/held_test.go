package record

import "testing"

func TestHeldOverlaps(t *testing.T) {
	// Worker 1 holds from 10; a restart at 40 takes its lock away, and it
	// learns of it at its renewal, at 80. Worker 2 takes the key at 50.
	// Worker 1001 (worker 1's process) is handed a lock at 60, after
	// worker 2's Acquire returned: that overlap no window excuses.
	evs := []Event{
		{Worker: 1, Kind: Acquire, N: 0, T0: 5, T: 10, Fence: 100},
		{Worker: 1, Kind: HeldSample, N: 0, T: 30},
		{Worker: 1, Kind: HeldSample, N: 0, T: 79},
		{Worker: 1, Kind: Lost, N: 0, T: 80},
		{Worker: 2, Kind: Acquire, N: 0, T0: 45, T: 50, Fence: 200},
		{Worker: 2, Kind: HeldSample, N: 0, T: 120},
		{Worker: 1001, Kind: Acquire, N: 0, T0: 55, T: 60, Fence: 101},
		{Worker: 1001, Kind: HeldSample, N: 0, T: 70},
		{Worker: 3, Kind: Acquire, N: 0, T0: 121, T: 130, Fence: 300}, // never seen held
		// Worker 4 calls Release at 150; its Err stays nil until 160,
		// while Release is under way: it has let go at 150.
		{Worker: 4, Kind: Acquire, N: 0, T0: 125, T: 140, Fence: 400},
		{Worker: 4, Kind: Release, N: 0, T: 150},
		{Worker: 4, Kind: HeldSample, N: 0, T: 160},
		{Worker: 5, Kind: Acquire, N: 0, T0: 145, T: 155, Fence: 500},
		{Worker: 5, Kind: HeldSample, N: 0, T: 170},
	}
	held := HeldIntervals(evs)
	if len(held) != 5 {
		t.Fatalf("got %d held intervals, want 5: %+v", len(held), held)
	}
	if h := held[3]; h.Worker != 4 || h.End != 150 {
		t.Fatalf("worker 4: got %+v, want held until its Release call at 150", h)
	}
	held = held[:3] // 4 and 5 do not overlap: 4 let go at 150
	if h := held[0]; h.Worker != 1 || h.Start != 10 || h.End != 79 || !h.Lost {
		t.Fatalf("worker 1: got %+v, want held 10–79, lost", h)
	}
	restart := Window{Name: "restart", From: 40, To: 40 + 50, GrantedBefore: 40}
	tests := []struct {
		name    string
		windows []Window
		want    []string // Excused of each overlap, in order
	}{
		{"no window", nil, []string{"", "", ""}},
		// 1–2 excused; 1–1001 (same process, later grant, but A=1 was
		// granted before) excused too; 2–1001 not: 1001's lock came after.
		{"restart window", []Window{restart}, []string{"restart", "restart", ""}},
		{"window for another process", []Window{{Name: "p", From: 40, To: 90, GrantedBefore: 40, Proc: 2}}, []string{"", "", ""}},
		{"window too short", []Window{{Name: "short", From: 40, To: 60, GrantedBefore: 40}}, []string{"", "", ""}},
		{"whole run", []Window{Whole("starved")}, []string{"starved", "starved", "starved"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := HeldOverlaps(held, tc.windows)
			if len(got) != len(tc.want) {
				t.Fatalf("got %d overlaps, want %d: %v", len(got), len(tc.want), got)
			}
			for i, o := range got {
				if o.Excused != tc.want[i] {
					t.Errorf("overlap %d (%v): excused by %q, want %q", i, o, o.Excused, tc.want[i])
				}
			}
		})
	}
	if got := HeldOverlaps(HeldIntervals(evs)[3:], nil); len(got) != 0 {
		t.Fatalf("a lock whose owner called Release before the next was granted: got overlaps %v, want none", got)
	}
	ov := HeldOverlaps(held, nil)
	if a, b := ov[2].A.Worker, ov[2].B.Worker; a != 2 || b != 1001 || ov[2].From != 60 || ov[2].To != 70 {
		t.Fatalf("third overlap: got workers %d, %d over %d–%d, want 2, 1001 over 60–70", a, b, ov[2].From, ov[2].To)
	}
}

// Locks on different keys may be held at once; on one key they may not.
func TestOverlapsPerKey(t *testing.T) {
	evs := []Event{
		{Worker: 1, Kind: Acquire, N: 0, T0: 0, T: 10, Fence: 100, Key: "a"},
		{Worker: 1, Kind: HeldSample, N: 0, T: 50},
		{Worker: 1, Kind: Release, N: 0, T: 60},
		{Worker: 1, Kind: Released, N: 0, T: 61},
		{Worker: 2, Kind: Acquire, N: 0, T0: 0, T: 20, Fence: 50, Key: "b"},
		{Worker: 2, Kind: HeldSample, N: 0, T: 50},
		{Worker: 2, Kind: Release, N: 0, T: 60},
		{Worker: 2, Kind: Released, N: 0, T: 61},
	}
	for _, tc := range []struct {
		name string
		keyB string
		want int
	}{{"different keys", "b", 0}, {"one key", "a", 1}} {
		t.Run(tc.name, func(t *testing.T) {
			evs[4].Key = tc.keyB
			if got := len(HeldOverlaps(HeldIntervals(evs), nil)); got != tc.want {
				t.Errorf("held overlaps: got %d, want %d", got, tc.want)
			}
			secs := Sections(evs, nil)
			if got := len(Overlaps(secs)); got != tc.want {
				t.Errorf("section overlaps: got %d, want %d", got, tc.want)
			}
			// Worker 2 asked after worker 1 had its lock, and got a lower
			// fence: a regression only on one key.
			evs[4].T0 = 15
			if got := len(FenceRegressions(Sections(evs, nil))); got != tc.want {
				t.Errorf("fence regressions: got %d, want %d", got, tc.want)
			}
			evs[4].T0 = 0
		})
	}
}
