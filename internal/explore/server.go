package explore

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
)

// Server is one in-memory Redis server on the bubble's clock, which a run
// may pause and restart without persistence.
type Server struct {
	Name string
	// Addr is the address its clients name (their Dialer reaches it
	// whatever the address): an IP literal, distinct for each of a run's
	// servers, as Redlock asks of its nodes.
	Addr  string
	M     *miniredis.Miniredis
	trace *Trace

	mu          sync.Mutex
	pausedUntil time.Time
	pauses      [][2]time.Time
	restarts    []time.Time
	runID       string    // INFO server's run_id: new on every restart
	born        time.Time // when the process started, for uptime_in_seconds
}

// NewServer starts a server whose keys expire on the bubble's clock. Its
// process has been up for an hour (INFO server, which the fault layer
// answers: miniredis has no server section).
func NewServer(name string, tr *Trace) *Server {
	m := miniredis.NewMiniRedis()
	m.ClockTTL(true)
	return &Server{Name: name, Addr: "127.0.0.1:6379", M: m, trace: tr, runID: runID(name, 0), born: time.Now().Add(-time.Hour)}
}

// runID is the run_id of the n-th process of the server called name.
func runID(name string, n int) string { return fmt.Sprintf("%s-run-%d", name, n) }

// answerInfo gives the INFO server commands among cmds that miniredis
// refused the reply Redis would give: the process's run_id and uptime (whole
// seconds, rounded down). It returns the first error left.
func (s *Server) answerInfo(cmds []redis.Cmder, err error) error {
	patched := false
	for _, c := range cmds {
		sc, ok := c.(*redis.StringCmd)
		if !ok || c.Name() != "info" || len(c.Args()) != 2 || !strings.EqualFold(fmt.Sprint(c.Args()[1]), "server") {
			continue
		}
		e := c.Err()
		if e == nil && len(cmds) == 1 {
			// go-redis may set a lone command's error only once every
			// hook has returned: the hook sees it as next's.
			e = err
		}
		if e == nil || !strings.Contains(e.Error(), "not supported") {
			continue // not miniredis's answer: the command did not reach it
		}
		s.mu.Lock()
		id, up := s.runID, time.Since(s.born)/time.Second
		s.mu.Unlock()
		sc.SetErr(nil)
		sc.SetVal(fmt.Sprintf("# Server\r\nrun_id:%s\r\nuptime_in_seconds:%d\r\n", id, up))
		patched = true
	}
	if !patched {
		return err
	}
	for _, c := range cmds {
		if e := c.Err(); e != nil {
			return e
		}
	}
	return nil
}

// Dial is the Dialer of the server's clients. Its connections buffer
// what the client writes, as a socket does: on a bare net.Pipe a client
// writing a command while the server writes it a message would wait for
// each other for ever (go-redis's PubSub writes under the lock its reader
// needs).
func (s *Server) Dial(context.Context, string, string) (net.Conn, error) {
	c, err := s.M.Dial()
	if err != nil {
		return nil, err
	}
	b := &bufConn{Conn: c, wake: make(chan struct{}, 1), done: make(chan struct{})}
	go b.drain()
	return b, nil
}

// bufConn is a client's end of a net.Pipe whose writes never wait: a
// goroutine sends them on, in order. (Its mutex is never held across a
// wait, so that a bubble's clock keeps moving.)
type bufConn struct {
	net.Conn
	mu   sync.Mutex
	q    [][]byte
	wake chan struct{}
	done chan struct{}
	once sync.Once
}

func (c *bufConn) Write(p []byte) (int, error) {
	select {
	case <-c.done:
		return 0, net.ErrClosed
	default:
	}
	c.mu.Lock()
	c.q = append(c.q, append([]byte(nil), p...))
	c.mu.Unlock()
	select {
	case c.wake <- struct{}{}:
	default:
	}
	return len(p), nil
}

func (c *bufConn) drain() {
	for {
		select {
		case <-c.wake:
		case <-c.done:
			return
		}
		for {
			c.mu.Lock()
			if len(c.q) == 0 {
				c.mu.Unlock()
				break
			}
			b := c.q[0]
			c.q = c.q[1:]
			c.mu.Unlock()
			if _, err := c.Conn.Write(b); err != nil {
				_ = c.Close()
				return
			}
		}
	}
}

