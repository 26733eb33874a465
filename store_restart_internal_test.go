package padlock

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/padlockgo/padlock/internal/redistest"
	"github.com/redis/go-redis/v9"
)

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
