package redistest

import (
	"context"
	"errors"
	"net"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

func TestStartAnswersPing(t *testing.T) {
	srv := Start(t)
	if !strings.HasPrefix(srv.Addr(), "127.0.0.1:") {
		t.Errorf("Addr() = %q, want 127.0.0.1:port", srv.Addr())
	}
	if _, err := findRedisServer(); err == nil && !srv.Real() {
		t.Errorf("Real() = false with redis-server on PATH, want true")
	}
	c := srv.Client(t)
	if got, err := c.Ping(context.Background()).Result(); err != nil || got != "PONG" {
		t.Fatalf("PING = %q, %v; want PONG, nil", got, err)
	}
	if err := c.Set(context.Background(), "k", "v", 0).Err(); err != nil {
		t.Fatalf("SET: %v", err)
	}
	if got := srv.Keys(t); len(got) != 1 || got[0] != "k" {
		t.Errorf("Keys() = %q, want [k]", got)
	}
}

func TestStartNDistinctServers(t *testing.T) {
	const n = 3
	servers := StartN(t, n)
	if len(servers) != n {
		t.Fatalf("StartN(%d) gave %d servers", n, len(servers))
	}
	seen := map[string]bool{}
	for _, s := range servers {
		if seen[s.Addr()] {
			t.Errorf("address %s given twice", s.Addr())
		}
		seen[s.Addr()] = true
	}
	// Independent: a key written to one is on no other.
	if err := servers[0].Client(t).Set(context.Background(), "only-on-0", 1, 0).Err(); err != nil {
		t.Fatalf("SET: %v", err)
	}
	for i, s := range servers {
		want := int64(0)
		if i == 0 {
			want = 1
		}
		if got := s.DBSize(t); got != want {
			t.Errorf("server %d: DBSize() = %d, want %d", i, got, want)
		}
	}
}

func TestKillMakesUnreachable(t *testing.T) {
	Require(t) // the fallback's Kill is covered in TestFallbackMiniredis
	srv := Start(t)
	c := srv.Client(t)
	ctx := context.Background()
	if err := c.Ping(ctx).Err(); err != nil {
		t.Fatalf("PING before Kill: %v", err)
	}
	pid := pidOf(t, srv)
	srv.Kill(t)
	if err := c.Ping(ctx).Err(); err == nil {
		t.Fatal("PING after Kill succeeded, want an error")
	}
	if processExists(pid) {
		t.Fatalf("redis-server (pid %d) still exists after Kill", pid)
	}
	srv.Kill(t) // a second Kill does nothing
}

// pidOf returns the pid of srv's redis-server process.
func pidOf(t *testing.T, srv *Server) int {
	t.Helper()
	srv.mu.Lock()
	defer srv.mu.Unlock()
	if srv.proc == nil {
		t.Fatalf("server %s has no process", srv.Addr())
	}
	return srv.proc.cmd.Process.Pid
}

// processExists reports whether a process with this pid exists. It asks
// the OS rather than the harness: the point is that nothing is left behind.
func processExists(pid int) bool {
	p, err := os.FindProcess(pid)
	if err != nil {
		return false
	}
	return p.Signal(syscall.Signal(0)) == nil
}

func TestRestartSamePortEmpty(t *testing.T) {
	srv := Start(t)
	addr := srv.Addr()
	c := srv.Client(t)
	ctx := context.Background()
	if err := c.Set(ctx, "k", "v", 0).Err(); err != nil {
		t.Fatalf("SET: %v", err)
	}
	srv.Restart(t)
	if srv.Addr() != addr {
		t.Errorf("Addr() after Restart = %s, want %s", srv.Addr(), addr)
	}
	if got := srv.DBSize(t); got != 0 {
		t.Errorf("DBSize() after Restart = %d, want 0", got)
	}
	// The client reconnects by itself; its old connection was broken, and
	// without retries the first command may report that.
	var err error
	for range 2 {
		if err = c.Set(ctx, "k2", "v", 0).Err(); err == nil {
			break
		}
	}
	if err != nil {
		t.Fatalf("SET after Restart: %v", err)
	}

	srv.Kill(t)
	srv.Restart(t) // from killed, too
	if got := srv.DBSize(t); got != 0 {
		t.Errorf("DBSize() after Kill and Restart = %d, want 0", got)
	}
}

func TestPauseTimesOutResumeRecovers(t *testing.T) {
	srv := Start(t)
	// The PING the pause must time out waits 200ms; the others wait long
	// enough for a loaded machine, where a running server's answer once
	// took longer than 200ms.
	c := srv.Client(t, func(o *redis.Options) { o.ReadTimeout = 200 * time.Millisecond })
	patient := srv.Client(t, func(o *redis.Options) { o.ReadTimeout = 10 * time.Second })
	ctx := context.Background()
	for _, rdb := range []*redis.Client{c, patient} {
		if err := rdb.Ping(ctx).Err(); err != nil {
			t.Fatalf("PING before Pause: %v", err)
		}
	}
	srv.Pause(t)
	start := time.Now()
	err := c.Ping(ctx).Err()
	var nerr net.Error
	if !errors.As(err, &nerr) || !nerr.Timeout() {
		t.Fatalf("PING while paused = %v, want a timeout", err)
	}
	// Not the 10s of the patient client, nor no end at all: the read
	// timeout ended it (a loaded machine may be slow to say so).
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("PING while paused took %v, want about the 200ms read timeout", d)
	}
	srv.Resume(t)
	if err := patient.Ping(ctx).Err(); err != nil {
		t.Fatalf("PING after Resume: %v", err)
	}
	// The client whose PING timed out recovers too: one of a few tries at
	// 200ms each gets its answer.
	for try := 1; ; try++ {
		err := c.Ping(ctx).Err()
		if err == nil {
			break
		}
		if try == 5 {
			t.Fatalf("PING after Resume on the client that timed out: %v (%d tries)", err, try)
		}
	}
	srv.Resume(t) // resuming a running server does nothing
}

func TestCleanupKillsPausedServer(t *testing.T) {
	Require(t)
	var pid int
	t.Run("pause and leave", func(t *testing.T) {
		srv := Start(t)
		pid = pidOf(t, srv)
		srv.Pause(t)
	})
	// The subtest's cleanup resumed and killed the paused server.
	if processExists(pid) {
		t.Fatalf("paused redis-server (pid %d) still exists after cleanup", pid)
	}
}
