// Package explore is the fault layer of padlock's seeded fault-schedule
// explorer (explore_test.go in the root package): in-memory Redis servers
// on the virtual clock of a testing/synctest bubble, go-redis clients on
// them whose hook decides, from the seed, what happens to each command,
// and a trace of what happened. The same hook faults clients of real
// servers (NewHook), for the runs miniredis cannot stand in for
// (explore_cluster_test.go: a Redis Cluster).
//
// A seed fixes every fault decision: a decision is keyed by the seed, the
// client and the command's index on that client. It does not fix the
// order in which goroutines run, even inside a bubble, so a failing seed
// fails again most of the time, not always.
package explore

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
)

// Kind is what the fault layer does to one command.
type Kind uint8

const (
	None Kind = iota
	// Stall sleeps between the caller's last check and the send: the
	// command runs late, and the caller waits for it.
	Stall
	// Lost runs the command and loses its reply: the caller sees a
	// timeout.
	Lost
	// Reset runs the command and then the connection drops: the caller
	// sees io.EOF (which padlock sends again).
	Reset
	// Delay gives the caller a timeout at once and runs the command
	// later, after commands sent after it.
	Delay
	// Slow runs the command at once and delays its reply: the caller
	// waits for it, past its context's deadline (go-redis reads until its
	// ReadTimeout), and gives up only at the ReadTimeout.
	Slow
)

func (k Kind) String() string {
	return [...]string{"none", "stall", "lost", "reset", "delay", "slow"}[k]
}

// Fault is one decision: its kind and, for Stall and Delay, how long.
type Fault struct {
	Kind Kind
	D    time.Duration
}

// Plan turns a seed into fault decisions. Rate is the share of commands
// that meet a fault.
type Plan struct {
	Seed uint64
	Rate float64
	// Only, when not None, is the one kind of fault used.
	Only Kind
	// Latency is how long every command takes to reach the server. Not
	// zero: inside a bubble time stands still until every goroutine
	// waits, and padlock orders what it sees by when it sent it, so a
	// round trip must take some time, as on any network.
	Latency time.Duration
	// ConnRate is the share of script commands whose reply a client's
	// connection loses below go-redis (ConnLost, ConnReset): go-redis
	// itself sends such a command again unless told not to.
	ConnRate float64
	// ContextTimeout makes the clients set ContextTimeoutEnabled (as a
	// Redlock node's client must): a caller waits for a slow reply only
	// until its context's deadline, not go-redis's read timeout.
	ContextTimeout bool
	// Align, when not zero, makes every command reach the server at a
	// multiple of Align (after Latency): the commands of one step run at
	// one instant of the bubble's clock, so TIME repeats its reading for
	// them all, as a real server's does for commands within one
	// microsecond, or a coarse clock source's within its tick. Leases
	// still run on the exact clock.
	Align time.Duration
}

// ConnFault is what a client's connection does to the reply of one
// script command, below go-redis.
type ConnFault uint8

const (
	ConnNone ConnFault = iota
	// ConnLost: the server runs the command; its reply never comes, and
	// go-redis's read ends at its deadline (a timeout).
	ConnLost
	// ConnReset: the server runs the command; the connection closes as
	// its reply arrives (io.EOF).
	ConnReset
)

func (k ConnFault) String() string { return [...]string{"none", "lost", "reset"}[k] }

// DecideConn returns the connection fault for the idx-th script command
// written on connection conn of client.
func (p *Plan) DecideConn(client int, conn, idx uint64) ConnFault {
	if p.ConnRate == 0 {
		return ConnNone
	}
	r := rand.New(rand.NewPCG(p.Seed^0x5bd1e995, uint64(client)<<48^conn<<24^idx))
	if r.Float64() >= p.ConnRate {
		return ConnNone
	}
	return ConnLost + ConnFault(r.IntN(2))
}

// burstRate is the chance of a fault for a command that follows a
// faulted one on the same client: network trouble comes in bursts, and
// a lost reply's clean-up travels the same troubled network.
const burstRate = 0.4

