package redistest

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"
)

// withoutRedisServer hides redis-server from t by emptying PATH (and
// PADLOCK_REDIS_SERVER), so the fallback paths run even where
// redis-server is installed.
func withoutRedisServer(t *testing.T, require bool) {
	t.Helper()
	t.Setenv("PATH", t.TempDir())
	t.Setenv(serverEnv, "")
	if require {
		t.Setenv(requireEnv, "1")
	} else {
		t.Setenv(requireEnv, "")
	}
}

func TestFallbackMiniredis(t *testing.T) {
	withoutRedisServer(t, false)
	srv := Start(t)
	if srv.Real() {
		t.Fatal("Real() = true without redis-server, want false")
	}
	if srv.Miniredis() == nil {
		t.Fatal("Miniredis() = nil on the fallback")
	}
	c := srv.Client(t)
	ctx := context.Background()

	// Keys expire in real time: the clock is driven.
	if err := c.Set(ctx, "lease", "x", 100*time.Millisecond).Err(); err != nil {
		t.Fatalf("SET PX: %v", err)
	}
	deadline := time.Now().Add(2 * time.Second)
	for c.Exists(ctx, "lease").Val() == 1 {
		if time.Now().After(deadline) {
			t.Fatal("key with a 100ms TTL still exists after 2s")
		}
		time.Sleep(10 * time.Millisecond)
	}

	addr := srv.Addr()
	if err := c.Set(ctx, "k", "v", 0).Err(); err != nil {
		t.Fatalf("SET: %v", err)
	}
	srv.Kill(t)
	if srv.Miniredis() != nil {
		t.Error("Miniredis() after Kill is not nil")
	}
	if conn, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
		conn.Close()
		t.Fatalf("dial %s after Kill succeeded, want refused", addr)
	}
	srv.Restart(t)
	if srv.Addr() != addr {
		t.Errorf("Addr() after Restart = %s, want %s", srv.Addr(), addr)
	}
	if got := srv.DBSize(t); got != 0 {
		t.Errorf("DBSize() after Restart = %d, want 0 (a server without persistence comes back empty)", got)
	}
	if err := c.Set(ctx, "lease", "x", 100*time.Millisecond).Err(); err != nil {
		t.Fatalf("SET PX after Restart: %v", err)
	}
	time.Sleep(300 * time.Millisecond)
	if n := c.Exists(ctx, "lease").Val(); n != 0 {
		t.Error("key with a 100ms TTL exists 300ms later: the restarted server's clock is not driven")
	}
}

func TestFallbackStartN(t *testing.T) {
	withoutRedisServer(t, false)
	servers := StartN(t, 3)
	seen := map[string]bool{}
	for _, s := range servers {
		if s.Real() || seen[s.Addr()] {
			t.Errorf("server %s: Real() = %v, seen before = %v; want false, false", s.Addr(), s.Real(), seen[s.Addr()])
		}
		seen[s.Addr()] = true
	}
}

func TestFallbackSkips(t *testing.T) {
	withoutRedisServer(t, false)
	srv := Start(t)
	for name, f := range map[string]func(t *testing.T){
		"Pause":   func(t *testing.T) { srv.Pause(t) },
		"Resume":  func(t *testing.T) { srv.Resume(t) },
		"Require": func(t *testing.T) { Require(t) },
	} {
		var skipped bool
		t.Run(name, func(t *testing.T) {
			defer func() { skipped = t.Skipped() }()
			f(t)
		})
		if !skipped {
			t.Errorf("%s on the fallback did not skip", name)
		}
	}
}

// fatalTB records Fatalf instead of failing the real test, and ends the
// goroutine as the real one would.
type fatalTB struct {
	testing.TB
	mu  sync.Mutex
	msg string
}

func (f *fatalTB) Helper() {}

func (f *fatalTB) Fatalf(format string, args ...any) {
	f.mu.Lock()
	f.msg = fmt.Sprintf(format, args...)
	f.mu.Unlock()
	runtime.Goexit()
}

// fatalOf runs f against a fatalTB in its own goroutine and returns what
// it passed to Fatalf, or "" if it did not call it.
func fatalOf(t *testing.T, f func(testing.TB)) string {
	tb := &fatalTB{TB: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		f(tb)
	}()
	<-done
	tb.mu.Lock()
	defer tb.mu.Unlock()
	return tb.msg
}

func TestRequireEnvFailsWithoutRedis(t *testing.T) {
	withoutRedisServer(t, true)
	for name, f := range map[string]func(testing.TB){
		"Start":   func(t testing.TB) { Start(t) },
		"StartN":  func(t testing.TB) { StartN(t, 2) },
		"Require": func(t testing.TB) { Require(t) },
	} {
		msg := fatalOf(t, f)
		for _, want := range []string{"redis-server", requireEnv, "apt-get install -y redis-server"} {
			if !strings.Contains(msg, want) {
				t.Errorf("%s: Fatalf message %q does not mention %q", name, msg, want)
			}
		}
	}
}

// TestServerFromEnv: PADLOCK_REDIS_SERVER chooses the server binary, by
// path or by name on PATH, so the suite runs against any build (Valkey's
// valkey-server, a server built from source); one it cannot find is named
// in the failure.
func TestServerFromEnv(t *testing.T) {
	real, err := findRedisServer()
	if err != nil {
		Require(t) // skips, or fails under PADLOCK_REQUIRE_REDIS
	}
	// A directory of its own on PATH, holding the server under another
	// name, as valkey-server would be.
	dir := t.TempDir()
	other := filepath.Join(dir, "other-server")
	if err := os.Symlink(real, other); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ name, value string }{
		{"by path", other},
		{"by name", "other-server"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("PATH", dir)
			t.Setenv(serverEnv, tc.value)
			got, err := findRedisServer()
			if err != nil || got != other {
				t.Fatalf("findRedisServer() = %q, %v; want %q", got, err, other)
			}
			srv := Start(t)
			if !srv.Real() {
				t.Fatal("Start ran the fallback, want the server PADLOCK_REDIS_SERVER names")
			}
			if err := srv.Client(t).Ping(context.Background()).Err(); err != nil {
				t.Fatalf("PING: %v", err)
			}
		})
	}
	t.Run("missing", func(t *testing.T) {
		t.Setenv(serverEnv, filepath.Join(dir, "no-such-server"))
		_, err := findRedisServer()
		if err == nil || !strings.Contains(err.Error(), "no-such-server") || !strings.Contains(err.Error(), serverEnv) {
			t.Fatalf("findRedisServer() with a missing binary: got %v, want an error naming it and %s", err, serverEnv)
		}
	})
}
