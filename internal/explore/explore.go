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
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"
)

const readTimeout = 3 * time.Second

// Timeout is the error a caller sees for a reply that did not come: what
// go-redis returns on a read deadline.
var Timeout error = &net.OpError{Op: "read", Net: "tcp", Err: os.ErrDeadlineExceeded}

// Refusal is the error a caller sees for a command whose connection was
// refused (Refused): what go-redis returns when it cannot dial.
var Refusal error = &net.OpError{Op: "dial", Net: "tcp", Err: &os.SyscallError{Syscall: "connect", Err: syscall.ECONNREFUSED}}

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

	// Target, when set before the first command, is asked of each
	// command (or pipeline) the plan left without a fault, with its
	// index, for a fault aimed at what it is (a run's late copies of
	// waiting attempts); Kind None for none. What it returns meets the
	// command as a drawn fault would, and starts a burst as one does.
	Target func(cmds []redis.Cmder, idx uint64) Fault
	// Faulted, when set before the first command, is told of every
	// command (or pipeline) that meets a fault, as the fault begins,
	// with its caller's context.
	Faulted func(ctx context.Context, cmds []redis.Cmder, f Fault)
	// Seen, when set before the first command, is told of every command
	// (or pipeline) as it returns to its caller: its context (the
	// caller's, with its values), the fault it met (Kind None if none;
	// its error says whether a fault below go-redis met it), the server
	// it was sent to, and the error the caller gets (go-redis sets a
	// single command's error from it only after the hooks return).
	Seen func(ctx context.Context, cmds []redis.Cmder, f Fault, srv string, err error)
	// Ran, when set before the first command, is told of every command
	// (or pipeline) the server ran as the caller sent it, as it comes
	// back from the server: err is what the server answered, which the
	// caller may never see (a lost reply). A late copy is not told here
	// but to Late.
	Ran func(cmds []redis.Cmder, err error)
	// Around, when set before the first command, is asked of each late
	// copy (of a delayed command, or of one that a paused server runs as
	// it resumes; of a pipeline, one per command) for a command to run
	// just before each command of it and one just after (around[i], nil
	// for none), in one transaction with it (MULTI/EXEC), so that nothing
	// else runs in between; done is called once they ran. With none, the
	// copy runs as it was sent.
	Around func(cmds []redis.Cmder) (around [][2]redis.Cmder, done func())
	// Gone, when set before the first command, reports whether the
	// client's process is dead: a command sent then meets no fault (a
	// delay or a paused server would run a copy of it later, on the side
	// client) and goes straight to the hooks below, which fail it. What
	// was on its way before still arrives.
	Gone func() bool
}

// ran tells Ran of cmds, which the server answered with err.
func (h *Hook) ran(cmds []redis.Cmder, err error) error {
	if h.Ran != nil {
		h.Ran(cmds, err)
	}
	return err
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

// Server returns the in-memory server h's client reaches, or nil for a
// client of real servers.
func (h *Hook) Server() *Server { return h.srv }

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
		run := func(ctx context.Context) error { return h.ran(cmds, h.srv.answerInfo(cmds, next(ctx, cmd))) }
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
		run := func(ctx context.Context) error { return h.ran(cmds, h.srv.answerInfo(cmds, next(ctx, cmds))) }
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
	if h.Gone != nil && h.Gone() {
		err := run(ctx)
		h.seen(ctx, cmds, Fault{}, err)
		return err
	}
	idx := h.n.Add(1)
	after := h.prev.Load()
	f := h.plan.Decide(h.ID, idx, after)
	if f.Kind == None && h.Target != nil {
		f = h.Target(cmds, idx)
	}
	if f.Kind == None && h.plan.DecideRefused(h.ID, idx, after) {
		f.Kind = Refused
	}
	defer func() { h.seen(ctx, cmds, f, err) }()
	// A refusal does not start a burst: Decide's draws stay as they were.
	h.prev.Store(f.Kind != None && f.Kind != Refused)
	what := describe(cmds)
	if f.Kind != None && h.Faulted != nil {
		rf := f
		if dl, ok := ctx.Deadline(); ok && f.Kind == Slow && idx%2 == 0 {
			// A slow reply may come at the caller's deadline instead
			// (below): told as the longer of the two.
			if u := time.Until(dl); u > rf.D && u < readTimeout {
				rf.D = u
			}
		}
		h.Faulted(ctx, cmds, rf)
	}
	time.Sleep(h.plan.Latency)
	if a := h.plan.Align; a > 0 {
		time.Sleep(time.Until(time.Now().Truncate(a).Add(a)))
	}
	if f.Kind == Refused {
		h.tr.Add("%s#%d %s: connection refused, not sent", h.Name, idx, what)
		return setErr(cmds, Refusal)
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
		var around [][2]redis.Cmder
		done := func() {}
		if h.Around != nil {
			around, done = h.Around(copies)
		}
		switch {
		case slices.ContainsFunc(around, func(a [2]redis.Cmder) bool { return a[0] != nil || a[1] != nil }):
			_, err = h.side.TxPipelined(ctx, func(p redis.Pipeliner) error {
				for i, c := range copies {
					if a := around[i][0]; a != nil {
						_ = p.Process(ctx, a)
					}
					_ = p.Process(ctx, c)
					if a := around[i][1]; a != nil {
						_ = p.Process(ctx, a)
					}
				}
				return nil
			})
			for _, c := range copies {
				if e := c.Err(); e != nil && err == nil {
					err = e
				}
			}
		case len(copies) == 1:
			err = h.side.Process(ctx, copies[0])
		default:
			_, err = h.side.Pipelined(ctx, func(p redis.Pipeliner) error {
				for _, c := range copies {
					_ = p.Process(ctx, c)
				}
				return nil
			})
		}
		done()
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