// Decide returns the fault for the idx-th command of client; after
// says whether the command before it on that client met a fault.
func (p *Plan) Decide(client int, idx uint64, after bool) Fault {
	r := rand.New(rand.NewPCG(p.Seed, uint64(client)<<40^idx))
	rate := p.Rate
	if after {
		rate = max(rate, burstRate)
	}
	if r.Float64() >= rate {
		return Fault{}
	}
	k := p.Only
	if k == None {
		switch x := r.IntN(10); {
		case x < 3:
			k = Stall
		case x < 5:
			k = Lost
		case x < 6:
			k = Reset
		case x < 8:
			k = Delay
		default:
			k = Slow
		}
	}
	var d time.Duration
	switch k {
	case Stall:
		if r.IntN(2) == 0 {
			d = time.Duration(1+r.IntN(40)) * time.Millisecond
		} else {
			d = time.Duration(50+r.IntN(700)) * time.Millisecond
		}
	case Delay:
		d = time.Duration(5+r.IntN(1000)) * time.Millisecond
	case Slow:
		if r.IntN(2) == 0 {
			d = time.Duration(5+r.IntN(400)) * time.Millisecond
		} else {
			d = time.Duration(400+r.IntN(2200)) * time.Millisecond
		}
	}
	return Fault{Kind: k, D: d}
}

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
const readTimeout = 3 * time.Second

// Timeout is the error a caller sees for a reply that did not come: what
// go-redis returns on a read deadline.
var Timeout error = &net.OpError{Op: "read", Net: "tcp", Err: os.ErrDeadlineExceeded}

// Hook is the fault layer of one client (a redis.Hook).
type Hook struct {
	ID   int
	Name string
	plan *Plan
	srv  *Server               // nil for a real server: pauses are real, not the hook's
	side redis.UniversalClient // runs delayed commands, with no hook
	tr   *Trace
	n    atomic.Uint64
	prev atomic.Bool // the last command decided met a fault
	late *sync.WaitGroup
	off  atomic.Bool

	conns    atomic.Uint64 // connections dialed
	lastDone atomic.Int64  // when a command last returned to its caller (UnixNano)

	// Faulted, when set before the first command, is told of every
	// command (or pipeline) that meets a fault, as the fault begins.
	Faulted func(cmds []redis.Cmder, f Fault)
	// Seen, when set before the first command, is told of every command
	// (or pipeline) as it returns to its caller: its context (the
	// caller's, with its values), the fault it met (Kind None if none;
	// its error says whether a fault below go-redis met it), the server
	// it was sent to, and the error the caller gets (go-redis sets a
	// single command's error from it only after the hooks return).
	Seen func(ctx context.Context, cmds []redis.Cmder, f Fault, srv string, err error)
}

// seen tells Seen of cmds.
func (h *Hook) seen(ctx context.Context, cmds []redis.Cmder, f Fault, err error) {
	if h.Seen == nil {
		return
	}
	name := ""
	if h.srv != nil {
		name = h.srv.Name
	}
	h.Seen(ctx, cmds, f, name, err)
}

// LastDone returns when a command of h's client last returned to its
// caller (the zero time if none did).
func (h *Hook) LastDone() time.Time {
	if n := h.lastDone.Load(); n != 0 {
		return time.Unix(0, n)
	}
	return time.Time{}
}

func (h *Hook) done() { h.lastDone.Store(time.Now().UnixNano()) }

// dial is the client's Dialer: the server's, with connection faults.
func (h *Hook) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	c, err := h.srv.Dial(ctx, network, addr)
	if err != nil || h.plan.ConnRate == 0 {
		return c, err
	}
	return &faultConn{Conn: c, h: h, conn: h.conns.Add(1)}, nil
}

// NewClient returns a client of srv with a fault hook deciding by plan,
// and the hook. late counts delayed commands still to run: wait for it
// before the servers close.
func NewClient(id int, name string, srv *Server, plan *Plan, tr *Trace, late *sync.WaitGroup) (*redis.Client, *Hook) {
	opt := func() *redis.Options {
		// An IP literal: a name would need a DNS lookup, which breaks a
		// later bubble. A pool no run fills: a caller that waits for a
		// connection takes a timer from go-redis's process-wide pool
		// (internal/semaphore.go), and a timer made in one bubble and
		// used in a later one is fatal ("select on synctest channel from
		// outside bubble"); hot-keys runs have up to 36 goroutines on
		// one client.
		return &redis.Options{Addr: srv.Addr, Dialer: srv.Dial, DisableIdentity: true, Protocol: 2, PoolSize: 256}
	}
	h := &Hook{ID: id, Name: name, plan: plan, srv: srv, side: redis.NewClient(opt()), tr: tr, late: late}
	o := opt()
	o.Dialer = h.dial
	o.ContextTimeoutEnabled = plan.ContextTimeout
	c := redis.NewClient(o)
	c.AddHook(h)
	return c, h
}

