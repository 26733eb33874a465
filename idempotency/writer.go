package idempotency

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
)

// errWriteAfterEnd is what a write to the recorder returns once the
// middleware has taken the response over: a goroutine of the handler that
// outlived it cannot change a response that was stored.
var errWriteAfterEnd = errors.New("idempotency: write after the handler returned")

// recorder is the http.ResponseWriter the handler writes to. It holds status, headers and body back until the handler
// returns, so the record can be stored before the client sees the response
// (a client that got an answer never gets 409 for it on a retry). A body
// that outgrows the limit, a Flush or a Hijack commits the response: what
// was held goes out, the rest streams through, and the response is marked
// as one a retry cannot get back. All methods lock mu, so a handler that
// writes from several goroutines does not race with the middleware.
//
// Status, Size, Written and WriteHeaderNow are gin's ResponseWriter
// methods, kept here so that the Gin face (ginidem) adds only what needs
// gin; Size is -1 until the header counts as written, as gin's is.
type recorder struct {
	w     http.ResponseWriter // the writer the middleware was given
	limit int

	mu        sync.Mutex
	status    int
	size      int // gin's Size: -1 until the header counts as written
	buf       bytes.Buffer
	committed bool // status and header went to w
	hijacked  bool
	late      bool // a status change came after the header was written
	ended     bool // the middleware took over; writes fail
}

var (
	_ http.Flusher  = (*recorder)(nil)
	_ http.Hijacker = (*recorder)(nil)
)

func newRecorder(w http.ResponseWriter, limit int) *recorder {
	return &recorder{w: w, limit: limit, status: http.StatusOK, size: -1}
}

// Header returns the header map of the underlying writer: nothing is sent
// until the response is committed, so the handler's changes land there.
func (r *recorder) Header() http.Header { return r.w.Header() }

// WriteHeader sets the status, as gin's writer does (nothing is sent yet):
// a status set after the header counts as written is ignored. Such a late
// change is remembered, though: it is how an error after the body started
// shows (gin's recovery behind this middleware answering a panic with 500),
// and a response that ended that way is not stored.
func (r *recorder) WriteHeader(code int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	switch {
	case code <= 0 || r.ended:
	case r.size < 0:
		r.status = code
	case code != r.status:
		r.late = true
	}
}

// WriteHeaderNow makes the header count as written, as gin's writer does:
// a later WriteHeader does not change the status.
func (r *recorder) WriteHeaderNow() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.size < 0 && !r.ended {
		r.size = 0
	}
}

func (r *recorder) Write(b []byte) (int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.write(b, "")
}

func (r *recorder) WriteString(s string) (int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.write(nil, s)
}

// write writes b, or s when b is nil.
func (r *recorder) write(b []byte, s string) (n int, err error) {
	if r.ended {
		return 0, errWriteAfterEnd
	}
	if r.size < 0 {
		r.size = 0
	}
	l := len(b) + len(s)
	if !r.committed && r.buf.Len()+l > r.limit {
		r.commit()
	}
	switch {
	case r.committed && b != nil:
		n, err = r.w.Write(b)
	case r.committed:
		n, err = io.WriteString(r.w, s)
	case b != nil:
		n, err = r.buf.Write(b)
	default:
		n, err = r.buf.WriteString(s)
	}
	r.size += n
	return n, err
}

// commit sends the status, the header and what the body holds so far,
// marking the response as not replayable. r.mu must be held.
func (r *recorder) commit() {
	if r.committed {
		return
	}
	r.committed = true
	r.w.Header().Set(ReplayableHeader, "false")
	writeHeader(r.w, r.status)
	if r.buf.Len() > 0 {
		_, _ = r.w.Write(r.buf.Bytes())
	}
	r.buf = bytes.Buffer{}
}

// Flush commits the response and flushes it: a streamed response is not
// stored for replay.
func (r *recorder) Flush() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.ended {
		return
	}
	if r.size < 0 {
		r.size = 0
	}
	r.commit()
	_ = http.NewResponseController(r.w).Flush()
}

