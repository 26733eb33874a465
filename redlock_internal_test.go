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

	"github.com/padlockgo/padlock/internal/redistest"
	"github.com/redis/go-redis/v9"
)

func TestQuorumHolderTTL(t *testing.T) {
	ms := func(d int) time.Duration { return time.Duration(d) * time.Millisecond }
	busy := func(d int) vote { return vote{busy: true, holderTTL: ms(d)} }
	tests := []struct {
		name  string
		votes []vote
		want  time.Duration
	}{
		// 5 nodes, 3 needed: 2 may stay busy.
		{"all busy: the third lease to end frees a majority", []vote{busy(500), busy(100), busy(300), busy(200), busy(400)}, ms(300)},
		{"three busy: the first lease to end", []vote{busy(300), {yes: true}, busy(100), {err: errors.New("down")}, busy(200)}, ms(100)},
		{"four busy", []vote{busy(40), busy(10), busy(30), busy(20), {yes: true}}, ms(20)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			q := quorumOf(len(tt.votes))
			if got := q.holderTTL(tt.votes, q.count(tt.votes).no); got != tt.want {
				t.Errorf("holderTTL = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestQuorumHolderOf(t *testing.T) {
	busy := func(owner string) vote { return vote{busy: true, holder: owner} }
	tests := []struct {
		name  string
		votes []vote
		want  string
	}{
		{"every busy node names it", []vote{busy("a"), busy("a"), {yes: true}}, "a"},
		{"the most busy nodes name it", []vote{busy("b"), busy("a"), busy("a"), busy("b"), busy("a")}, "a"},
		{"a tie: the first named", []vote{busy("b"), busy(""), busy("a"), {err: errors.New("down")}}, "b"},
		{"unnamed holders do not outvote a named one", []vote{busy(""), busy(""), busy("a")}, "a"},
		{"only votes of busy nodes count", []vote{{yes: true, holder: "x"}, {yes: true, holder: "x"}, busy("a")}, "a"},
		{"nobody named", []vote{busy(""), busy(""), {yes: true}}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := holderOf(tt.votes); got != tt.want {
				t.Errorf("holderOf = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestQuorumDecide(t *testing.T) {
	yes, no, down := vote{yes: true}, vote{}, vote{err: errors.New("down")}
	tests := []struct {
		name    string
		votes   []vote
		late    time.Duration
		wantOK  bool
		wantErr bool
	}{
		{"majority yes", []vote{yes, yes, no}, 0, true, false},
		{"majority yes, one down", []vote{yes, down, yes, no, yes}, 0, true, false},
		{"majority yes, but late", []vote{yes, yes, yes}, time.Millisecond, false, true},
		{"majority no: lost", []vote{no, no, yes}, 0, false, false},
		{"more no than 5 nodes can spare", []vote{no, no, no, yes, down}, 0, false, false},
		{"too few answers to tell", []vote{yes, no, down}, 0, false, true},
		{"all down", []vote{down, down, down}, 0, false, true},
		{"two no of five, rest down", []vote{no, no, down, down, down}, 0, false, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ok, err := quorumOf(len(tt.votes)).decide("extend", tt.votes, tt.late)
			if ok != tt.wantOK || (err != nil) != tt.wantErr {
				t.Errorf("decide = %v, %v; want ok %v, error %v", ok, err, tt.wantOK, tt.wantErr)
			}
		})
	}
}

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

func TestParseServerInfo(t *testing.T) {
	tests := []struct {
		info    string
		wantID  string
		wantUp  time.Duration
		wantErr bool
	}{
		{"# Server\r\nredis_version:7.0.15\r\nrun_id:abc\r\nuptime_in_seconds:42\r\n", "abc", 42 * time.Second, false},
		{"run_id:abc\r\n", "", 0, true},
		{"uptime_in_seconds:1\r\n", "", 0, true},
		{"run_id:abc\r\nuptime_in_seconds:-1\r\n", "", 0, true},
		{"run_id:abc\r\nuptime_in_seconds:x\r\n", "", 0, true},
	}
	for _, tt := range tests {
		id, up, err := parseServerInfo(tt.info)
		if id != tt.wantID || up != tt.wantUp || (err != nil) != tt.wantErr {
			t.Errorf("parseServerInfo(%q) = %q, %v, %v; want %q, %v, error %v", tt.info, id, up, err, tt.wantID, tt.wantUp, tt.wantErr)
		}
	}
}

// TestRestartGuardChecksOnNewConnections: the uptime is read once after
// each new connection, not per request, and a restart is noticed.
func TestRestartGuardChecksOnNewConnections(t *testing.T) {
	redistest.Require(t)
	srv := redistest.Start(t)
	rdb := srv.Client(t)
	infos := redistest.CountCommands("info")
	rdb.AddHook(infos)
	g := &restartGuard{maxLease: time.Millisecond}
	rdb.AddHook(g)
	ctx := context.Background()

	grant := func() (bool, error) {
		sent := time.Now()
		if err := rdb.Ping(ctx).Err(); err != nil { // stands in for a grant
			return false, err
		}
		v, err := g.counts(ctx, rdb, sent)
		return v.counts, err
	}
	before := infos.Load()
	if ok, err := grant(); err != nil || ok {
		t.Fatalf("grant from a node up for less than a second: counts = %v, %v; want false (uptime is trusted a second less)", ok, err)
	}
	if n := infos.Load() - before; n != 1 {
		t.Fatalf("%d INFO calls for the first grant, want 1", n)
	}
	// That check said when the node votes; no need to ask again.
	time.Sleep(1100 * time.Millisecond)
	before = infos.Load()
	if ok, err := grant(); err != nil || !ok {
		t.Fatalf("grant a max lease (and the rounding second) later: counts = %v, %v; want true", ok, err)
	}
	if n := infos.Load() - before; n != 0 {
		t.Fatalf("%d INFO calls without a new connection, want 0", n)
	}

	// A new connection is checked once.
	if err := srv.Client(t).Do(ctx, "CLIENT", "KILL", "TYPE", "normal", "SKIPME", "yes").Err(); err != nil {
		t.Fatalf("CLIENT KILL: %v", err)
	}
	_ = rdb.Ping(ctx).Err() // meets the killed connection (no retries)
	before = infos.Load()
	if ok, err := grant(); err != nil || !ok {
		t.Fatalf("grant on a new connection: counts = %v, %v; want true", ok, err)
	}
	if ok, err := grant(); err != nil || !ok {
		t.Fatalf("second grant: counts = %v, %v; want true", ok, err)
	}
	if n := infos.Load() - before; n != 1 {
		t.Fatalf("%d INFO calls for two grants on one new connection, want 1", n)
	}

	// A restart breaks the connections; the new process is checked and
	// does not count.
	srv.Restart(t)
	_ = rdb.Ping(ctx).Err()
	if ok, err := grant(); err != nil || ok {
		t.Fatalf("grant right after a restart: counts = %v, %v; want false", ok, err)
	}
}

// fakeNode answers INFO server and CONFIG GET from its fields instead of
// a server, so a test can say what a node reports, uptimes that a
// stepped wall clock inflates included. No connection is ever made.
type fakeNode struct {
	runID       string
	uptime      time.Duration
	appendonly  string // "" leaves it out of the reply
	appendfsync string
	configErr   error // CONFIG GET's error, if any
}

func (f *fakeNode) DialHook(next redis.DialHook) redis.DialHook { return next }

func (f *fakeNode) ProcessHook(redis.ProcessHook) redis.ProcessHook {
	return func(_ context.Context, cmd redis.Cmder) error {
		f.answer(cmd)
		return cmd.Err()
	}
}

func (f *fakeNode) ProcessPipelineHook(redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(_ context.Context, cmds []redis.Cmder) error {
		for _, cmd := range cmds {
			f.answer(cmd)
		}
		return nil
	}
}

func (f *fakeNode) answer(cmd redis.Cmder) {
	switch c := cmd.(type) {
	case *redis.StringCmd: // INFO server
		c.SetVal(fmt.Sprintf("# Server\r\nrun_id:%s\r\nuptime_in_seconds:%d\r\n", f.runID, int64(f.uptime/time.Second)))
	case *redis.MapStringStringCmd: // CONFIG GET
		if f.configErr != nil {
			c.SetErr(f.configErr)
			return
		}
		name := fmt.Sprint(c.Args()[2])
		v := map[string]string{"appendonly": f.appendonly, "appendfsync": f.appendfsync}[name]
		if v == "" {
			c.SetVal(map[string]string{})
			return
		}
		c.SetVal(map[string]string{name: v})
	default:
		cmd.SetErr(fmt.Errorf("fakeNode: unexpected %v", cmd.Args()))
	}
}

// TestRestartGuardClockStep shows that the delayed-restart rule holds
// when the node's wall clock is stepped forward after a restart, which
// inflates uptime_in_seconds: a run_id that replaces one the guard saw
// votes a max lease after the client first saw it, whatever its uptime.
func TestRestartGuardClockStep(t *testing.T) {
	const maxLease = time.Hour // far above any slowness of the test
	ctx := context.Background()
	f := &fakeNode{}
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"})
	t.Cleanup(func() { rdb.Close() })
	rdb.AddHook(f)
	g := &restartGuard{maxLease: maxLease}
	newConnection := func() { // what the guard's DialHook counts
		g.mu.Lock()
		g.dials++
		g.mu.Unlock()
	}

	steps := []struct {
		name      string
		runID     string
		uptime    time.Duration
		wantCount bool
	}{
		// Nothing before it: uptime is all there is (the documented limit).
		{"first process, up two max leases", "aaa", 2 * maxLease, true},
		{"same process, reconnected", "aaa", 2*maxLease + time.Minute, true},
		// Restarted, and its clock stepped forward a day: uptime lies.
		{"new process whose clock was stepped", "bbb", 24 * time.Hour, false},
		// Reconnecting to it does not let its uptime move its start earlier.
		{"same new process, reconnected, uptime grown", "bbb", 25 * time.Hour, false},
		{"restarted again, honest uptime of 0", "ccc", 0, false},
	}
	for _, st := range steps {
		f.runID, f.uptime = st.runID, st.uptime
		newConnection()
		sent := time.Now()
		v, err := g.counts(ctx, rdb, sent)
		if err != nil {
			t.Fatalf("%s: counts: %v", st.name, err)
		}
		if v.counts != st.wantCount {
			t.Errorf("%s: counts = %v, want %v", st.name, v.counts, st.wantCount)
		}
		// Not counted: it votes a max lease after the client first saw it.
		if !v.counts && (v.wait <= maxLease-time.Minute || v.wait > maxLease+time.Second) {
			t.Errorf("%s: votes in %v, want about %v", st.name, v.wait, maxLease)
		}
	}
}

// TestRestartGuardPersistentNodes: under WithPersistentNodes a node votes
// at once when its settings persist every write or it will not say, and is
// held to the delayed-restart rule when they do not.
func TestRestartGuardPersistentNodes(t *testing.T) {
	const maxLease = time.Hour
	tests := []struct {
		name       string
		node       fakeNode
		persistent bool
		wantCount  bool
		wantWhy    string // in the verdict's why, when not counted
	}{
		{"not persistent: the rule", fakeNode{appendonly: "yes", appendfsync: "always"}, false, false, ""},
		{"aof always", fakeNode{appendonly: "yes", appendfsync: "always"}, true, true, ""},
		{"aof everysec", fakeNode{appendonly: "yes", appendfsync: "everysec"}, true, false, "appendfsync everysec"},
		{"aof off", fakeNode{appendonly: "no", appendfsync: "always"}, true, false, "appendonly is no"},
		{"CONFIG refused: the caller's promise", fakeNode{configErr: replyError("NOPERM this user has no permissions to run the 'config|get' command")}, true, true, ""},
		{"settings unknown: the caller's promise", fakeNode{}, true, true, ""},
		{"CONFIG timed out", fakeNode{configErr: context.DeadlineExceeded}, true, false, "persistence not confirmed"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := tt.node
			f.runID, f.uptime = "fresh", 0 // just started
			rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"})
			t.Cleanup(func() { rdb.Close() })
			rdb.AddHook(&f)
			g := &restartGuard{maxLease: maxLease, persistent: tt.persistent}
			v, err := g.counts(context.Background(), rdb, time.Now())
			if err != nil {
				t.Fatalf("counts: %v", err)
			}
			if v.counts != tt.wantCount {
				t.Fatalf("counts = %v, want %v", v.counts, tt.wantCount)
			}
			if tt.wantWhy != "" && (v.why == nil || !strings.Contains(v.why.Error(), tt.wantWhy)) {
				t.Errorf("why = %v, want it to mention %q", v.why, tt.wantWhy)
			}
		})
	}
}
