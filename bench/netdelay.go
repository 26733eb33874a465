package main

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// delayProxyFlag is the hidden flag that runs this program as a delaying
// proxy (see delayProxy).
const delayProxyFlag = "-delay-proxy"

// delayProxy stands a network of a given round-trip time between the
// clients of a row and its Redis. It is a TCP proxy in a process of its
// own (this program, run again with delayProxyFlag): every connection a
// client opens to it gets one of its own to Redis, and every chunk of
// bytes it reads, in either direction, is written on half a round trip
// after it was read. So a reply is not read before a round trip has passed
// since its request was written, and what Redis sends unasked (a pub/sub
// message, a RESP3 push, a keyspace invalidation) reaches the client half
// a round trip after Redis sent it, as on a real link. The chunks of all
// connections wait in one line in arrival order (the delay is the same for
// all), so a slow chunk never holds up a later one beyond its own time
// and throughput is not serialised by the delay. Its CPU is its own: it
// is not counted as the clients'. What it does not model: bandwidth, loss,
// and the TCP handshake (a new connection is usable at once).
type delayProxy struct {
	addr string
	cmd  *exec.Cmd
	in   io.WriteCloser
	out  *bufio.Scanner
}

func startDelayProxy(upstream string, rtt time.Duration) (*delayProxy, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(exe, delayProxyFlag, upstream, rtt.String())
	cmd.Stderr = os.Stderr
	cmd.SysProcAttr = procAttr()
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
	p := &delayProxy{cmd: cmd, in: in, out: bufio.NewScanner(out)}
	if !p.out.Scan() {
		p.close()
		return nil, fmt.Errorf("bench: delay proxy did not start (%v)", p.out.Err())
	}
	p.addr = strings.TrimSpace(p.out.Text())
	return p, nil
}

// proxyMark is what a proxy reports: the CPU time its process has used
// so far, and how late it wrote the chunks since its previous report.
type proxyMark struct {
	cpu              time.Duration
	chunks           int64
	lateP50, lateP99 time.Duration
}

func (p *delayProxy) mark() (proxyMark, error) {
	if _, err := io.WriteString(p.in, "\n"); err != nil {
		return proxyMark{}, fmt.Errorf("delay proxy: %w", err)
	}
	if !p.out.Scan() {
		return proxyMark{}, fmt.Errorf("delay proxy: no answer (%v)", p.out.Err())
	}
	var f [4]int64
	for i, field := range strings.Fields(p.out.Text()) {
		if i < len(f) {
			f[i], _ = strconv.ParseInt(field, 10, 64)
		}
	}
	return proxyMark{cpu: time.Duration(f[0]), chunks: f[1], lateP50: time.Duration(f[2]), lateP99: time.Duration(f[3])}, nil
}

func (p *delayProxy) close() {
	p.in.Close() // the proxy exits at the end of its input
	_ = p.cmd.Wait()
}

// proxies is the set of delay proxies of one row, or none on loopback.
type proxies []*delayProxy

// mark sums the proxies' CPU time so far, and says how late the first
// wrote its chunks since the previous mark.
func (ps proxies) mark() proxyMark {
	var sum proxyMark
	for i, p := range ps {
		m, err := p.mark()
		if err != nil {
			continue
		}
		if i == 0 {
			sum = m
		} else {
			sum.cpu += m.cpu
		}
	}
	return sum
}

// first is the proxies of the first n nodes (none on loopback).
func (ps proxies) first(n int) proxies {
	if len(ps) == 0 {
		return nil
	}
	return ps[:n:n]
}

func (ps proxies) close() {
	for _, p := range ps {
		p.close()
	}
}

// runDelayProxy is the proxy's process: it listens on a free loopback
// port, prints the address, forwards every connection to upstream with
// rtt/2 of delay each way (the event loop where the kernel has one, the
// delay line elsewhere), and for each line it reads prints the CPU time
// it has used, the chunks it wrote since the line before and the median
// and p99 of how late it wrote them, in ns. It ends at the end of its
// input.
func runDelayProxy(upstream, rttText string) int {
	rtt, err := time.ParseDuration(rttText)
	if err != nil || rtt < 0 {
		fmt.Fprintln(os.Stderr, "bench delay proxy: bad round-trip time", rttText)
		return 2
	}
	addr, err := startEventLoop(rtt/2, upstream)
	if errors.Is(err, errNoEventLoop) {
		addr, err = startDelayLine(rtt/2, upstream)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench delay proxy:", err)
		return 1
	}
	fmt.Println(addr)
	in := bufio.NewScanner(os.Stdin)
	for in.Scan() {
		n, p50, p99 := lateness.take()
		fmt.Println(int64(processCPU()), n, int64(p50), int64(p99))
	}
	return 0
}

