package padlock

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/padlockgo/padlock/internal/redistest"
	"github.com/redis/go-redis/v9"
)

// TestNoticesAreBestEffort checks every script that publishes does so
// through redis.pcall, so a refused notice cannot fail the lock operation
// around it, and that the Cluster flavour of each one publishes sharded
// (its rewrite of the pcall matched).
func TestNoticesAreBestEffort(t *testing.T) {
	for _, tc := range []struct {
		name           string
		src            string
		plain, sharded string // script hashes
	}{
		{"acquire.lua", acquireLua, plainScripts.acquire.Hash(), shardedScripts.acquire.Hash()},
		{"release.lua", releaseLua, plainScripts.release.Hash(), shardedScripts.release.Hash()},
		{"release_fair.lua", releaseFairLua, plainScripts.releaseFair.Hash(), shardedScripts.releaseFair.Hash()},
		{"leave_fair.lua", leaveFairLua, plainScripts.leaveFair.Hash(), shardedScripts.leaveFair.Hash()},
		{"handover_fair.lua", handoverFairLua, plainScripts.handoverFair.Hash(), shardedScripts.handoverFair.Hash()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			all := strings.Count(tc.src, "publish'")
			guarded := strings.Count(tc.src, "redis.pcall('publish'")
			if all == 0 || guarded != all {
				t.Errorf("publishes through redis.pcall: got %d of %d, want all (and at least one)", guarded, all)
			}
			if tc.plain == tc.sharded {
				t.Errorf("the Cluster flavour is the plain script: want SPUBLISH in place of PUBLISH")
			}
		})
	}
}

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

// TestStuckExtendCopyBoundsTrust: with go-redis's default retries, a
// shorter Extend whose first copy is stuck on its way would be sent again
// and confirmed, and padlock would see no lost reply. A longer Extend
// follows. The stuck copy then arrives and runs: Redis holds the shorter
// lease, and the holder must not trust the longer one.
// Regression: go-redis sent the Extend again; its stuck copy then ran unseen.
func TestStuckExtendCopyBoundsTrust(t *testing.T) {
	srv := redistest.Start(t)
	if !srv.Real() {
		t.Skip("needs a redis-server behind a real socket")
	}
	// The holder trusts the shorter lease from when the stuck copy was
	// sent: a machine so loaded that the longer Extend comes after that
	// lease ran out finds the lock not held, as it must. The case runs
	// again then; a failure in time fails at once.
	for try := 1; ; try++ {
		if !stuckExtendCopyCase(t, srv, "retried"+strconv.Itoa(try)) {
			return
		}
		if try == 3 {
			t.Fatal("the longer Extend came after the stuck copy's lease in 3 runs: the machine is too slow for the case")
		}
		t.Logf("run %d: the longer Extend came after the stuck copy's lease ran out; again", try)
	}
}

// stuckExtendCopyCase runs TestStuckExtendCopyBoundsTrust's case on key
// and reports whether the longer Extend was sent too late to assert
// anything (the stuck copy's lease had run out).
func stuckExtendCopyCase(t *testing.T, srv *redistest.Server, key string) (tooLate bool) {
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
	sent := time.Now()
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
		if errors.Is(err, ErrNotHeld) && time.Since(sent) > short/2 {
			return true
		}
		t.Fatalf("Extend(30s), %v after the stuck copy was sent: %v", time.Since(sent).Round(time.Millisecond), err)
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
	contend(t, srv.Client(t), key, lk, 0)
	return false
}

// TestFairQueueKeepsExpiryWhenHeadStays runs the scripts that serve the
// head of a fair queue when the head is another waiter, and the only
// entry: they pop it before they look (serveHead, lua/queue_head.lua), so
// popping it deletes the queue, and pushing it back must give the queue
// its expiry again. A queue without one would outlive its waiters.
func TestFairQueueKeepsExpiryWhenHeadStays(t *testing.T) {
	rdb, l := fairScriptsOn(t)
	ctx := ctxFor(t)
	lockKey, fenceKey, queue := l.keys.lockKeys(testKey(t))
	keys := []string{lockKey, fenceKey, queue}
	now, err := rdb.Time(ctx).Result()
	if err != nil {
		t.Fatal(err)
	}
	const wait = 20 * time.Second
	entry := strconv.FormatInt(now.Add(wait).UnixMilli(), 10) + ":other"
	if err := rdb.RPush(ctx, queue, entry).Err(); err != nil {
		t.Fatal(err)
	}
	rdb.PExpire(ctx, queue, wait)
	rdb.Set(ctx, lockKey, "holder|0", time.Minute)

	check := func(step string) {
		t.Helper()
		if got := rdb.LRange(ctx, queue, 0, -1).Val(); len(got) != 1 || got[0] != entry {
			t.Fatalf("%s: queue %v, want only %s", step, got, entry)
		}
		if ttl := rdb.PTTL(ctx, queue).Val(); ttl <= 0 || ttl > wait+time.Second {
			t.Fatalf("%s: queue expires in %v, want within %v", step, ttl, wait)
		}
	}
	// The holder hands on to a waiter queued as "mine"; the head is
	// "other": the lock is released instead.
	n, err := plainScripts.handoverFair.run(ctx, rdb, 0, keys, "holder", "next", 60000, 1, "mine", "0").Int64()
	if err != nil || n != -1 {
		t.Fatalf("hand-off with another waiter first: got %d, %v, want -1 (released)", n, err)
	}
	check("after the hand-off")
	// A waiter queued as "mine" finds the key free, with "other" first.
	n, err = acquireFairScript.run(ctx, rdb, 0, keys, "attempt", 60000, 0, "mine").Int64()
	if err != nil || n != -1 {
		t.Fatalf("attempt with another waiter first: got %d, %v, want -1 (free, an older waiter first)", n, err)
	}
	check("after the attempt")
}