func (c *bufConn) Close() error {
	c.once.Do(func() { close(c.done) })
	return c.Conn.Close()
}

// faultConn is a client's connection that loses the replies of some
// script commands (EVALSHA, EVAL) after the server ran them, as a proxy
// or a broken network does: below go-redis, which sees a read timeout or
// a closed connection, and sends the command again unless it is told not
// to (padlock's scripts are sent once: scripts.go, onceCmd).
type faultConn struct {
	net.Conn
	h    *Hook
	conn uint64
	n    atomic.Uint64
	drop atomic.Uint32 // the ConnFault of the reply being read
}

// script reports whether a request (RESP, as go-redis writes it) begins
// with a script command.
func script(p []byte) bool {
	head := p[:min(len(p), 32)]
	return bytes.Contains(head, []byte("\r\nevalsha\r\n")) || bytes.Contains(head, []byte("\r\neval\r\n"))
}

func (c *faultConn) Write(p []byte) (int, error) {
	if script(p) && !c.h.off.Load() {
		idx := c.n.Add(1)
		if f := c.h.plan.DecideConn(c.h.ID, c.conn, idx); f != ConnNone {
			c.drop.Store(uint32(f))
			c.h.tr.Add("%s conn%d#%d: %s: reply will be %s below go-redis", c.h.Name, c.conn, idx, describeRESP(p), f)
		}
	}
	return c.Conn.Write(p)
}

func (c *faultConn) Read(p []byte) (int, error) {
	switch ConnFault(c.drop.Load()) {
	case ConnReset:
		// The reply arrives: the server ran the command. Then the
		// connection closes.
		if _, err := c.Conn.Read(p); err != nil {
			return 0, err
		}
		_ = c.Conn.Close()
		return 0, io.EOF
	case ConnLost:
		// Every byte from now on is lost, until go-redis's read deadline
		// passes and it gives the connection up.
		for {
			if _, err := c.Conn.Read(p); err != nil {
				return 0, err
			}
		}
	}
	return c.Conn.Read(p)
}

// describeRESP names the command a request carries, and its first key.
func describeRESP(p []byte) string {
	parts := strings.Split(string(p[:min(len(p), 200)]), "\r\n")
	var out []string
	for i := 2; i < len(parts) && len(out) < 3; i += 2 {
		a := parts[i]
		if len(a) > 16 {
			a = a[:7] + "…"
		}
		out = append(out, a)
	}
	return strings.Join(out, " ")
}

// Pause holds every command that arrives in the next d until d has passed.
func (s *Server) Pause(d time.Duration) {
	s.mu.Lock()
	s.pausedUntil = time.Now().Add(d)
	s.pauses = append(s.pauses, [2]time.Time{time.Now(), s.pausedUntil})
	s.mu.Unlock()
	s.trace.Add("%s paused for %v", s.Name, d)
}

// Restart drops every connection and every key, as a restart without
// persistence does.
func (s *Server) Restart() {
	s.mu.Lock()
	s.restarts = append(s.restarts, time.Now())
	s.runID, s.born = runID(s.Name, len(s.restarts)), time.Now()
	s.mu.Unlock()
	s.M.Close()
	s.M.FlushAll()
	s.trace.Add("%s restarted without persistence", s.Name)
}

// Restarts returns when the server restarted.
func (s *Server) Restarts() []time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]time.Time(nil), s.restarts...)
}

// PausedIn reports whether the server was paused at some time in [from, to].
func (s *Server) PausedIn(from, to time.Time) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, p := range s.pauses {
		if !p[0].After(to) && !p[1].Before(from) {
			return true
		}
	}
	return false
}

// Close stops the server.
func (s *Server) Close() { s.M.Close() }

// paused returns until when h's in-memory server is paused, or the zero
// time (always, on a real server).
func (h *Hook) paused() time.Time {
	if h.srv == nil {
		return time.Time{}
	}
	return h.srv.paused()
}

// paused returns until when the server is paused, or the zero time.
func (s *Server) paused() time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	if time.Now().Before(s.pausedUntil) {
		return s.pausedUntil
	}
	return time.Time{}
}

// readTimeout is go-redis's default read timeout: a caller waits no
// longer than this for a paused server.
