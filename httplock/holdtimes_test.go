package httplock

import (
	"fmt"
	"testing"
	"time"
)

func TestRetryAfterEstimate(t *testing.T) {
	tests := []struct {
		name    string
		longest time.Duration
		seen    bool
		left    time.Duration
		want    time.Duration
	}{
		{"short holds, renewed lease", 50 * time.Millisecond, true, 30 * time.Second, 50 * time.Millisecond},
		{"long holds, capped at the lease left", 40 * time.Second, true, 5 * time.Second, 5 * time.Second},
		{"no hold seen: the lease left", 0, false, 12 * time.Second, 12 * time.Second},
		{"lease unknown: the holds", 3 * time.Second, true, 0, 3 * time.Second},
		{"nothing known: one second, never 0", 0, false, 0, time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := retryAfter(tt.longest, tt.seen, tt.left); got != tt.want {
				t.Fatalf("got %v, want %v", got, tt.want)
			}
		})
	}
}

func TestHoldTimes(t *testing.T) {
	var h holdTimes
	if _, seen := h.longest("a"); seen {
		t.Fatal("got a hold seen in an empty holdTimes, want none")
	}
	h.add("a", 5*time.Second)
	for range holdSamples - 1 {
		h.add("a", time.Millisecond)
	}
	if got, _ := h.longest("a"); got != 5*time.Second {
		t.Fatalf("got longest %v, want 5s while it is among the last %d", got, holdSamples)
	}
	h.add("a", 2*time.Millisecond) // pushes the 5s hold out
	if got, _ := h.longest("a"); got != 2*time.Millisecond {
		t.Fatalf("got longest %v, want 2ms once the 5s hold is old", got)
	}
	if _, seen := h.longest("b"); seen {
		t.Fatal("got a hold seen for another namespace, want none")
	}
	for i := range 3 * maxNamespaces {
		h.add(fmt.Sprint(i), time.Millisecond)
	}
	if got := len(h.byNS); got > maxNamespaces {
		t.Fatalf("got %d namespaces remembered, want at most %d", got, maxNamespaces)
	}
}
