package main

import (
	"bufio"
	"errors"
	"io"
	"net"
	"strconv"
	"testing"
	"time"
)

// delayers are the proxy's two ways of delaying: the event loop (Linux)
// and the delay line on Go's sockets.
var delayers = map[string]func(delay time.Duration, upstream string) (string, error){
	"event loop": startEventLoop,
	"delay line": startDelayLine,
}

// echoThrough starts an echo server, and the proxy of round-trip time rtt
// in front of it, and returns a connection through the proxy.
func echoThrough(t *testing.T, start func(time.Duration, string) (string, error), rtt time.Duration) net.Conn {
	t.Helper()
	echo, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { echo.Close() })
	go func() {
		for {
			c, err := echo.Accept()
			if err != nil {
				return
			}
			go func() { _, _ = io.Copy(c, c); c.Close() }()
		}
	}()
	front, err := start(rtt/2, echo.Addr().String())
	if errors.Is(err, errNoEventLoop) {
		t.Skip(err)
	}
	if err != nil {
		t.Fatal(err)
	}
	c, err := net.Dial("tcp", front)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// A reply is not read before a round trip has passed since its request
// was written (how much later it comes is the network rows' business).
func TestDelayRoundTrip(t *testing.T) {
	for name, start := range delayers {
		t.Run(name, func(t *testing.T) { testRoundTrip(t, start) })
	}
}

func testRoundTrip(t *testing.T, start func(time.Duration, string) (string, error)) {
	const rtt = 2 * time.Millisecond
	c := echoThrough(t, start, rtt)
	buf := make([]byte, 4)
	var slowest time.Duration
	for range 50 {
		start := time.Now()
		if _, err := c.Write([]byte("ping")); err != nil {
			t.Fatal(err)
		}
		if _, err := io.ReadFull(c, buf); err != nil {
			t.Fatal(err)
		}
		d := time.Since(start)
		if d < rtt {
			t.Fatalf("reply after %v, before the round trip of %v", d, rtt)
		}
		slowest = max(slowest, d)
	}
	t.Logf("slowest round trip %v (setting %v)", slowest, rtt)
}

// Requests written back to back, faster than the round trip, keep their
// order and are not held up behind each other: the last reply comes about
// one round trip after the last request, not one per request.
func TestDelayPipelines(t *testing.T) {
	for name, start := range delayers {
		t.Run(name, func(t *testing.T) { testPipelines(t, start) })
	}
}

func testPipelines(t *testing.T, listen func(time.Duration, string) (string, error)) {
	const rtt = 20 * time.Millisecond
	const n = 200
	c := echoThrough(t, listen, rtt)
	wrote := make(chan time.Time, 1)
	go func() {
		for i := range n {
			if _, err := c.Write([]byte(strconv.Itoa(i) + "\n")); err != nil {
				return
			}
			time.Sleep(50 * time.Microsecond)
		}
		wrote <- time.Now()
	}()
	in := bufio.NewScanner(c)
	for i := range n {
		if !in.Scan() {
			t.Fatalf("reply %d: %v", i, in.Err())
		}
		if got := in.Text(); got != strconv.Itoa(i) {
			t.Fatalf("reply %d is %q: out of order", i, got)
		}
	}
	last := time.Now()
	if after := last.Sub(<-wrote); after > 5*rtt {
		t.Fatalf("the last of %d pipelined requests was answered %v after it was written, at a round trip of %v: the line serialises them", n, after, rtt)
	}
}

func TestParseRTTs(t *testing.T) {
	got, err := parseRTTs("1ms, 200us,0")
	if err != nil {
		t.Fatal(err)
	}
	want := []time.Duration{time.Millisecond, 200 * time.Microsecond, 0}
	if len(got) != len(want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("got %v, want %v", got, want)
		}
	}
	for _, bad := range []string{"", "fast", "-1ms"} {
		if _, err := parseRTTs(bad); err == nil {
			t.Errorf("parseRTTs(%q): no error", bad)
		}
	}
	if v := rttVariant("x8 goroutines", 200*time.Microsecond); v != "x8 goroutines, RTT 0.2ms" {
		t.Errorf("rttVariant = %q", v)
	}
	if v := rttVariant("", time.Millisecond); v != "RTT 1ms" {
		t.Errorf("rttVariant = %q", v)
	}
	if v := rttVariant("64 keys x4", 0); v != "64 keys x4" {
		t.Errorf("rttVariant on loopback = %q", v)
	}
}
