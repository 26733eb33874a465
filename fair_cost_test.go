package padlock

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/padlockgo/padlock/internal/redistest"
	"github.com/redis/go-redis/v9"
)

// TestFairAcquisitionCommands counts the server commands of a contended
// fair acquisition within one Locker, as Redis counts them (INFO
// commandstats: the EVALSHA and every command its script runs): the
// waiter's attempt that finds the key held and joins the queue, and the
// holder's release that hands the lock to it. Each costs at most 6: the
// join does not read the head of the queue while the key is held, nor move
// the queue's expiry when an entry's deadline already covers its own
// second; the hand-off serves the head in one pop.
func TestFairAcquisitionCommands(t *testing.T) {
	srv := redistest.Start(t)
	rdb := srv.Client(t)
	l := mustNew(t, rdb)
	defer l.Close()
	l.recheck = time.Minute // wake-ups come from hand-offs alone
	ctx := ctxFor(t)
	key := testKey(t)
	o := Options{Fair: true, Wait: 30 * time.Second}
	if err := plainScripts.handoverFair.Load(ctx, rdb).Err(); err != nil { // one EVALSHA per hand-off
		t.Fatal(err)
	}

	holder := mustAcquire(t, l, ctx, key, o)
	// The first waiter subscribes to the key's notices; the second finds
	// them flowing, as every waiter does while the key stays contended.
	// The first waits longer, so its deadline covers the second's and the
	// queue's expiry stays (on a busy key, most joins find one that does).
	first := queueWaiters(t, l, key, 1, Options{Fair: true, Wait: time.Minute})
	stats := srv.Client(t)
	resetStats(t, stats)
	second := make(chan *Lock, 1)
	go func() {
		lk, err := l.Acquire(context.Background(), key, o)
		if err != nil {
			t.Errorf("second waiter: %v", err)
		}
		second <- lk
	}()
	waitForWaiters(t, l, key, 2)
	waitParked(t, l, key, 2)
	join := commandsRun(t, stats)

	resetStats(t, stats)
	if err := holder.Release(ctx); err != nil {
		t.Fatal(err)
	}
	h := <-first
	if h.lk == nil || !handedOn(h.lk) {
		t.Fatalf("first waiter: got %v, want the lock handed on", h.lk)
	}
	handOff := commandsRun(t, stats)
	t.Logf("join: %v; hand-off: %v", join, handOff)
	if n := join.total(); n > 6 {
		t.Errorf("the attempt that joins the queue ran %d commands, want at most 6: %v", n, join)
	}
	if n := handOff.total(); n > 6 {
		t.Errorf("the hand-off ran %d commands, want at most 6: %v", n, handOff)
	}

	if err := h.lk.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if lk := <-second; lk == nil {
		t.Fatal("second waiter: no lock")
	} else if err := lk.Release(ctx); err != nil {
		t.Fatal(err)
	}
}

// commandCounts are calls per command name, from INFO commandstats.
type commandCounts map[string]int

func (c commandCounts) total() int {
	n := 0
	for _, v := range c {
		n += v
	}
	return n
}

func (c commandCounts) String() string {
	names := make([]string, 0, len(c))
	for name := range c {
		names = append(names, name)
	}
	sort.Strings(names)
	var b strings.Builder
	for i, name := range names {
		if i > 0 {
			b.WriteString(" ")
		}
		fmt.Fprintf(&b, "%s=%d", name, c[name])
	}
	return b.String()
}

func resetStats(t *testing.T, c *redis.Client) {
	t.Helper()
	if err := c.ConfigResetStat(context.Background()).Err(); err != nil {
		t.Fatal(err)
	}
}

// commandsRun returns the commands the server ran since its stats were
// reset, leaving out those of connections (HELLO, CLIENT), of pub/sub,
// and of the test itself (CONFIG, INFO).
func commandsRun(t *testing.T, c *redis.Client) commandCounts {
	t.Helper()
	info, err := c.Info(context.Background(), "commandstats").Result()
	if err != nil {
		t.Fatal(err)
	}
	got := commandCounts{}
	for line := range strings.SplitSeq(info, "\n") {
		name, rest, ok := strings.Cut(strings.TrimSpace(line), ":calls=")
		if !ok {
			continue
		}
		name = strings.TrimPrefix(name, "cmdstat_")
		switch strings.SplitN(name, "|", 2)[0] {
		case "hello", "client", "subscribe", "unsubscribe", "ping", "config", "info":
			continue
		}
		calls, _, _ := strings.Cut(rest, ",")
		n, err := strconv.Atoi(calls)
		if err != nil {
			t.Fatalf("commandstats line %q: %v", line, err)
		}
		got[name] = n
	}
	return got
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
