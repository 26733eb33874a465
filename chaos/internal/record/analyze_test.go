package record

import (
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/padlockgo/padlock/chaos/internal/fenced"
)

// Two workers take turns; worker 2 is paused inside its second section
// (its lock is lost and seen lost only later), worker 3 is killed inside
// its only one.
func history() []Event {
	return []Event{
		{Worker: 1, Kind: Acquire, N: 0, T0: 0, T: 10, Fence: 100},
		{Worker: 1, Kind: Call, Op: 1, Key: "k", Write: true, Fence: 100, Value: "a", T: 11},
		{Worker: 1, Kind: Return, Op: 1, OK: true, T: 12},
		{Worker: 1, Kind: Release, N: 0, T: 20},
		{Worker: 1, Kind: Released, N: 0, T: 21},

		{Worker: 2, Kind: Acquire, N: 0, T0: 5, T: 22, Fence: 101},
		{Worker: 2, Kind: Release, N: 0, T: 30},
		{Worker: 2, Kind: Released, N: 0, T: 31},
		{Worker: 2, Kind: Acquire, N: 1, T0: 31, T: 32, Fence: 102},
		// paused here; worker 1 takes over once the lease ran out
		{Worker: 1, Kind: Acquire, N: 1, T0: 25, T: 50, Fence: 103},
		{Worker: 1, Kind: Call, Op: 2, Key: "k", Write: true, Fence: 103, Value: "b", T: 51},
		{Worker: 1, Kind: Return, Op: 2, OK: true, T: 52},
		{Worker: 2, Kind: Call, Op: 1, Key: "k", Write: true, Fence: 102, Value: "late", T: 60, CtxErr: true},
		{Worker: 2, Kind: Return, Op: 1, OK: false, T: 61},
		{Worker: 2, Kind: Lost, N: 1, T: 62},
		{Worker: 2, Kind: Release, N: 1, T: 63},
		{Worker: 2, Kind: Released, N: 1, T: 64, Err: "padlock: lock not held"},
		{Worker: 1, Kind: Release, N: 1, T: 70},
		{Worker: 1, Kind: Released, N: 1, T: 71},

		{Worker: 3, Kind: Acquire, N: 0, T0: 60, T: 72, Fence: 104},
		{Worker: 3, Kind: Call, Op: 1, Key: "k", Write: true, Fence: 104, Value: "c", T: 73},
		{Worker: 3, Kind: Call, Op: 2, Key: "k", T: 74}, // never returns: killed
	}
}

func TestSectionsAndOverlaps(t *testing.T) {
	secs := Sections(history(), map[int]int64{3: 80})
	if len(secs) != 5 {
		t.Fatalf("got %d sections, want 5: %+v", len(secs), secs)
	}
	paused := secs[2]
	if paused.Worker != 2 || paused.N != 1 || paused.End != 62 || !paused.Lost {
		t.Fatalf("paused section: got %+v, want worker 2 n 1 ending at 62, lost", paused)
	}
	killed := secs[4]
	if killed.Worker != 3 || killed.End != 80 || !killed.Died {
		t.Fatalf("killed section: got %+v, want worker 3 ending at 80, died", killed)
	}
	ov := Overlaps(secs)
	if len(ov) != 1 || ov[0].A.Worker != 2 || ov[0].B.Worker != 1 || ov[0].Nanos != 12 {
		t.Fatalf("overlaps: got %+v, want worker 2's paused section over worker 1's for 12ns", ov)
	}
	if got := Count(history(), Lost); got != 1 {
		t.Fatalf("lost: got %d, want 1", got)
	}
	if got := SlippedWrites(history()); got != 1 {
		t.Fatalf("slipped writes: got %d, want 1", got)
	}
	if r := FenceRegressions(secs); len(r) != 0 {
		t.Fatalf("fence regressions: got %+v, want none", r)
	}
}

func TestFenceRegressions(t *testing.T) {
	secs := []Section{
		{Worker: 1, Fence: 200, Call: 0, Start: 10, End: 20},
		{Worker: 2, Fence: 150, Call: 21, Start: 30, End: 40}, // asked after 1 had its lock
		{Worker: 3, Fence: 100, Call: 5, Start: 41, End: 50},  // asked before: either order is fine
	}
	got := FenceRegressions(secs)
	if len(got) != 1 || got[0][0].Worker != 1 || got[0][1].Worker != 2 {
		t.Fatalf("got %+v, want worker 2's fence below worker 1's", got)
	}
}

func TestOperations(t *testing.T) {
	ops := Operations(history())
	if len(ops) != 4 { // the killed read is left out
		t.Fatalf("got %d operations, want 4: %+v", len(ops), ops)
	}
	last := ops[3]
	if out := last.Output.(fenced.Output); !out.Unknown || last.Return != math.MaxInt64 {
		t.Fatalf("killed write: got %+v, want unknown and open", last)
	}
	if res, _ := fenced.Check(ops, 0); res != "Ok" {
		t.Fatalf("history check: got %v, want Ok", res)
	}
}

func TestReadFileTornLine(t *testing.T) {
	path := filepath.Join(t.TempDir(), "w.jsonl")
	w, err := Create(path, 7)
	if err != nil {
		t.Fatal(err)
	}
	w.Add(Event{Kind: Start})
	w.Add(Event{Kind: Acquire, Fence: 3})
	w.Close()
	f, _ := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	f.WriteString(`{"w":7,"ev":"rel`)
	f.Close()
	evs, err := ReadFile(path)
	if err != nil || len(evs) != 2 || evs[1].Worker != 7 || evs[1].Fence != 3 {
		t.Fatalf("got %+v, %v, want 2 events of worker 7", evs, err)
	}
	if err := os.WriteFile(path, []byte("{bad}\n{}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadFile(path); err == nil {
		t.Fatal("got no error for a bad line that is not the last, want one")
	}
}
