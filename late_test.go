package padlock_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/padlockgo/padlock"
	"github.com/padlockgo/padlock/internal/hashslot"
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

// slowKeysHook makes the first script call that names a given key first
// slow: its reply comes late after the server ran it (reply), or it
// reaches the server late (send).
type slowKeysHook struct {
	reply, send map[string]time.Duration // by Redis key
	mu          sync.Mutex
	done        map[string]bool
}

func (h *slowKeysHook) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *slowKeysHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

func (h *slowKeysHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		args := cmd.Args()
		if len(args) < 4 || cmd.Name() != "evalsha" && cmd.Name() != "eval" {
			return next(ctx, cmd)
		}
		key := fmt.Sprint(args[3])
		h.mu.Lock()
		first := !h.done[key]
		h.done[key] = true
		h.mu.Unlock()
		if !first {
			return next(ctx, cmd)
		}
		time.Sleep(h.send[key])
		err := next(ctx, cmd)
		time.Sleep(h.reply[key])
		return err
	}
}

// TestLateSetIsNotALock takes, with AcquireAll, two keys on two Cluster
// masters (one script each, in slot order): the first's reply comes 1s
// late, the second's command reaches its master 1.3s late. Each reply
// came within its own call's trusted lease (2s less the margin), but the
// second came after the first key's trust had run out: the set must not
// be returned (it would be lost at once), and its keys must be free.
func TestLateSetIsNotALock(t *testing.T) {
	t.Parallel()
	c := redistest.StartCluster(t, 3)
	cc := c.Client(t)
	l := padlock.MustNew(t, cc)
	t.Cleanup(func() { l.Close() })
	byNode := padlock.ClusterKeys(l, 3, 1)
	keys := []string{byNode[0][0], byNode[1][0]}
	slices.SortFunc(keys, func(a, b string) int { return hashslot.Slot(l.RedisKey(a)) - hashslot.Slot(l.RedisKey(b)) })
	cc.AddHook(&slowKeysHook{
		reply: map[string]time.Duration{l.RedisKey(keys[0]): time.Second},
		send:  map[string]time.Duration{l.RedisKey(keys[1]): 1300 * time.Millisecond},
		done:  map[string]bool{},
	})
	ctx := padlock.CtxFor(t)
	m, err := l.AcquireAll(ctx, keys, padlock.Options{TTL: 2 * time.Second})
	if err == nil {
		lost := m.Err()
		_ = m.Release(ctx)
		if lost != nil {
			t.Fatalf("AcquireAll(%v) returned a set already lost: Err %v", keys, lost)
		}
		return // the replies came sooner than asked: nothing late
	}
	if !errors.Is(err, padlock.ErrUnavailable) {
		t.Fatalf("AcquireAll whose first key's trust ran out before the last key's reply: got %v; want ErrUnavailable", err)
	}
	other := padlock.MustNew(t, c.Client(t))
	t.Cleanup(func() { other.Close() })
	for _, k := range keys {
		lk, err := other.Acquire(ctx, k, padlock.Options{TTL: time.Second})
		if err != nil {
			t.Fatalf("Acquire(%q) after the late set was given back: %v", k, err)
		}
		_ = lk.Release(ctx)
	}
}
