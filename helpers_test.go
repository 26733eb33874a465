package padlock_test

import (
	"bufio"
	"context"
	"errors"
	"net"
	"os"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/padlockgo/padlock"
	"github.com/padlockgo/padlock/internal/redistest"
	"github.com/redis/go-redis/v9"
)

// The helpers both test packages share (helpers_internal_test.go), under
// the names this package's tests use: newLocker is startLocker there,
// where newLocker is the package's own constructor of every Locker.
var (
	newLocker    = padlock.StartLocker
	testKey      = padlock.TestKey
	ctxFor       = padlock.CtxFor
	clusterKeys  = padlock.ClusterKeys
	mustAcquire  = padlock.MustAcquire
	startCluster = padlock.StartCluster
	startRedlock = padlock.StartRedlock
	redlockOn    = padlock.RedlockOn
	awaitVotes   = padlock.AwaitVotes
	leaseRanOut  = padlock.LeaseRanOut
)

const (
	rlMaxLease    = padlock.RLMaxLease
	rlNodesVote   = padlock.RLNodesVote
	rlNodeTimeout = padlock.RLNodeTimeout
)

// The tests that stage a fault do it on a real server, with go-redis hooks
// on the client of the Locker under test: a reply lost after the server
// ran the command, a command held back and sent later (the bytes of a
// stalled connection that arrive after those of a newer one), a send
// stalled after the client's checks passed. Every fault is one the
// network or the scheduler may cause; the promise each test names must
// hold under it.

// faultHook is a go-redis hook whose behaviour a test sets and changes
// while the client is in use; with nothing set, it passes everything on.
type faultHook struct {
	proc atomic.Pointer[procFault]
	pipe atomic.Pointer[pipeFault]
}

func (h *faultHook) onProcess(f procFault)  { h.proc.Store(&f) }
func (h *faultHook) onPipeline(f pipeFault) { h.pipe.Store(&f) }

func (h *faultHook) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *faultHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if f := h.proc.Load(); f != nil {
			return (*f)(ctx, cmd, next)
		}
		return next(ctx, cmd)
	}
}

func (h *faultHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		if f := h.pipe.Load(); f != nil {
			return (*f)(ctx, cmds, next)
		}
		return next(ctx, cmds)
	}
}

type (
	procFault func(ctx context.Context, cmd redis.Cmder, next redis.ProcessHook) error
	pipeFault func(ctx context.Context, cmds []redis.Cmder, next redis.ProcessPipelineHook) error
)

func hookOn(rdb *redis.Client) *faultHook {
	h := &faultHook{}
	rdb.AddHook(h)
	return h
}

// errReplyLost is what a client sees when a reply does not come back in
// time: the command may have run (padlock takes it for "maybe sent").
var errReplyLost error = &net.OpError{Op: "read", Net: "tcp", Err: os.ErrDeadlineExceeded}

// scriptKeys returns the KEYS of an EVAL or EVALSHA command, nil for any
// other command.
func scriptKeys(cmd redis.Cmder) []string {
	args := cmd.Args()
	if len(args) < 3 || (cmd.Name() != "evalsha" && cmd.Name() != "eval") {
		return nil
	}
	var n int
	switch v := args[2].(type) {
	case int:
		n = v
	case int64:
		n = int(v)
	default:
		return nil
	}
	if n < 0 || len(args) < 3+n {
		return nil
	}
	keys := make([]string, n)
	for i := range keys {
		keys[i], _ = args[3+i].(string)
	}
	return keys
}

// firstKey returns KEYS[1] of a script command, "" for any other command.
func firstKey(cmd redis.Cmder) string {
	if keys := scriptKeys(cmd); len(keys) > 0 {
		return keys[0]
	}
	return ""
}

// hasArg reports whether one of cmd's arguments is the string s.
func hasArg(cmd redis.Cmder, s string) bool {
	return slices.ContainsFunc(cmd.Args(), func(a any) bool { v, ok := a.(string); return ok && v == s })
}

func awaitSignal(t *testing.T, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(10 * time.Second):
		t.Fatalf("%s: never happened", what)
	}
}

// waitQueueLen waits until key's fair queue holds n waiters.
func waitQueueLen(t *testing.T, rdb redis.Cmdable, key string, n int) {
	t.Helper()
	queue := "padlock:{" + key + "}:queue"
	ctx := ctxFor(t)
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		if got := rdb.LLen(ctx, queue).Val(); got == int64(n) {
			return
		}
		time.Sleep(2 * time.Millisecond)
	}
	entries := rdb.LRange(ctx, queue, 0, -1).Val()
	t.Fatalf("queue %s is %s, want %d waiters", queue, strings.Join(entries, ", "), n)
}