// lateness counts how late the proxy writes each chunk, in µs buckets.
var lateness lateHistogram

type lateHistogram struct {
	buckets [10001]atomic.Int64 // µs late; the last one is 10 ms or more
}

func (h *lateHistogram) add(late time.Duration) {
	h.buckets[min(max(late/time.Microsecond, 0), time.Duration(len(h.buckets)-1))].Add(1)
}

// take returns the count, median and p99 since the previous take, and
// starts again.
func (h *lateHistogram) take() (n int64, p50, p99 time.Duration) {
	var counts [len(h.buckets)]int64
	for i := range h.buckets {
		counts[i] = h.buckets[i].Swap(0)
		n += counts[i]
	}
	if n == 0 {
		return 0, 0, 0
	}
	at := func(q float64) time.Duration {
		want, seen := int64(q*float64(n)+0.5), int64(0)
		for i, c := range counts {
			if seen += c; seen >= max(want, 1) {
				return time.Duration(i) * time.Microsecond
			}
		}
		return time.Duration(len(counts)-1) * time.Microsecond
	}
	return n, at(0.50), at(0.99)
}

// startDelayLine is the proxy on the Go runtime's sockets, where the
// event loop is not available: a goroutine reads each side, and the delay
// line writes.
func startDelayLine(delay time.Duration, upstream string) (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	line := newDelayLine(delay)
	go line.run()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go line.join(c, upstream)
		}
	}()
	return ln.Addr().String(), nil
}

// delayLine delivers chunks of bytes a fixed delay after they were read.
// One goroutine, locked to its thread, sleeps until the oldest chunk is
// due and writes it (see preciseSleep: the Go runtime's timers round a
// sleep under a millisecond up to about one, which would turn 0.2 ms into
// 1.1). Since every chunk waits the same delay, arrival order is due
// order, and a FIFO is all the line needs.
type delayLine struct {
	delay time.Duration

	mu   sync.Mutex
	q    []chunk
	wake chan struct{}
}

// chunk is bytes read from one side of a connection, to be written to
// the other at due; no bytes and a nil error means the side it was read
// from has ended, so the other is to be closed for writing.
type chunk struct {
	due  time.Time
	b    []byte
	dst  net.Conn
	last bool
}

func newDelayLine(delay time.Duration) *delayLine {
	return &delayLine{delay: delay, wake: make(chan struct{}, 1)}
}

func (l *delayLine) push(c chunk) {
	l.mu.Lock()
	c.due = time.Now().Add(l.delay) // taken under the lock: the queue stays in due order
	l.q = append(l.q, c)
	l.mu.Unlock()
	select {
	case l.wake <- struct{}{}:
	default:
	}
}

func (l *delayLine) run() {
	runtime.LockOSThread() // never unlocked: the thread's timer slack stays with it
	preciseThread()
	var spare []chunk
	for {
		l.mu.Lock()
		for len(l.q) == 0 {
			l.mu.Unlock()
			<-l.wake
			l.mu.Lock()
		}
		batch := l.q
		l.q = spare[:0]
		l.mu.Unlock()
		for i := range batch {
			c := &batch[i]
			if d := time.Until(c.due); d > 0 {
				preciseSleep(d)
			}
			lateness.add(time.Since(c.due))
			if c.last {
				if tc, ok := c.dst.(*net.TCPConn); ok {
					_ = tc.CloseWrite()
				} else {
					_ = c.dst.Close()
				}
			} else if _, err := c.dst.Write(c.b); err != nil {
				_ = c.dst.Close()
			}
			*c = chunk{}
		}
		spare = batch
	}
}

// join connects client to upstream through the line, both ways, until
// both sides have ended.
func (l *delayLine) join(client net.Conn, upstream string) {
	up, err := net.Dial("tcp", upstream)
	if err != nil {
		client.Close()
		return
	}
	for _, c := range []net.Conn{client, up} {
		if tc, ok := c.(*net.TCPConn); ok {
			_ = tc.SetNoDelay(true)
		}
	}
	var wg sync.WaitGroup
	wg.Go(func() { l.pump(client, up) })
	wg.Go(func() { l.pump(up, client) })
	wg.Wait()
	// Both directions have been read to their end; give the line time to
	// write what it still holds before the sockets go.
	time.Sleep(l.delay + 10*time.Millisecond)
	client.Close()
	up.Close()
}

// pump reads src until it ends and puts what it read on the line for dst.
func (l *delayLine) pump(src, dst net.Conn) {
	buf := make([]byte, 64<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			l.push(chunk{b: append([]byte(nil), buf[:n]...), dst: dst})
		}
		if err != nil {
			if !errors.Is(err, io.EOF) {
				_ = src.Close()
			}
			l.push(chunk{dst: dst, last: true})
			return
		}
	}
}
