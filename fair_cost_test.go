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