// NewHook returns the fault layer of a client of real servers, deciding
// by plan, to add to that client (AddHook): whatever client it is (one
// node, a Cluster), side runs its delayed commands and must have no
// hook. Pauses are the servers' own (SIGSTOP), which the hook does not
// know of, and its connections are the client's own (no ConnRate).
func NewHook(id int, name string, plan *Plan, tr *Trace, late *sync.WaitGroup, side redis.UniversalClient) *Hook {
	return &Hook{ID: id, Name: name, plan: plan, side: side, tr: tr, late: late}
}

// Off turns the faults of h off (for the checks at the end of a run).
func (h *Hook) Off() { h.off.Store(true) }

// CloseSide closes the client that runs delayed commands.
func (h *Hook) CloseSide() { _ = h.side.Close() }

// DialHook is go-redis's: dials pass.
func (h *Hook) DialHook(next redis.DialHook) redis.DialHook { return next }

// exempt says which commands meet no fault: connection set-up, and the
// command table a Cluster client reads once (COMMAND), under a lock every
// other command of the client then waits for.
func exempt(name string) bool {
	switch name {
	case "hello", "client", "ping", "select", "auth", "readonly", "command":
		return true
	}
	return false
}

func describe(cmds []redis.Cmder) string {
	var b strings.Builder
	for i, c := range cmds {
		if i > 0 {
			b.WriteString("; ")
		}
		args := c.Args()
		b.WriteString(c.Name())
		for j, a := range args[1:] {
			if j >= 5 {
				b.WriteString(" …")
				break
			}
			s := fmt.Sprint(a)
			if len(s) > 16 {
				s = s[:7] + "…"
			}
			b.WriteString(" " + s)
		}
	}
	return b.String()
}

// ProcessHook applies the fault decided for each command.
func (h *Hook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		defer h.done()
		if exempt(cmd.Name()) {
			// No sleep here: go-redis sets connections up under locks of
			// padlock's (a PubSub's), and a goroutine waiting for a
			// sync.Mutex keeps a bubble's clock from moving.
			return next(ctx, cmd)
		}
		cmds := []redis.Cmder{cmd}
		run := func(ctx context.Context) error { return h.srv.answerInfo(cmds, next(ctx, cmd)) }
		if h.off.Load() {
			time.Sleep(h.plan.Latency)
			err := run(ctx)
			h.seen(ctx, cmds, Fault{}, err)
			return err
		}
		return h.apply(cmds, run, ctx)
	}
}

// pipelineKey marks the context of a pipeline's commands (Pipelined).
type pipelineKey struct{}

// Pipelined reports whether ctx, given to Seen, is a pipeline's: its
// commands went as one round trip under the context of whoever sent the
// pipeline, which need not be the context each command was made with.
func Pipelined(ctx context.Context) bool { return ctx.Value(pipelineKey{}) != nil }

// ProcessPipelineHook applies the fault decided for each pipeline, as
// for one command: a pipeline is one round trip.
func (h *Hook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		defer h.done()
		ctx = context.WithValue(ctx, pipelineKey{}, true)
		run := func(ctx context.Context) error { return h.srv.answerInfo(cmds, next(ctx, cmds)) }
		if h.off.Load() || len(cmds) == 0 || exempt(cmds[0].Name()) {
			time.Sleep(h.plan.Latency)
			err := run(ctx)
			h.seen(ctx, cmds, Fault{}, err)
			return err
		}
		return h.apply(cmds, run, ctx)
	}
}

func setErr(cmds []redis.Cmder, err error) error {
	for _, c := range cmds {
		c.SetErr(err)
	}
	return err
}

