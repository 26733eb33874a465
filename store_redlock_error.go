package padlock

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"
)

// QuorumError is the error of a Redlock Locker (NewRedlock) when too few
// nodes agreed, or a majority agreed too late. Acquire, Extend, Release and
// TTL return it wrapped, so errors.As finds it; from Acquire the error
// also matches ErrNotAcquired and ErrUnavailable, from the others
// ErrUnavailable.
//
// Nodes says what each node did. A node that timed out is a NodeTimeout
// result, not a wrapped context.DeadlineExceeded: errors.Is(err,
// context.DeadlineExceeded) or context.Canceled is true only when the
// caller's own context had ended, so a slow node never passes for the
// caller's deadline.
//
// When a majority of nodes is held by another owner, Acquire returns a
// *NotAcquiredError as on one node (the key is busy, and nothing failed),
// not a QuorumError.
type QuorumError struct {
	// Op is the request: "acquire", "extend", "release", "ttl" or "renew".
	Op string
	// Need is how many nodes must agree: a majority of them.
	Need int
	// Late is how long after the lease's validity (its TTL less the drift
	// allowance, see WithClockDrift) a majority's answers came, when a
	// majority did agree but too late to count; 0 otherwise.
	Late time.Duration
	// Nodes holds every node's outcome, in the order of the clients given
	// to NewRedlock.
	Nodes []NodeResult

	late  string // Late as the message says it
	cause error  // the caller's context's cause, when it had ended
}

// NodeResult is what one Redlock node did with a request.
type NodeResult struct {
	// Index is the node's position among the clients given to NewRedlock.
	Index int
	// Addr is the address the node's client dials, or "node <Index>" when
	// the client does not name one (a Sentinel failover client).
	Addr string
	// Outcome says what the node did.
	Outcome NodeOutcome
	// Wait is, for NodeRestarting, how long until the node's grants
	// count; for NodeBusy, the other owner's remaining lease on the node;
	// 0 otherwise.
	Wait time.Duration
	// Err is the node's error for NodeTimeout, NodeUnreachable and
	// NodeErrorReply. For NodeRestarting under WithPersistentNodes it says
	// why the node is held to the delayed-restart rule all the same (its
	// configuration does not persist every write). Otherwise nil.
	Err error
}

// NodeOutcome is what one Redlock node did with a request.
type NodeOutcome int

const (
	// NodeAgreed: the node did what was asked: granted the lock
	// (acquire), reset its lease (extend, renew), deleted it (release) or
	// reported it held (TTL).
	NodeAgreed NodeOutcome = iota + 1
	// NodeBusy: another owner holds the lock on the node (acquire).
	NodeBusy
	// NodeNotHeld: the node no longer holds the lock for this owner
	// (extend, renew, release, TTL): its lease there ran out, or the node
	// restarted and forgot it.
	NodeNotHeld
	// NodeRestarting: the node granted the lock, but has not been up for
	// the max lease (WithMaxLease), so its grant does not count; see the
	// delayed-restart rule ("Redlock" in the package documentation).
	// NodeResult.Wait says when it will.
	NodeRestarting
	// NodeTimeout: the node did not answer in time: within the node
	// timeout (WithNodeTimeout), or before the caller's context ended.
	NodeTimeout
	// NodeUnreachable: no connection to the node could be made (refused,
	// no route), or the connection broke before the answer came.
	NodeUnreachable
	// NodeErrorReply: the node answered with an error (a Redis error
	// reply such as NOPERM, LOADING or OOM), or with a reply padlock could
	// not read.
	NodeErrorReply
)

// String returns the outcome as the error messages say it.
func (o NodeOutcome) String() string {
	switch o {
	case NodeAgreed:
		return "agreed"
	case NodeBusy:
		return "busy"
	case NodeNotHeld:
		return "not held"
	case NodeRestarting:
		return "restarting"
	case NodeTimeout:
		return "timeout"
	case NodeUnreachable:
		return "unreachable"
	case NodeErrorReply:
		return "error reply"
	}
	return fmt.Sprintf("NodeOutcome(%d)", int(o))
}

