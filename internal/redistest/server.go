package redistest

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
)

// Client defaults: short enough that a dead or paused server fails a test in
// about a second instead of hanging it, long enough for a loaded CI machine.
const (
	clientDialTimeout = time.Second
	clientIOTimeout   = time.Second
	clientPoolTimeout = 2 * time.Second
)

// Server is one Redis server started for a test: a redis-server process, or
// the in-process miniredis fallback (see Real). It is stopped when the test
// that started it ends. Its methods are safe for concurrent use; the ones
// that take a testing.TB must be called from that test's goroutine, as they
// may fail or skip it.
type Server struct {
	addr string
	real bool

	mu     sync.Mutex
	sp     spec        // how to run it again; real servers only
	proc   *process    // the running redis-server; nil once killed
	paused bool        // proc has been sent SIGSTOP and not SIGCONT
	mini   *miniServer // the fallback; nil once killed
}

// Start starts one Redis server for t and stops it when t ends.
//
// It runs redis-server on a free port of 127.0.0.1, without persistence,
// and returns once the server answers PING (or fails t after 10 s, quoting
// the server's output). Without redis-server on PATH it starts an
// in-process miniredis instead and logs that, unless PADLOCK_REQUIRE_REDIS=1
// is set, in which case t fails.
func Start(t testing.TB) *Server {
	t.Helper()
	return StartN(t, 1)[0]
}

// StartN starts n independent Redis servers for t, as Start does, on n
// distinct ports. Real servers are started in parallel, so five cost about
// as much as one.
func StartN(t testing.TB, n int) []*Server {
	t.Helper()
	if n < 1 {
		t.Fatalf("redistest: StartN needs n >= 1, got %d", n)
	}
	bin, err := findRedisServer()
	if err != nil {
		if redisRequired() {
			t.Fatalf("%v and %s=1 forbids the miniredis fallback; %s", err, requireEnv, installHint)
		}
		t.Logf("%v; using in-process miniredis instead (Pause and Resume skip; "+
			"%s=1 makes this a failure; %s)", err, requireEnv, installHint)
		return startMinis(t, n)
	}
	specs := make([]spec, n)
	for i := range specs {
		specs[i] = spec{bin: bin, dir: t.TempDir(), data: true}
	}
	return startReal(t, specs, false)
}

// startMinis starts n fallback servers for t.
func startMinis(t testing.TB, n int) []*Server {
	t.Helper()
	servers := make([]*Server, n)
	for i := range servers {
		ms, err := startMini("127.0.0.1:0")
		if err != nil {
			t.Fatalf("redistest: start miniredis: %v", err)
		}
		s := &Server{addr: ms.m.Addr(), mini: ms}
		t.Cleanup(func() { s.shutdown(t) })
		servers[i] = s
	}
	return servers
}

// startReal runs one redis-server per spec, in parallel, on fresh ports
// (with bus, ports whose cluster bus port is free too). The specs' dirs
// must exist. It fails t if any server does not come up, after arranging
// for the ones that did to be stopped.
func startReal(t testing.TB, specs []spec, bus bool) []*Server {
	t.Helper()
	ports, err := freePorts(len(specs), bus)
	if err != nil {
		t.Fatalf("%v", err)
	}
	servers := make([]*Server, len(specs))
	errs := make([]error, len(specs))
	var wg sync.WaitGroup
	for i := range specs {
		specs[i].port = ports[i]
		wg.Go(func() { servers[i], errs[i] = startProc(specs[i], bus) })
	}
	wg.Wait()
	for _, s := range servers {
		if s != nil {
			t.Cleanup(func() { s.shutdown(t) })
		}
	}
	if err := errors.Join(errs...); err != nil {
		t.Fatalf("%v", err)
	}
	return servers
}

