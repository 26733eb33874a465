package padlock

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/padlockgo/padlock/internal/redistest"
)

func quorumOf(n int) *quorum {
	return &quorum{nodes: make([]*node, n), need: n/2 + 1}
}

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

func TestQuorumError(t *testing.T) {
	votes := []vote{{yes: true}, {restarting: true}, {err: errors.New("127.0.0.1:1: connection refused")}}
	q := quorumOf(3)
	acquire := &quorumError{op: "acquire", tally: q.count(votes), nodes: 3, need: 2}
	for _, want := range []string{"padlock: no quorum for acquire: 1 of 3 nodes agreed, 2 needed", "1 restarted", "connection refused"} {
		if !strings.Contains(acquire.Error(), want) {
			t.Errorf("error %q does not contain %q", acquire.Error(), want)
		}
	}
	if !errors.Is(acquire, ErrNotAcquired) {
		t.Error("an acquire's quorum error does not match ErrNotAcquired")
	}
	if release := (&quorumError{op: "release"}); errors.Is(release, ErrNotAcquired) {
		t.Error("a release's quorum error matches ErrNotAcquired")
	}
	if errors.Is(acquire, context.DeadlineExceeded) {
		t.Error("a quorum error matches context.DeadlineExceeded: a node's timeout would pass for the caller's")
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
		return g.counts(ctx, rdb, sent)
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
