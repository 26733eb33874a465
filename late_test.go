package padlock_test

import (
	"errors"
	"io"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/padlockgo/padlock"
	"github.com/padlockgo/padlock/internal/redistest"
	"github.com/redis/go-redis/v9"
)

// delayProxy forwards TCP connections to target, holding back everything
// the server sends by delay: a slow network, or a server stalled after it
// ran the command. It stops when t ends.
func delayProxy(t *testing.T, target string, delay time.Duration) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		conns []net.Conn
	)
	track := func(c net.Conn) {
		mu.Lock()
		conns = append(conns, c)
		mu.Unlock()
	}
	wg.Go(func() {
		for {
			client, err := ln.Accept()
			if err != nil {
				return
			}
			server, err := net.Dial("tcp", target)
			if err != nil {
				client.Close()
				continue
			}
			track(client)
			track(server)
			wg.Go(func() { _, _ = io.Copy(server, client) })
			wg.Go(func() {
				buf := make([]byte, 64<<10)
				for {
					n, err := server.Read(buf)
					if n > 0 {
						time.Sleep(delay)
						if _, werr := client.Write(buf[:n]); werr != nil {
							return
						}
					}
					if err != nil {
						return
					}
				}
			})
		}
	})
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	return ln.Addr().String()
}

// TestLateGrantIsNotALock: a grant whose reply arrives after the lease's
// trusted part ran out must not be handed to the caller, who would then
// work under a lock another owner may already hold.
func TestLateGrantIsNotALock(t *testing.T) {
	srv := redistest.Start(t)
	direct := srv.Client(t)
	slow := redis.NewClient(&redis.Options{Addr: delayProxy(t, srv.Addr(), 300*time.Millisecond), ReadTimeout: 5 * time.Second, MaxRetries: -1, ContextTimeoutEnabled: true})
	t.Cleanup(func() { slow.Close() })
	l := padlock.MustNew(t, slow)
	t.Cleanup(func() { l.Close() })
	ctx := ctxFor(t)
	key := testKey(t)

	lk, err := l.Acquire(ctx, key, padlock.Options{TTL: 200 * time.Millisecond})
	if lk != nil || !errors.Is(err, padlock.ErrUnavailable) || errors.Is(err, padlock.ErrNotAcquired) {
		t.Fatalf("Acquire whose grant came back after its 200ms lease: got %v, %v; want ErrUnavailable only", lk, err)
	}
	// The grant was undone, so the key is free for others at once, not
	// only when the lease runs out.
	if n := direct.Exists(ctx, "padlock:{"+key+"}").Val(); n != 0 {
		t.Fatalf("the late grant was left in Redis")
	}

	// With a lease that outlasts the delay, the same slow path works.
	lk, err = l.Acquire(ctx, key, padlock.Options{TTL: 5 * time.Second})
	if err != nil {
		t.Fatalf("Acquire with a 5s lease over the slow link: %v", err)
	}
	if err := lk.Release(ctx); err != nil {
		t.Fatalf("Release: %v", err)
	}
}