// startProc launches sp, moving to another free port when someone else
// takes sp's port between freePorts and the server's bind.
func startProc(sp spec, bus bool) (*Server, error) {
	for attempt := 1; ; attempt++ {
		p, err := launch(sp)
		if err == nil {
			return &Server{addr: sp.addr(), real: true, sp: sp, proc: p}, nil
		}
		if !errors.Is(err, errPortInUse) || attempt == launchAttempts {
			return nil, err
		}
		ports, perr := freePorts(1, bus)
		if perr != nil {
			return nil, errors.Join(err, perr)
		}
		sp.port = ports[0]
	}
}

// shutdown is the cleanup of a server: it quotes a real server's output
// when the test failed, then stops it for good.
func (s *Server) shutdown(t testing.TB) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.proc != nil {
		if t.Failed() {
			t.Logf("redistest: output of redis-server on %s ends:\n%s", s.addr, s.proc.output())
		}
		if err := s.proc.kill(); err != nil {
			t.Errorf("%v", err)
		}
		s.proc, s.paused = nil, false
	}
	if s.mini != nil {
		s.mini.close()
		s.mini = nil
	}
}

// Addr returns the server's address, "127.0.0.1:port". It stays the same
// across Kill and Restart.
func (s *Server) Addr() string { return s.addr }

// Real reports whether s is a redis-server process; false means it is the
// in-process miniredis fallback.
func (s *Server) Real() bool { return s.real }

// Miniredis returns the fallback's miniredis, or nil for a real server or
// a killed fallback. Restart replaces it, so fetch it again afterwards. Its
// clock is already advanced in real time every 10 ms; FastForward moves it
// further.
func (s *Server) Miniredis() *miniredis.Miniredis {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.mini == nil {
		return nil
	}
	return s.mini.m
}

// Options returns a new copy of the go-redis options Client uses: s's
// address; 1 s dial, read and write timeouts; 2 s pool timeout; one dial
// attempt (DialerRetries 1) and no command retries (MaxRetries -1), so a
// fault shows on the first command instead of being retried away; and
// ContextTimeoutEnabled, as padlock.New requires (a test that wants
// go-redis to wait out its ReadTimeout turns it off).
func (s *Server) Options() *redis.Options {
	return &redis.Options{
		Addr:                  s.addr,
		DialTimeout:           clientDialTimeout,
		DialerRetries:         1,
		ReadTimeout:           clientIOTimeout,
		WriteTimeout:          clientIOTimeout,
		PoolTimeout:           clientPoolTimeout,
		MaxRetries:            -1,
		ContextTimeoutEnabled: true,
	}
}