// Hijack hands the connection to the handler. There is no HTTP response
// to replay then, and whatever the handler does next (returns, panics),
// the middleware stores the marker of a response that started: a retry
// gets 409, never a second run.
func (r *recorder) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.ended {
		return nil, nil, errWriteAfterEnd
	}
	if r.size > 0 {
		return nil, nil, errors.New("idempotency: hijack after the body was written")
	}
	conn, rw, err := http.NewResponseController(r.w).Hijack()
	if err != nil {
		return nil, nil, err
	}
	r.hijacked, r.committed = true, true
	r.size = 0
	return conn, rw, nil
}

// Status returns the status the handler set, 200 if none.
func (r *recorder) Status() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.status
}

// Size returns the bytes of body written, -1 before the header counts as
// written.
func (r *recorder) Size() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.size
}

// Written reports whether the header counts as written.
func (r *recorder) Written() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.size >= 0
}

// Unwrap lets http.ResponseController reach the underlying writer for what
// the recorder does not implement itself (deadlines).
func (r *recorder) Unwrap() http.ResponseWriter { return r.w }

// outcome is the response as the handler left it.
type outcome struct {
	status    int
	body      []byte
	committed bool // sent already, at least in part
	hijacked  bool
	late      bool // see WriteHeader
}

// end stops the recorder, so later writes fail, and returns what the
// handler wrote.
func (r *recorder) end() outcome {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.ended = true
	return outcome{status: r.status, body: r.buf.Bytes(), committed: r.committed, hijacked: r.hijacked, late: r.late}
}

// send writes a response that was held back to w, with body.
func send(w http.ResponseWriter, status int, body []byte) {
	writeHeader(w, status)
	if len(body) > 0 {
		_, _ = w.Write(body)
	}
}

// writeHeader sends status now, also on a writer that, like gin's, only
// records it in WriteHeader and sends it with the first write.
func writeHeader(w http.ResponseWriter, status int) {
	w.WriteHeader(status)
	if n, ok := w.(interface{ WriteHeaderNow() }); ok {
		n.WriteHeaderNow()
	}
}

// defaultStoredHeaders are the response header fields stored with a
// response and replayed, unless WithStoredHeaders adds more: they describe
// the representation and where it lives, and carry nothing of the caller.
// Any other field the handler sets (a session token, Set-Cookie,
// Authentication-Info, an app's own X- field) goes to the first response
// only: a replay never hands out credentials, even to the same caller.
var defaultStoredHeaders = []string{
	"Cache-Control",
	"Content-Disposition",
	"Content-Encoding",
	"Content-Language",
	"Content-Location",
	"Content-Type",
	"Etag",
	"Expires",
	"Last-Modified",
	"Link",
	"Location",
	"Preference-Applied",
	"Vary",
}

// neverStored are fields WithStoredHeaders refuses: they belong to the
// connection or the moment (hop-by-hop fields, Date, Content-Length, which
// is recomputed), or are the middleware's own.
var neverStored = []string{
	"Connection", "Keep-Alive", "Proxy-Connection", "Te", "Trailer", "Transfer-Encoding", "Upgrade",
	"Date", "Content-Length", ReplayedHeader, ReplayableHeader,
}

// credentialWords mark a field name as one that may carry credentials or a
// session (Set-Cookie, Authorization, Authentication-Info, X-Session-Token,
// X-Api-Key ...): WithStoredHeaders refuses such a name.
var credentialWords = []string{"auth", "cookie", "session", "token", "secret", "password", "credential", "api-key", "apikey", "csrf", "xsrf"}

// storableHeader says why name cannot be stored, or "" when it can be.
func storableHeader(name string) string {
	lower := strings.ToLower(name)
	for _, w := range credentialWords {
		if strings.Contains(lower, w) {
			return "may carry credentials (its name holds " + strconv.Quote(w) + ")"
		}
	}
	for _, n := range neverStored {
		if strings.EqualFold(name, n) {
			return "belongs to the connection or the middleware"
		}
	}
	return ""
}

// handlerHeader returns the fields of h the handler set that stored allows:
// those not in before (the header as it was when the handler started, set
// by middlewares in front, such as a request id, which a replay must not
// overwrite) or changed since.
func handlerHeader(h, before http.Header, stored map[string]bool) http.Header {
	out := make(http.Header, len(stored))
	for name, vals := range h {
		if !stored[name] || len(vals) == 0 {
			continue
		}
		if old, ok := before[name]; ok && slices.Equal(old, vals) {
			continue
		}
		out[name] = vals
	}
	return out
}
