//go:build chaos

package chaos_test

import (
	"slices"
	"testing"
	"time"

	"github.com/padlockgo/padlock/chaos/internal/record"
)

// TestApartMachineStarved: an overlap is set apart only when the first
// holder's own process measured a third of the TTL starved in the TTL
// before the second section began.
func TestApartMachineStarved(t *testing.T) {
	const ttl = time.Second
	ms := int64(time.Millisecond)
	ov := record.Overlap{
		A: record.Section{Worker: 1, Start: 0, End: 1500 * ms},
		B: record.Section{Worker: 2, Start: 1400 * ms, End: 1700 * ms},
	}
	for _, tc := range []struct {
		name    string
		spans   []record.Event
		starved bool
	}{
		{"no span", nil, false},
		{"another process starved", []record.Event{{Worker: 2, Kind: record.Starved, T0: 500 * ms, T: 1400 * ms}}, false},
		{"a goroutine of the same process starved", []record.Event{{Worker: 1 + record.GoroutineStride, Kind: record.Starved, T0: 600 * ms, T: 1000 * ms}}, true},
		{"starved a quarter of the TTL", []record.Event{{Worker: 1, Kind: record.Starved, T0: 600 * ms, T: 850 * ms}}, false},
		{"starved a third, in pieces", []record.Event{
			{Worker: 1, Kind: record.Starved, T0: 500 * ms, T: 700 * ms},
			{Worker: 1, Kind: record.Starved, T0: 1200 * ms, T: 1350 * ms},
		}, true},
		{"starved before the TTL that mattered", []record.Event{{Worker: 1, Kind: record.Starved, T0: 0, T: 390 * ms}}, false},
	} {
		kept, starved := apartMachineStarved([]record.Overlap{ov}, tc.spans, ttl)
		if got := len(starved) == 1; got != tc.starved || len(kept)+len(starved) != 1 {
			t.Errorf("%s: kept %d, set apart %d; want set apart: %v", tc.name, len(kept), len(starved), tc.starved)
		}
	}
}

// TestLostElsewhereStarved: a lock on a healthy master reported lost
// counts as a broken promise, unless its process measured itself
// starved for a third of the TTL in the TTL before the loss.
func TestLostElsewhereStarved(t *testing.T) {
	const ms = int64(time.Millisecond)
	base := []record.Event{
		{Worker: 1, N: 1, Kind: record.Acquire, Key: "k0", T0: 0, T: 10 * ms},
		{Worker: 1, N: 1, Kind: record.Lost, T: 1200 * ms},
		{Worker: 2, N: 1, Kind: record.Acquire, Key: "slow", T0: 0, T: 10 * ms},
		{Worker: 2, N: 1, Kind: record.Lost, T: 1200 * ms},
	}
	if n := lostElsewhere(t, base, "slow", time.Second); n != 1 {
		t.Fatalf("lostElsewhere = %d, want 1: the lock on the healthy master", n)
	}
	starved := append(slices.Clone(base), record.Event{Worker: 1, Kind: record.Starved, T0: 500 * ms, T: 1000 * ms})
	if n := lostElsewhere(t, starved, "slow", time.Second); n != 0 {
		t.Fatalf("lostElsewhere = %d with the process starved 500ms of the TTL before the loss, want 0", n)
	}
}