// TestFairQueueExpiryCoversEveryEntry queues waiters behind a held key
// with waits that end later, earlier, and later again: the queue must
// never expire before the deadline of an entry in it, though a join moves
// its expiry only when its own deadline falls in a later second than
// every other's.
func TestFairQueueExpiryCoversEveryEntry(t *testing.T) {
	rdb, l := fairScriptsOn(t)
	ctx := ctxFor(t)
	lockKey, fenceKey, queue := l.keys.lockKeys(testKey(t))
	keys := []string{lockKey, fenceKey, queue}
	rdb.Set(ctx, lockKey, "holder|0", time.Minute)
	for i, wait := range []time.Duration{2 * time.Second, 20 * time.Second, time.Second, 40 * time.Second} {
		place := fmt.Sprint("w", i)
		n, err := acquireFairScript.run(ctx, rdb, 0, keys, "attempt"+place, 60000, wait.Milliseconds(), place).Int64()
		if err != nil || n >= 0 {
			t.Fatalf("waiter %d: got %d, %v, want the key busy", i, n, err)
		}
		now, err := rdb.Time(ctx).Result()
		if err != nil {
			t.Fatal(err)
		}
		ttl := rdb.PTTL(ctx, queue).Val()
		for _, e := range rdb.LRange(ctx, queue, 0, -1).Val() {
			ms, _, _ := strings.Cut(e, ":")
			deadline, err := strconv.ParseInt(ms, 10, 64)
			if err != nil {
				t.Fatalf("entry %q: %v", e, err)
			}
			if left := time.Duration(deadline-now.UnixMilli()) * time.Millisecond; ttl < left {
				t.Fatalf("after waiter %d: the queue expires in %v, before entry %s (%v)", i, ttl, e, left)
			}
		}
	}
}

// fairScriptsOn returns a client of a Redis of its own and a Locker on
// it, for tests that run the fair scripts by hand.
func fairScriptsOn(t *testing.T) (*redis.Client, *Locker) {
	t.Helper()
	rdb := redistest.Start(t).Client(t)
	l := mustNew(t, rdb)
	t.Cleanup(func() { l.Close() })
	return rdb, l
}

// A clean-up's script that the server did not have (NOSCRIPT) is sent
// again as EVAL even when the clean-up's bound ran out as that reply
// came: the server said it did not run it. (The EVAL once went on the
// ended context, so it was never sent: the rollback of a set's lost
// attempt that met a slow reply on a server without the script left a
// copy of the attempt holding the keys for their lease.)
func TestCleanupAfterASlowNoScriptRuns(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	// Socket timeouts past the clean-up's bound: only the contexts end a
	// command here, as on a loaded machine a 1s read timeout once did.
	rdb := srv.Client(t, func(o *redis.Options) { o.ReadTimeout, o.WriteTimeout = 10*time.Second, 10*time.Second })
	ctx := ctxFor(t)
	slow := &lagHook{after: func(args []any) bool { return fmt.Sprint(args[0]) == "evalsha" }, afterDelay: cleanupTimeout + 100*time.Millisecond}
	rdb.AddHook(slow)
	key := testKey(t)
	s := newScript("return redis.call('del', KEYS[1])")
	for try := 1; ; try++ {
		if err := rdb.Set(ctx, key, "held", 0).Err(); err != nil {
			t.Fatal(err)
		}
		if err := rdb.ScriptFlush(ctx).Err(); err != nil {
			t.Fatal(err)
		}
		slow.armed.Store(true)
		cctx, cancel := cleanupContext(ctx)
		n, err := s.run(cctx, rdb, 0, []string{key}).Int64()
		cancel()
		slow.armed.Store(false)
		// The EVAL has a bound of its own, cleanupTimeout: a machine that
		// took longer than that to answer it ran out of the bound, which
		// says nothing of the second chance. Once more, then.
		if errors.Is(err, context.DeadlineExceeded) && try < 3 {
			t.Logf("try %d: the EVAL ran out of its own %v bound; again", try, cleanupTimeout)
			continue
		}
		if err != nil || n != 1 {
			t.Errorf("the clean-up's script: %d, %v; want 1 (run as EVAL after NOSCRIPT)", n, err)
		}
		break
	}
	slow.armed.Store(true)
	if n, err := rdb.Exists(ctx, key).Result(); err != nil || n != 0 {
		t.Errorf("the key after the clean-up: exists %d (%v); want it gone", n, err)
	}
	// An operation that is not a clean-up ends with its context.
	if err := rdb.Set(ctx, key, "held", 0).Err(); err != nil {
		t.Fatal(err)
	}
	if err := rdb.ScriptFlush(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	octx, ocancel := context.WithTimeout(ctx, cleanupTimeout)
	defer ocancel()
	if err := s.run(octx, rdb, 0, []string{key}).Err(); err == nil {
		t.Error("an attempt's script after its context ended: ran; want the context's error")
	}
	if n, err := rdb.Exists(ctx, key).Result(); err != nil || n != 1 {
		t.Errorf("the key after an operation whose context ended: exists %d (%v); want it kept", n, err)
	}
}
