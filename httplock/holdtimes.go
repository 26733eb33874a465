package httplock

import (
	"sync"
	"time"
)

// Retry-After on a busy answer says when a retry is likely to succeed. The
// holder's remaining lease says when it surely will, but with renewal that
// is the whole lease (30s by default) however soon the holder finishes. So
// the Guard remembers how long the last holdSamples requests of each
// namespace held their locks in this process, and answers the longest of
// them, capped at the remaining lease: requests that hold for 50ms get
// "Retry-After: 1" (the header's minimum), not 30. With no hold seen yet
// in the namespace the remaining lease is the answer; when neither is
// known, one second.

// holdSamples is how many recent holds per namespace the estimate reads.
const holdSamples = 8

// maxNamespaces bounds the namespaces remembered. Namespaces are route
// templates or WithNamespace's, a handful; the bound matters only for a
// Guard without a namespace, whose keys' first parts come from requests.
const maxNamespaces = 256

// holdTimes is the recent hold times of a Guard's namespaces. Its methods
// are safe for concurrent use.
type holdTimes struct {
	mu   sync.Mutex
	byNS map[string]*recentHolds
}

// recentHolds is a ring of the last holdSamples hold times.
type recentHolds struct {
	d    [holdSamples]time.Duration
	next int // where the next hold goes
	n    int // how many of d are set
}

// add remembers that a request of namespace ns held its lock for d.
func (h *holdTimes) add(ns string, d time.Duration) {
	h.mu.Lock()
	defer h.mu.Unlock()
	rh := h.byNS[ns]
	if rh == nil {
		if h.byNS == nil {
			h.byNS = make(map[string]*recentHolds)
		}
		if len(h.byNS) >= maxNamespaces {
			for k := range h.byNS { // forget one, any one
				delete(h.byNS, k)
				break
			}
		}
		rh = &recentHolds{}
		h.byNS[ns] = rh
	}
	rh.d[rh.next] = d
	rh.next = (rh.next + 1) % holdSamples
	rh.n = min(rh.n+1, holdSamples)
}

// longest returns the longest of the recent holds of namespace ns, and
// false when none was seen.
func (h *holdTimes) longest(ns string) (time.Duration, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	rh := h.byNS[ns]
	if rh == nil || rh.n == 0 {
		return 0, false
	}
	var m time.Duration
	for _, d := range rh.d[:rh.n] {
		m = max(m, d)
	}
	return m, true
}

// retryAfter is the estimate for a busy answer: the longest recent hold
// (when seen) capped at the holder's remaining lease left (when known, > 0),
// and never 0.
func retryAfter(longest time.Duration, seen bool, left time.Duration) time.Duration {
	var d time.Duration
	switch {
	case seen && (left <= 0 || longest < left):
		d = longest
	case left > 0:
		d = left
	}
	if d <= 0 {
		return time.Second
	}
	return d
}
