// Package record is what the chaos suite's worker processes write down and
// how the suite reads it back: one JSON line per event, appended to a file
// per worker with a single write each, so that a worker killed with SIGKILL
// loses nothing it had recorded.
//
// Timestamps are nanoseconds of CLOCK_MONOTONIC on Linux (see Now): every
// process of a run is on one machine and reads the same clock, so times
// from different workers compare, and no clock step can reorder them. Each
// time is taken on the side of the event that makes
// a worker's belief last longer: a critical section starts when Acquire
// has returned and ends when the worker calls Release or sees its lock
// lost, so an overlap of two sections is one both workers really lived.
package record

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"sync"
)

// GoroutineStride separates the ids of the workers one process runs: its
// g-th goroutine (from 0) records as the process's id + g*GoroutineStride,
// so a worker id modulo the stride names its process.
const GoroutineStride = 1000

// Event kinds.
const (
	Start         = "start"          // the worker is up
	Acquire       = "acquire"        // Acquire returned a lock: T0 call, T return, Fence, Key
	AcquireFailed = "acquire-failed" // Acquire returned an error: Err
	Lost          = "lost"           // the lock's Done fired with ErrLockLost
	Skip          = "skip"           // the worker saw its lock gone and skipped a write
	Release       = "release"        // the worker is about to call Release
	Released      = "released"       // Release returned: Err
	Call          = "call"           // a store operation was invoked: Op, Write, Fence, Value
	Return        = "return"         // it returned: Op, OK, Fence, Value, or Err when no answer came
	Exit          = "exit"           // the worker ends normally
	// HeldSample says the lock of iteration N reported Err()==nil at T (a clock
	// reading taken just before the Err call), the latest such sample so
	// far. A sampler polls Err every millisecond while the worker holds a
	// lock and records one at least every 100ms and when it stops.
	HeldSample = "held"
	Closed     = "closed" // the worker closed its Locker (SIGUSR1)
	Extend     = "extend" // an Extend returned: T0 call, T return, Value the TTL, Err
	// Starved says the machine gave the worker's process less than a
	// third of a CPU from T0 to T while its -spin goroutines kept one busy: the
	// operating system, not the Go runtime the scenario starves, held the
	// process back (a loaded machine).
	Starved = "starved"
)

// Event is one line of a worker's record.
type Event struct {
	Worker int    `json:"w"`
	Kind   string `json:"ev"`
	T      int64  `json:"t"`            // when it happened (Unix ns)
	T0     int64  `json:"t0,omitempty"` // Acquire: when it was called
	N      int    `json:"n"`            // the worker's iteration
	Fence  int64  `json:"fence,omitempty"`
	Op     int    `json:"op,omitempty"` // store operation id, unique per worker
	Key    string `json:"key,omitempty"`
	Write  bool   `json:"write,omitempty"`
	Value  string `json:"value,omitempty"`
	OK     bool   `json:"ok,omitempty"`
	Err    string `json:"err,omitempty"`
	// CtxErr is set on a Call when the lock's context had already ended:
	// a write that slipped through after the lock was lost.
	CtxErr bool `json:"ctx_err,omitempty"`
}

// Writer appends events to a file, one write per event. It is safe for
// concurrent use.
type Writer struct {
	worker int
	out    *file
}

type file struct {
	mu sync.Mutex
	f  *os.File
}

// Create opens path for appending (creating it) for worker's events.
func Create(path string, worker int) (*Writer, error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	return &Writer{worker: worker, out: &file{f: f}}, nil
}

// As returns a Writer to the same file for another worker's events: a
// worker process that runs several workers, one per goroutine.
func (w *Writer) As(worker int) *Writer { return &Writer{worker: worker, out: w.out} }

// Add records e, stamping it with the worker and, if e.T is zero, now.
func (w *Writer) Add(e Event) {
	e.Worker = w.worker
	if e.T == 0 {
		e.T = Now()
	}
	b, err := json.Marshal(e)
	if err != nil {
		panic(err) // Event always marshals
	}
	b = append(b, '\n')
	w.out.mu.Lock()
	defer w.out.mu.Unlock()
	if _, err := w.out.f.Write(b); err != nil {
		fmt.Fprintf(os.Stderr, "record: %v\n", err)
	}
}

// Close closes the file, for every Writer made from this one with As.
func (w *Writer) Close() error { return w.out.f.Close() }

// ReadFile returns the events in path, in order. A last line cut short (the
// worker was killed while writing it) is left out.
func ReadFile(path string) ([]Event, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var events []Event
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for line := 1; sc.Scan(); line++ {
		var e Event
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			if !bytes.HasSuffix(b, []byte("\n")) && line == bytes.Count(b, []byte("\n"))+1 {
				break // torn last line
			}
			return nil, fmt.Errorf("%s:%d: %w", path, line, err)
		}
		events = append(events, e)
	}
	return events, sc.Err()
}