// The ACL rules docs/acl.md documents, by the comment line above each.
const (
	aclEvery      = "# Every deployment"
	aclNotices    = "# Release notices on a single node"
	aclCluster    = "# Release notices on Cluster"
	aclTopology   = "# Cluster: what go-redis asks"
	aclRedlock    = "# NewRedlock"
	aclReplicaAck = "# WithReplicaAck"
	aclInspect    = "# Locker.Inspect"
)

// readmeACL returns the ACL SETUSER lines of docs/acl.md, the permissions
// guide, as command arguments, by the comment line above each.
func readmeACL(t *testing.T) map[string][]string {
	t.Helper()
	f, err := os.Open("docs/acl.md")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	rules := make(map[string][]string)
	var section, block bool
	comment := ""
	for sc := bufio.NewScanner(f); sc.Scan(); {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "# Redis permissions"):
			section = true
		case !section:
		case strings.HasPrefix(line, "```"):
			if block {
				return rules
			}
			block = true
		case block && strings.HasPrefix(line, "# "):
			comment = line
		case block && strings.HasPrefix(line, "ACL SETUSER "):
			for prefix := range map[string]bool{aclEvery: true, aclNotices: true, aclCluster: true, aclTopology: true, aclRedlock: true, aclReplicaAck: true, aclInspect: true} {
				if strings.HasPrefix(comment, prefix) {
					rules[prefix] = strings.Fields(line)
				}
			}
		}
	}
	t.Fatal("docs/acl.md: no ACL block under \"# Redis permissions\"")
	return nil
}

// aclUser applies rules (ACL SETUSER lines) to srv, clears its ACL log,
// and returns a client logged in as the user they made.
func aclUser(t *testing.T, srv *redistest.Server, rules ...[]string) *redis.Client {
	t.Helper()
	ctx := ctxFor(t)
	admin := srv.Client(t)
	user := ""
	for _, r := range rules {
		if len(r) < 3 {
			t.Fatalf("ACL rule %q: want ACL SETUSER <user> ...", r)
		}
		user = r[2]
		args := make([]any, len(r))
		for i, a := range r {
			args[i] = a
		}
		if err := admin.Do(ctx, args...).Err(); err != nil {
			t.Fatalf("%s: %v", strings.Join(r, " "), err)
		}
	}
	if err := admin.Do(ctx, "acl", "log", "reset").Err(); err != nil {
		t.Fatal(err)
	}
	return srv.Client(t, func(o *redis.Options) { o.Username, o.Password = user, "secret" })
}

// checkNodes asserts that err carries a *padlock.QuorumError for op whose
// node results have the outcomes want, in the order of servers, and
// returns it.
func checkNodes(t *testing.T, call string, err error, op string, servers []*redistest.Server, want []padlock.NodeOutcome) *padlock.QuorumError {
	t.Helper()
	var qe *padlock.QuorumError
	if !errors.As(err, &qe) {
		t.Fatalf("%s: errors.As(%v) finds no *padlock.QuorumError", call, err)
	}
	if qe.Op != op || qe.Need != len(servers)/2+1 || len(qe.Nodes) != len(servers) {
		t.Fatalf("%s: got Op %q, Need %d, %d nodes; want %q, %d, %d", call, qe.Op, qe.Need, len(qe.Nodes), op, len(servers)/2+1, len(servers))
	}
	for i, r := range qe.Nodes {
		if r.Index != i || r.Addr != servers[i].Addr() || r.Outcome != want[i] {
			t.Errorf("%s: Nodes[%d] = %d %s %v (%v), want %d %s %v", call, i, r.Index, r.Addr, r.Outcome, r.Err, i, servers[i].Addr(), want[i])
		}
		failed := r.Outcome == padlock.NodeTimeout || r.Outcome == padlock.NodeUnreachable
		if (failed && r.Err == nil) || (r.Outcome == padlock.NodeAgreed && r.Err != nil) {
			t.Errorf("%s: Nodes[%d] is %v with Err %v", call, i, r.Outcome, r.Err)
		}
		if r.Outcome != padlock.NodeAgreed && !strings.Contains(err.Error(), r.Addr+": "+r.Outcome.String()) {
			t.Errorf("%s: error %q does not name %s as %v", call, err, r.Addr, r.Outcome)
		}
	}
	return qe
}

// queuedPlace returns the place of a fair queue entry, "<deadline
// ms>:<place>", without the bid it may carry after '|'
// (lua/queue_head.lua).
func queuedPlace(e string) string {
	_, place, _ := strings.Cut(e, ":")
	place, _, _ = strings.Cut(place, "|")
	return place
}
