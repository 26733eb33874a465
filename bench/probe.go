package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// probeIdle is how long the probe measures before the locks are taken.
const probeIdle = 3 * time.Second

// probeFlag is the hidden flag that runs this program as the probe.
const probeFlag = "-probe-addr"

// probe is another client of the server: one connection sending PING
// every millisecond, its latencies showing what others feel of the
// benchmark's load. It runs in a process of its own (this program, run
// again with probeFlag), as another client would: the benchmark's own
// garbage collection and goroutines do not delay it, only Redis and the
// machine's CPUs do.
type probe struct {
	cmd *exec.Cmd
	in  io.WriteCloser
	out *bufio.Scanner
}

func newProbe(addr string) (*probe, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(exe, probeFlag, addr)
	cmd.Stderr = os.Stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	p := &probe{cmd: cmd, in: in, out: bufio.NewScanner(out)}
	if _, err := p.mark(); err != nil { // started, and connected
		p.close()
		return nil, err
	}
	return p, nil
}

// mark returns the p99 latency of the pings since the previous mark.
func (p *probe) mark() (time.Duration, error) {
	if _, err := io.WriteString(p.in, "\n"); err != nil {
		return 0, fmt.Errorf("probe: %w", err)
	}
	if !p.out.Scan() {
		return 0, fmt.Errorf("probe: no answer (%v)", p.out.Err())
	}
	ns, err := strconv.ParseInt(strings.TrimSpace(p.out.Text()), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("probe: %w", err)
	}
	return time.Duration(ns), nil
}

// run measures for d and returns the p99 latency.
func (p *probe) run(ctx context.Context, d time.Duration) (time.Duration, error) {
	if _, err := p.mark(); err != nil {
		return 0, err
	}
	if !sleepCtx(ctx, d) {
		return 0, ctx.Err()
	}
	return p.mark()
}

func (p *probe) close() {
	p.in.Close() // the probe exits at the end of its input
	_ = p.cmd.Wait()
}

// runProbe is the probe's process: it pings addr every millisecond and,
// for each line it reads, writes the p99 latency in ns of the pings since
// the line before. It ends at the end of its input.
func runProbe(addr string) int {
	c := redis.NewClient(&redis.Options{Addr: addr, PoolSize: 1})
	defer c.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if err := c.Ping(ctx).Err(); err != nil {
		fmt.Fprintln(os.Stderr, "bench probe:", err)
		return 1
	}
	var (
		mu  sync.Mutex
		lat []time.Duration
	)
	go func() {
		tk := time.NewTicker(time.Millisecond)
		defer tk.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tk.C:
			}
			t := time.Now()
			if c.Ping(ctx).Err() == nil {
				d := time.Since(t)
				mu.Lock()
				lat = append(lat, d)
				mu.Unlock()
			}
		}
	}()
	in := bufio.NewScanner(os.Stdin)
	for in.Scan() {
		mu.Lock()
		got := lat
		lat = nil
		mu.Unlock()
		_, p99, _ := percentiles(got)
		fmt.Println(int64(p99))
	}
	return 0
}

// heapInUse returns the heap this process holds after a collection.
func heapInUse() int64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return int64(m.HeapInuse)
}

// writeHeapProfile writes a heap profile of this process to path, after a
// collection so that it shows what is live.
func writeHeapProfile(path string) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	runtime.GC()
	if err := pprof.WriteHeapProfile(f); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