func (h *Hook) apply(cmds []redis.Cmder, run func(context.Context) error, ctx context.Context) (err error) {
	idx := h.n.Add(1)
	f := h.plan.Decide(h.ID, idx, h.prev.Load())
	defer func() { h.seen(ctx, cmds, f, err) }()
	h.prev.Store(f.Kind != None)
	what := describe(cmds)
	if f.Kind != None && h.Faulted != nil {
		h.Faulted(cmds, f)
	}
	time.Sleep(h.plan.Latency)
	if a := h.plan.Align; a > 0 {
		time.Sleep(time.Until(time.Now().Truncate(a).Add(a)))
	}
	if until := h.paused(); !until.IsZero() {
		// The server reads nothing until it resumes; the caller gives up
		// at its deadline, and the command runs when the server resumes.
		give := time.Now().Add(readTimeout)
		if dl, ok := ctx.Deadline(); ok && dl.Before(give) {
			give = dl
		}
		if give.Before(until) {
			time.Sleep(time.Until(give))
			h.tr.Add("%s#%d %s: caller timed out on paused %s; runs at resume", h.Name, idx, what, h.srv.Name)
			h.later(cmds, time.Until(until))
			return setErr(cmds, Timeout)
		}
		time.Sleep(time.Until(until))
	}
	switch f.Kind {
	case Stall:
		h.tr.Add("%s#%d %s: stall %v before send", h.Name, idx, what, f.D)
		time.Sleep(f.D)
		err := run(ctx)
		h.tr.Add("%s#%d ran after stall: %s", h.Name, idx, result(cmds, err))
		return err
	case Lost, Reset:
		err := run(ctx)
		h.tr.Add("%s#%d %s: ran (%s), reply %s", h.Name, idx, what, result(cmds, err), map[Kind]string{Lost: "lost (timeout)", Reset: "lost (connection reset)"}[f.Kind])
		if f.Kind == Reset {
			return setErr(cmds, io.EOF)
		}
		return setErr(cmds, Timeout)
	case Slow:
		dl, ok := ctx.Deadline()
		edge := ok && idx%2 == 0 && time.Until(dl) > 0 && time.Until(dl) < readTimeout
		err := run(ctx)
		if edge {
			// The reply arrives at the very moment the caller's deadline
			// passes, when whatever else waits for that moment wakes too
			// (padlock's watchdog for a lease's end): the scheduler picks
			// the order, as a few microseconds of real time would.
			f.D = time.Until(dl)
		}
		if h.plan.ContextTimeout && ok && f.D > time.Until(dl) {
			// go-redis reads until the context's deadline.
			time.Sleep(max(time.Until(dl), 0))
			h.tr.Add("%s#%d %s: ran (%s), reply later than the caller's deadline", h.Name, idx, what, result(cmds, err))
			return setErr(cmds, Timeout)
		}
		if f.D >= readTimeout {
			time.Sleep(readTimeout)
			h.tr.Add("%s#%d %s: ran (%s), reply later than the read timeout", h.Name, idx, what, result(cmds, err))
			return setErr(cmds, Timeout)
		}
		h.tr.Add("%s#%d %s: ran (%s), reply in %v", h.Name, idx, what, result(cmds, err), f.D)
		time.Sleep(f.D)
		h.tr.Add("%s#%d reply arrives", h.Name, idx)
		return err
	case Delay:
		h.tr.Add("%s#%d %s: caller times out; runs in %v", h.Name, idx, what, f.D)
		h.later(cmds, f.D)
		return setErr(cmds, Timeout)
	}
	return run(ctx)
}

// later runs copies of cmds on the side client after d.
func (h *Hook) later(cmds []redis.Cmder, d time.Duration) {
	copies := make([]redis.Cmder, len(cmds))
	for i, c := range cmds {
		copies[i] = redis.NewCmd(context.Background(), c.Args()...)
	}
	h.late.Add(1)
	go func() {
		defer h.late.Done()
		time.Sleep(d)
		if until := h.paused(); !until.IsZero() {
			time.Sleep(time.Until(until))
		}
		ctx := context.Background()
		var err error
		if len(copies) == 1 {
			err = h.side.Process(ctx, copies[0])
		} else {
			_, err = h.side.Pipelined(ctx, func(p redis.Pipeliner) error {
				for _, c := range copies {
					_ = p.Process(ctx, c)
				}
				return nil
			})
		}
		h.tr.Add("%s late: %s ran: %s", h.Name, describe(copies), result(copies, err))
	}()
}

func result(cmds []redis.Cmder, err error) string {
	if err != nil && !errors.Is(err, redis.Nil) {
		return "err " + err.Error()
	}
	var parts []string
	for _, c := range cmds {
		if cc, ok := c.(interface{ Val() any }); ok {
			if e := c.Err(); e != nil {
				parts = append(parts, e.Error())
			} else {
				parts = append(parts, short(fmt.Sprint(cc.Val())))
			}
		} else {
			parts = append(parts, short(c.String()))
		}
	}
	return strings.Join(parts, "; ")
}

func short(s string) string {
	if len(s) > 60 {
		return s[:57] + "..."
	}
	return s
}

// Keys lists the server's keys, sorted.
func (s *Server) Keys() []string {
	k := s.M.Keys()
	sort.Strings(k)
	return k
}
