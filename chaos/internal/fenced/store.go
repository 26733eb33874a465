// Package fenced is the fenced store of the chaos suite: a register per
// resource that rejects writes carrying a fence older than one it has
// accepted, served over HTTP on loopback so that worker processes share it,
// and the porcupine model its history is checked against.
//
// The rule is Kleppmann's fencing: a write with fence F > 0 is accepted
// when F is at least the highest fence the register has accepted, and then
// F becomes the highest; otherwise it is rejected and changes nothing.
// Equal fences are accepted so that one lock holder can write more than
// once (claim, then commit, as the example app does); two holders never
// share a fence, which the suite checks separately. A write with fence 0
// is unfenced (a Redlock holder has no fence) and is always accepted.
package fenced

import (
	"encoding/json"
	"net/http"
	"strconv"
	"sync"
	"time"
)

// Entry is one operation as the store applied it, in the order it applied
// them.
type Entry struct {
	Key   string
	Write bool
	Fence int64  // write: the fence it carried; read: the register's fence
	Value string // write: the value it carried; read: the register's value
	OK    bool   // write: accepted
	// Max is the highest fence the register had accepted before this
	// operation.
	Max int64
	At  time.Time
}

// Store is the fenced store. The zero value is not usable; use NewStore.
// It is an http.Handler:
//
//	POST /write?key=K&fence=F&value=V   200 {"ok":true} or 409 {"ok":false,"fence":highest}
//	GET  /read?key=K                    200 {"fence":F,"value":V}
type Store struct {
	mu   sync.Mutex
	regs map[string]register
	log  []Entry
}

type register struct {
	fence int64
	value string
}

// NewStore returns an empty store.
func NewStore() *Store { return &Store{regs: map[string]register{}} }

// Write applies a write and reports whether it was accepted, and the
// register's highest fence afterwards.
func (s *Store) Write(key string, fence int64, value string) (ok bool, highest int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r := s.regs[key]
	e := Entry{Key: key, Write: true, Fence: fence, Value: value, Max: r.fence, At: time.Now()}
	switch {
	case fence == 0:
		r.value, e.OK = value, true
	case fence >= r.fence:
		r.fence, r.value, e.OK = fence, value, true
	}
	s.regs[key] = r
	s.log = append(s.log, e)
	return e.OK, r.fence
}

// Read returns the register's highest accepted fence and last accepted
// value.
func (s *Store) Read(key string) (fence int64, value string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r := s.regs[key]
	s.log = append(s.log, Entry{Key: key, Fence: r.fence, Value: r.value, Max: r.fence, At: time.Now()})
	return r.fence, r.value
}

// Log returns a copy of every operation applied so far, in order.
func (s *Store) Log() []Entry {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Entry(nil), s.log...)
}

// Reply is the JSON body of the store's answers.
type Reply struct {
	OK    bool   `json:"ok"`
	Fence int64  `json:"fence"`
	Value string `json:"value,omitempty"`
}

func (s *Store) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	key := q.Get("key")
	if key == "" {
		http.Error(w, "missing key", http.StatusBadRequest)
		return
	}
	var (
		reply  Reply
		status = http.StatusOK
	)
	switch {
	case r.Method == http.MethodPost && r.URL.Path == "/write":
		fence, err := strconv.ParseInt(q.Get("fence"), 10, 64)
		if err != nil || fence < 0 {
			http.Error(w, "bad fence", http.StatusBadRequest)
			return
		}
		reply.OK, reply.Fence = s.Write(key, fence, q.Get("value"))
		if !reply.OK {
			status = http.StatusConflict
		}
	case r.Method == http.MethodGet && r.URL.Path == "/read":
		reply.Fence, reply.Value = s.Read(key)
		reply.OK = true
	default:
		http.NotFound(w, r)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(reply)
}

// StaleAccepted counts the writes in log that were accepted although their
// fence was below one the same register had accepted earlier: writes a
// superseded lock holder got through. A correct store keeps it at 0; the
// suite reports it per scenario.
func StaleAccepted(log []Entry) int {
	highest := map[string]int64{}
	n := 0
	for _, e := range log {
		if !e.Write || !e.OK || e.Fence == 0 {
			continue
		}
		if e.Fence < highest[e.Key] {
			n++
		}
		highest[e.Key] = max(highest[e.Key], e.Fence)
	}
	return n
}

// Rejected counts the writes in log the fence turned away.
func Rejected(log []Entry) int {
	n := 0
	for _, e := range log {
		if e.Write && !e.OK {
			n++
		}
	}
	return n
}
