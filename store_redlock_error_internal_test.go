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
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

func TestOutcomeOf(t *testing.T) {
	refused := &net.OpError{Op: "dial", Net: "tcp", Err: &os.SyscallError{Syscall: "connect", Err: syscall.ECONNREFUSED}}
	tests := []struct {
		err  error
		want NodeOutcome
	}{
		{context.DeadlineExceeded, NodeTimeout},
		{&net.OpError{Op: "read", Net: "tcp", Err: timeoutError{}}, NodeTimeout},
		{fmt.Errorf("restart check: %w", context.DeadlineExceeded), NodeTimeout},
		{redis.ErrPoolTimeout, NodeTimeout},
		{refused, NodeUnreachable},
		{io.EOF, NodeUnreachable},
		{syscall.ECONNRESET, NodeUnreachable},
		{redis.ErrClosed, NodeUnreachable},
		{replyError("NOPERM this user has no permissions to run the 'info' command"), NodeErrorReply},
		{fmt.Errorf("restart check: %w", replyError("LOADING Redis is loading the dataset in memory")), NodeErrorReply},
		{errors.New("INFO server lacks run_id or uptime_in_seconds"), NodeErrorReply},
	}
	for _, tt := range tests {
		if got := outcomeOf(tt.err); got != tt.want {
			t.Errorf("outcomeOf(%v) = %v, want %v", tt.err, got, tt.want)
		}
	}
}

func TestQuorumError(t *testing.T) {
	q := quorumOf(5)
	wrap := func(i int, err error) error { return q.nodes[i].wrap(err) }
	votes := []vote{
		{yes: true},
		{restarting: true, holderTTL: 12 * time.Second},
		{err: wrap(2, &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED})},
		{err: wrap(3, context.DeadlineExceeded)},
		{busy: true, holderTTL: 300 * time.Millisecond},
	}
	acquire := q.failure("acquire", votes)
	want := []NodeResult{
		{Index: 0, Addr: "10.0.0.1:6379", Outcome: NodeAgreed},
		{Index: 1, Addr: "10.0.0.2:6379", Outcome: NodeRestarting, Wait: 12 * time.Second},
		{Index: 2, Addr: "10.0.0.3:6379", Outcome: NodeUnreachable},
		{Index: 3, Addr: "10.0.0.4:6379", Outcome: NodeTimeout},
		{Index: 4, Addr: "10.0.0.5:6379", Outcome: NodeBusy, Wait: 300 * time.Millisecond},
	}
	if len(acquire.Nodes) != len(want) {
		t.Fatalf("got %d node results, want %d", len(acquire.Nodes), len(want))
	}
	for i, w := range want {
		got := acquire.Nodes[i]
		if got.Index != w.Index || got.Addr != w.Addr || got.Outcome != w.Outcome || got.Wait != w.Wait {
			t.Errorf("Nodes[%d] = %+v, want %+v", i, got, w)
		}
		if (got.Err != nil) != (w.Outcome == NodeUnreachable || w.Outcome == NodeTimeout) {
			t.Errorf("Nodes[%d].Err = %v for outcome %v", i, got.Err, got.Outcome)
		}
	}
	if _, named := acquire.Nodes[3].Err.(*nodeError); named {
		t.Errorf("Nodes[3].Err = %#v names the node again, want the node's own error", acquire.Nodes[3].Err)
	}
	for _, want := range []string{
		"padlock: no quorum for acquire: 1 of 5 nodes agreed, 3 needed", "1 restarted",
		"10.0.0.2:6379: restarting, votes in 12s", "10.0.0.3:6379: unreachable", "10.0.0.4:6379: timeout",
		"10.0.0.5:6379: busy, held for 300ms",
	} {
		if !strings.Contains(acquire.Error(), want) {
			t.Errorf("error %q does not contain %q", acquire.Error(), want)
		}
	}
	if !errors.Is(acquire, ErrNotAcquired) {
		t.Error("an acquire's quorum error does not match ErrNotAcquired")
	}
	if release := q.failure("release", votes); errors.Is(release, ErrNotAcquired) {
		t.Error("a release's quorum error matches ErrNotAcquired")
	}
	if errors.Is(acquire, context.DeadlineExceeded) {
		t.Error("a quorum error with a node timeout matches context.DeadlineExceeded: it would pass for the caller's")
	}

	// Only the caller's context ending makes it match the context's error.
	ctx, cancel := context.WithCancel(context.Background())
	if err := withCause(ctx, q.failure("extend", votes)); errors.Is(err, context.Canceled) {
		t.Errorf("got %v matching context.Canceled while the caller's context is live", err)
	}
	cancel()
	if err := withCause(ctx, q.failure("extend", votes)); !errors.Is(err, context.Canceled) {
		t.Errorf("got %v, want it to match context.Canceled once the caller's context ended", err)
	}
}