// Agreed returns how many nodes agreed.
func (e *QuorumError) Agreed() int {
	n := 0
	for _, r := range e.Nodes {
		if r.Outcome == NodeAgreed {
			n++
		}
	}
	return n
}

// Error says how many nodes agreed of how many needed, and what each of
// the others did.
func (e *QuorumError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "padlock: no quorum for %s: %d of %d nodes agreed, %d needed", e.Op, e.Agreed(), len(e.Nodes), e.Need)
	if e.late != "" {
		b.WriteString(", but " + e.late)
	}
	restarting := 0
	for _, r := range e.Nodes {
		if r.Outcome == NodeRestarting {
			restarting++
		}
	}
	if restarting > 0 {
		fmt.Fprintf(&b, "; %d restarted within the max lease and may not vote yet (the delayed-restart rule of NewRedlock; see WithPersistentNodes)", restarting)
	}
	for _, r := range e.Nodes {
		if r.Outcome == NodeAgreed {
			continue
		}
		b.WriteString("; " + r.String())
	}
	if e.cause != nil {
		b.WriteString("; " + e.cause.Error())
	}
	return b.String()
}

// String describes the result: the node, its outcome, and what goes with it.
func (r NodeResult) String() string {
	s := r.Addr + ": " + r.Outcome.String()
	switch r.Outcome {
	case NodeRestarting:
		s += fmt.Sprintf(", votes in %v", r.Wait.Round(time.Millisecond))
	case NodeBusy:
		s += fmt.Sprintf(", held for %v", r.Wait.Round(time.Millisecond))
	}
	if r.Err != nil {
		s += ": " + r.Err.Error()
	}
	return s
}

// Is makes an acquire's error match ErrNotAcquired: the lock was not taken.
func (e *QuorumError) Is(target error) bool { return target == ErrNotAcquired && e.Op == "acquire" }

// Unwrap returns the cause of the caller's context when it had ended by
// the time the nodes' answers were judged, and nil otherwise. The nodes'
// own errors are not wrapped: they are in Nodes.
func (e *QuorumError) Unwrap() error { return e.cause }

// outcomeOf sorts a node's error into an outcome.
func outcomeOf(err error) NodeOutcome {
	var (
		rerr redis.Error
		nerr net.Error
	)
	switch {
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, context.Canceled),
		errors.Is(err, os.ErrDeadlineExceeded), errors.Is(err, redis.ErrPoolTimeout),
		errors.As(err, &nerr) && nerr.Timeout():
		return NodeTimeout
	case errors.As(err, &rerr):
		return NodeErrorReply
	case errors.As(err, &nerr), errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF),
		errors.Is(err, syscall.ECONNREFUSED), errors.Is(err, syscall.ECONNRESET),
		errors.Is(err, syscall.EPIPE), errors.Is(err, redis.ErrClosed):
		return NodeUnreachable
	}
	return NodeErrorReply
}

// nodeError is a node's error, naming the node.
type nodeError struct {
	addr string
	err  error
}

func (e *nodeError) Error() string { return e.addr + ": " + e.err.Error() }
func (e *nodeError) Unwrap() error { return e.err }

// withCause records the end of the caller's context in a QuorumError, so
// the error matches ctx.Err() then (and only then). A deadline that has
// passed counts as ended before the context's timer has fired: the node
// requests that ran into it may have returned first.
func withCause(ctx context.Context, err error) error {
	var qe *QuorumError
	if err == nil || !errors.As(err, &qe) {
		return err
	}
	if cause := context.Cause(ctx); cause != nil {
		qe.cause = cause
	} else if d, ok := ctx.Deadline(); ok && !time.Now().Before(d) {
		qe.cause = context.DeadlineExceeded
	}
	return err
}