// Client returns a new go-redis client for s, made from Options and then
// changed by each of opts in turn. It is closed when t ends, before the
// server stops.
func (s *Server) Client(t testing.TB, opts ...func(*redis.Options)) *redis.Client {
	t.Helper()
	o := s.Options()
	for _, f := range opts {
		f(o)
	}
	c := redis.NewClient(o)
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// PersistEveryWrite makes s append every write to its AOF and fsync it
// before it answers (appendonly yes, appendfsync always), as a Redlock
// node whose restart loses nothing runs. Turning the AOF on forks the
// server, which on a loaded machine may take seconds: the commands wait
// up to 30 s for their replies.
func (s *Server) PersistEveryWrite(t testing.TB) {
	t.Helper()
	c := s.Client(t, func(o *redis.Options) { o.ReadTimeout, o.ContextTimeoutEnabled = 30*time.Second, false })
	for _, kv := range [][2]string{{"appendonly", "yes"}, {"appendfsync", "always"}} {
		if err := c.ConfigSet(context.Background(), kv[0], kv[1]).Err(); err != nil {
			t.Fatalf("redistest: CONFIG SET %s %s on %s: %v", kv[0], kv[1], s.Addr(), err)
		}
	}
}

// Kill stops the server at once, as a crash would: SIGKILL for a real
// server (resuming it first if paused), Close for the fallback. It returns
// once the port refuses connections. Killing a killed server does nothing.
func (s *Server) Kill(t testing.TB) {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.killLocked(); err != nil {
		t.Fatalf("%v", err)
	}
}

func (s *Server) killLocked() error {
	if s.mini != nil {
		s.mini.close()
		s.mini = nil
	}
	if s.proc == nil {
		return nil
	}
	err := s.proc.kill()
	s.proc, s.paused = nil, false
	return err
}

// Pause freezes a real server with SIGSTOP: connections are still accepted
// by the kernel but no command is answered, as with a server stuck on a slow
// command or cut off by a network partition. It returns once the process is
// stopped. On the fallback, which cannot hang, Pause skips the test.
func (s *Server) Pause(t testing.TB) {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.real {
		t.Skipf("redistest: Pause needs a real redis-server; miniredis cannot hang (%s)", installHint)
	}
	if s.proc == nil {
		t.Fatalf("redistest: Pause of killed server %s", s.addr)
	}
	if s.paused {
		return
	}
	if err := stopProcess(s.proc.cmd.Process); err != nil {
		t.Fatalf("redistest: pause redis-server on %s: %v", s.addr, err)
	}
	awaitStopped(s.proc.cmd.Process)
	s.paused = true
}

// Resume continues a server stopped by Pause with SIGCONT; it answers the
// commands that waited, unless their clients gave up. Resuming a server that
// is not paused does nothing. On the fallback Resume skips the test, as
// Pause does.
func (s *Server) Resume(t testing.TB) {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.real {
		t.Skipf("redistest: Resume needs a real redis-server; miniredis cannot hang (%s)", installHint)
	}
	if s.proc == nil || !s.paused {
		return
	}
	if err := contProcess(s.proc.cmd.Process); err != nil {
		t.Fatalf("redistest: resume redis-server on %s: %v", s.addr, err)
	}
	s.paused = false
}

// Restart kills the server if it is running and starts it again on the same
// address, empty, as a crashed server without persistence comes back. It
// returns once the new server answers PING. Clients of s reconnect on their
// next command; connections they held are broken.
func (s *Server) Restart(t testing.TB) {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.killLocked(); err != nil {
		t.Fatalf("%v", err)
	}
	if !s.real {
		// A fresh miniredis rather than miniredis.Restart, which would
		// keep the data a real server without persistence loses.
		ms, err := startMini(s.addr)
		if err != nil {
			t.Fatalf("redistest: restart miniredis on %s: %v", s.addr, err)
		}
		s.mini = ms
		return
	}
	// The port was ours a moment ago, but anyone may grab it meanwhile;
	// give them a little time to let go rather than fail at once.
	var err error
	for attempt := 1; attempt <= launchAttempts; attempt++ {
		var p *process
		if p, err = launch(s.sp); err == nil {
			s.proc = p
			return
		}
		if !errors.Is(err, errPortInUse) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("redistest: restart on %s: %v", s.addr, err)
}

// DBSize returns the number of keys in database 0, failing t if the server
// does not answer.
func (s *Server) DBSize(t testing.TB) int64 {
	t.Helper()
	var n int64
	s.do(t, func(ctx context.Context, c *redis.Client) (err error) {
		n, err = c.DBSize(ctx).Result()
		return err
	})
	return n
}

// Keys returns every key in database 0, sorted, failing t if the server
// does not answer. It uses KEYS *, which is fine for the few keys of a test.
func (s *Server) Keys(t testing.TB) []string {
	t.Helper()
	var keys []string
	s.do(t, func(ctx context.Context, c *redis.Client) (err error) {
		keys, err = c.Keys(ctx, "*").Result()
		return err
	})
	slices.Sort(keys)
	return keys
}

// do runs f with a short-lived client, so helpers work from any test,
// cleanup included, without leaving a client behind.
func (s *Server) do(t testing.TB, f func(context.Context, *redis.Client) error) {
	t.Helper()
	c := redis.NewClient(s.Options())
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := f(ctx, c); err != nil {
		t.Fatalf("redistest: %s: %v", s.addr, err)
	}
}

// String returns the server's address.
func (s *Server) String() string { return s.addr }
