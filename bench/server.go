package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// server is one redis-server process started for the benchmark: loopback
// only, no persistence, killed by stop (and by the kernel if the benchmark
// dies first, where the platform allows it).
type server struct {
	addr    string
	dir     string
	cmd     *exec.Cmd
	exited  chan struct{}
	started time.Time
}

// launcher starts redis-server processes and stops every one it started.
type launcher struct {
	bin string

	mu      sync.Mutex
	servers []*server
}

func newLauncher(bin string) (*launcher, error) {
	if bin == "" {
		bin = "redis-server"
	}
	path, err := exec.LookPath(bin)
	if err != nil {
		return nil, fmt.Errorf("bench: %s not found (install redis-server 7, e.g. apt-get install redis-server): %w", bin, err)
	}
	return &launcher{bin: path}, nil
}

// start runs n servers in parallel, each with the redis-server arguments
// extra, and returns once each answers PING.
func (l *launcher) start(ctx context.Context, n int, extra ...string) ([]*server, error) {
	out := make([]*server, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range out {
		wg.Go(func() { out[i], errs[i] = l.startOne(ctx, extra...) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		for _, s := range out {
			if s != nil {
				l.stop(s)
			}
		}
		return nil, err
	}
	return out, nil
}

const launchAttempts = 5

func (l *launcher) startOne(ctx context.Context, extra ...string) (*server, error) {
	var lastErr error
	for range launchAttempts {
		s, err := l.launch(ctx, extra...)
		if err == nil {
			return s, nil
		}
		lastErr = err
		if ctx.Err() != nil {
			break
		}
	}
	return nil, lastErr
}

func (l *launcher) launch(ctx context.Context, extra ...string) (*server, error) {
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "padlock-bench-")
	if err != nil {
		return nil, fmt.Errorf("bench: temp dir: %w", err)
	}
	logPath := filepath.Join(dir, "redis.log")
	logFile, err := os.Create(logPath)
	if err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("bench: server log: %w", err)
	}
	defer logFile.Close()
	args := []string{
		"--port", strconv.Itoa(port),
		"--bind", "127.0.0.1",
		"--save", "",
		"--appendonly", "no",
		"--daemonize", "no",
		"--protected-mode", "no",
		"--dir", dir,
		"--logfile", "",
	}
	cmd := exec.Command(l.bin, append(args, extra...)...)
	cmd.Dir = dir
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = procAttr()
	if err := cmd.Start(); err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("bench: start redis-server: %w", err)
	}
	s := &server{addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), dir: dir, cmd: cmd, exited: make(chan struct{}), started: time.Now()}
	go func() {
		_ = cmd.Wait()
		close(s.exited)
	}()
	l.mu.Lock()
	l.servers = append(l.servers, s)
	l.mu.Unlock()
	if err := s.awaitReady(ctx); err != nil {
		log, _ := os.ReadFile(logPath)
		l.stop(s)
		return nil, fmt.Errorf("%w; server output:\n%s", err, tail(string(log), 10))
	}
	return s, nil
}

// awaitReady polls PING for up to 10 s.
func (s *server) awaitReady(ctx context.Context) error {
	c := redis.NewClient(&redis.Options{Addr: s.addr, DialTimeout: 200 * time.Millisecond, MaxRetries: -1})
	defer c.Close()
	deadline := time.Now().Add(10 * time.Second)
	for {
		select {
		case <-s.exited:
			return fmt.Errorf("bench: redis-server on %s exited at start", s.addr)
		default:
		}
		pctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
		err := c.Ping(pctx).Err()
		cancel()
		if err == nil {
			return nil
		}
		if ctx.Err() != nil || time.Now().After(deadline) {
			return fmt.Errorf("bench: redis-server on %s did not answer: %w", s.addr, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// stop kills s, waits for it to exit (up to 5 s) and removes its directory.
func (l *launcher) stop(s *server) {
	l.mu.Lock()
	for i, x := range l.servers {
		if x == s {
			l.servers = append(l.servers[:i], l.servers[i+1:]...)
			break
		}
	}
	l.mu.Unlock()
	_ = s.cmd.Process.Kill()
	select {
	case <-s.exited:
	case <-time.After(5 * time.Second):
	}
	os.RemoveAll(s.dir)
}

// stopAll stops every server still running.
func (l *launcher) stopAll() {
	l.mu.Lock()
	servers := append([]*server(nil), l.servers...)
	l.mu.Unlock()
	for _, s := range servers {
		l.stop(s)
	}
}

// freePort returns a loopback port that was free a moment ago. Another
// process may take it before redis-server binds it; launch then fails and
// startOne tries another.
func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("bench: find a free port: %w", err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
