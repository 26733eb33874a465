package padlock

import (
	"bytes"
	"context"
	"errors"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/padlockgo/padlock/internal/redistest"
	"github.com/redis/go-redis/v9"
)

// stallHook keeps back, once, the bytes of the first write that carries
// match, as a connection whose segments are stuck in the network would:
// the client's read times out and go-redis (with its default MaxRetries)
// sends the command again on another connection. The test delivers the
// stuck copy later.
type stallHook struct {
	match []byte

	mu      sync.Mutex
	armed   bool
	stalled []byte
}

type stallConn struct {
	net.Conn
	h *stallHook
}

func (c stallConn) Write(b []byte) (int, error) {
	c.h.mu.Lock()
	hold := c.h.armed && c.h.stalled == nil && bytes.Contains(b, c.h.match)
	if hold {
		c.h.stalled = bytes.Clone(b)
	}
	c.h.mu.Unlock()
	if hold {
		return len(b), nil
	}
	return c.Conn.Write(b)
}

func (h *stallHook) DialHook(next redis.DialHook) redis.DialHook {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := next(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return stallConn{Conn: c, h: h}, nil
	}
}

func (h *stallHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook { return next }

func (h *stallHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// TestRetriedExtendCopyRunsLate: with go-redis's default retries, a
// shorter Extend whose first copy is stuck on its way would be sent again
// and confirmed, and padlock would see no lost reply. A longer Extend
// follows. The stuck copy then arrives and runs: Redis holds the shorter
// lease, and the holder must not trust the longer one.
func TestRetriedExtendCopyRunsLate(t *testing.T) {
	srv := redistest.Start(t)
	if !srv.Real() {
		t.Skip("needs a redis-server behind a real socket")
	}
	const short = time.Second
	hook := &stallHook{match: []byte("\r\n$4\r\n1000\r\n")}
	rdb := srv.Client(t, func(o *redis.Options) {
		o.MaxRetries = 3 // go-redis's default
		o.ReadTimeout = 200 * time.Millisecond
	})
	rdb.AddHook(hook)
	l := mustNew(t, rdb)
	defer l.Close()
	ctx := context.Background()
	const key = "retried"
	lk, err := l.Acquire(ctx, key, Options{TTL: 3 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer lk.Release(ctx)
	if err := extendScript.Load(ctx, rdb).Err(); err != nil {
		t.Fatal(err)
	}
	hook.mu.Lock()
	hook.armed = true
	hook.mu.Unlock()
	// go-redis would send the command again on another connection and
	// report that copy's answer; padlock's commands are sent once, so the
	// Extend reports Redis unavailable, and the copy held back is a change
	// that may still run.
	if err := lk.Extend(ctx, short); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("Extend(%v) whose copy is held back: %v, want ErrUnavailable", short, err)
	}
	hook.mu.Lock()
	stuck := hook.stalled
	hook.mu.Unlock()
	if stuck == nil {
		t.Fatal("no copy of the Extend was held back")
	}
	if err := lk.Extend(ctx, 30*time.Second); err != nil {
		t.Fatalf("Extend(30s): %v", err)
	}
	// The stuck copy arrives.
	c, err := net.Dial("tcp", srv.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Write(stuck); err != nil {
		t.Fatal(err)
	}
	reply := make([]byte, 64)
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	n, err := c.Read(reply)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("the stuck copy ran: %q", reply[:n])
	time.Sleep(short + 200*time.Millisecond)
	contend(t, srv, key, lk, 0)
}
