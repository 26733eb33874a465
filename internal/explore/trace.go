package explore

import (
	"fmt"
	"strings"
	"sync"
	"time"
)

// Trace is a log of what happened, stamped with the virtual time since
// the run began.
type Trace struct {
	mu     sync.Mutex
	start  time.Time
	events []Event
}

// Event is one line of a Trace.
type Event struct {
	At   time.Duration
	Text string
}

// NewTrace starts a trace at the bubble's now.
func NewTrace() *Trace { return &Trace{start: time.Now()} }

// Since returns the virtual time since the trace began.
func (t *Trace) Since() time.Duration { return time.Since(t.start) }

// Start returns when the trace began.
func (t *Trace) Start() time.Time { return t.start }

// Add records an event at the current virtual time.
func (t *Trace) Add(format string, args ...any) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.events = append(t.events, Event{At: time.Since(t.start), Text: fmt.Sprintf(format, args...)})
}

// Around returns at most n events from before-ago to after-past at,
// the latest ones when more match.
func (t *Trace) Around(at, before, after time.Duration, n int) string {
	t.mu.Lock()
	defer t.mu.Unlock()
	var sel []Event
	for _, e := range t.events {
		if e.At >= at-before && e.At <= at+after {
			sel = append(sel, e)
		}
	}
	if len(sel) > n {
		sel = sel[len(sel)-n:]
	}
	var b strings.Builder
	for _, e := range sel {
		fmt.Fprintf(&b, "  %9.3fs %s\n", e.At.Seconds(), e.Text)
	}
	return b.String()
}
