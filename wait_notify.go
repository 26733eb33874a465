package padlock

import (
	"context"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// notifier delivers release notices to a Locker's waiters, so they wake
// when a key frees instead of polling. A release that someone waits for
// publishes on the lock key's channel (sharded pub/sub on Cluster), as does
// a waiter that wants a key another Locker holds (wait_handoff.go); the notifier
// holds one subscription per Locker (one per node on Cluster) and
// subscribes to a key's channel while some local Acquire waits for that
// key.
//
// One notice wakes one waiter, never a herd: the longest-waiting local
// waiter for the key, or, when the notice names the token of the next fair
// waiter in the Redis queue, that waiter. Waiters keep a fallback timer
// (the holder's remaining lease and the retry backoff) for notices that
// are lost, e.g. while the subscription reconnects.
type notifier struct {
	client  redis.UniversalClient
	sharded bool   // Cluster: SSUBSCRIBE on the node that owns the channel
	self    string // the Locker's id: its own "want" notices are ignored

	mu     sync.Mutex
	keys   map[string]*keyWaiters // by channel (= lock key)
	closed bool
	// done is closed by close: a waiter outside every line (an AcquireAll
	// between attempts that got no answer) wakes on it.
	done chan struct{}
	// waited counts the entries of keys, so that a release with nobody
	// waiting in this Locker skips the lock (handOff).
	waited atomic.Int32
	// heardGrant: a grant at release has been heard (wait_bid.go), so
	// that the waiters of a Locker that never heard one skip looking for
	// one.
	heardGrant atomic.Bool

	// fault, set by tests before any subscription, says what becomes of
	// a notice as it arrives: how many copies are delivered (0: it is
	// lost) and how late.
	fault func(channel, payload string) (copies int, late time.Duration)
	// unsubscribedSeen, set by tests before any subscription, is told of
	// each UNSUBSCRIBE confirmation once it is handled.
	unsubscribedSeen func(channel string)

	connMu sync.Mutex // guards conns; held while a subscription is made
	conns  map[string]*redis.PubSub
	wg     sync.WaitGroup // one reader per PubSub
}

// subscribeTimeout bounds a SUBSCRIBE or UNSUBSCRIBE.
const subscribeTimeout = time.Second

func newNotifier(client redis.UniversalClient, self string) *notifier {
	_, sharded := client.(*redis.ClusterClient)
	return &notifier{
		client:  client,
		sharded: sharded,
		self:    self,
		keys:    make(map[string]*keyWaiters),
		conns:   make(map[string]*redis.PubSub),
		done:    make(chan struct{}),
	}
}

// subscribe subscribes to channel on the PubSub of its node, starting that
// PubSub and its reader first if needed.
func (n *notifier) subscribe(ctx context.Context, channel string) (*redis.PubSub, error) {
	node := ""
	if n.sharded {
		master, err := n.client.(*redis.ClusterClient).MasterForKey(ctx, channel)
		if err != nil {
			return nil, err
		}
		node = master.Options().Addr
	}
	n.connMu.Lock()
	defer n.connMu.Unlock()
	if n.conns == nil {
		return nil, ErrClosed
	}
	if ps := n.conns[node]; ps != nil {
		return ps, n.sendWithin(ctx, ps, true, channel)
	}
	var ps *redis.PubSub
	if n.sharded {
		// A cluster PubSub binds to the node of the channels it is made
		// with, so it must be made with this one; later channels of the
		// same node join it.
		ps = n.client.SSubscribe(ctx, channel)
	} else {
		ps = n.client.Subscribe(ctx, channel)
	}
	n.conns[node] = ps
	msgs := ps.ChannelWithSubscriptions(redis.WithChannelSize(256))
	n.wg.Add(1)
	go n.read(msgs)
	return ps, nil
}

// read dispatches what one subscription receives until it is closed.
func (n *notifier) read(msgs <-chan any) {
	defer n.wg.Done()
	for m := range msgs {
		switch m := m.(type) {
		case *redis.Subscription:
			switch m.Kind {
			case "subscribe", "ssubscribe":
				n.confirmed(m.Channel)
			case "unsubscribe", "sunsubscribe":
				n.unsubscribed(m.Channel)
			}
		case *redis.Message:
			if n.fault != nil {
				n.faulted(m.Channel, m.Payload)
				continue
			}
			n.notify(m.Channel, m.Payload)
		}
	}
}

// faulted delivers a notice as n.fault says: lost, repeated or late.
func (n *notifier) faulted(channel, payload string) {
	copies, late := n.fault(channel, payload)
	for range copies {
		if late <= 0 {
			n.notify(channel, payload)
			continue
		}
		n.wg.Add(1)
		go func() {
			defer n.wg.Done()
			time.Sleep(late)
			n.notify(channel, payload)
		}()
	}
}

// confirmed handles the confirmation of a SUBSCRIBE. One that comes for
// a channel already confirmed follows a reconnect (go-redis subscribes
// again): notices sent while the connection was down are lost, a grant's
// among them, so the waiters that try (the first non-fair one, every fair
// one) try now.
func (n *notifier) confirmed(channel string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	kw := n.keys[channel]
	if kw == nil {
		return
	}
	again := kw.live
	kw.markReady(true)
	if !again || kw.wake != wakeMutex {
		return
	}
	first := true
	for _, w := range kw.waiters {
		if w.a.o.Fair || first {
			w.signal()
		}
		first = first && w.a.o.Fair
	}
}

// unsubscribed handles the confirmation of an UNSUBSCRIBE. When waiters
// came back for the channel after the last ones left, their SUBSCRIBE may
// have reached Redis before that UNSUBSCRIBE: subscribe again for them.
func (n *notifier) unsubscribed(channel string) {
	if n.unsubscribedSeen != nil {
		defer n.unsubscribedSeen(channel)
	}
	n.mu.Lock()
	kw := n.keys[channel]
	var conn *redis.PubSub
	if kw != nil && len(kw.waiters) > 0 {
		conn = kw.conn
	}
	n.mu.Unlock()
	if conn == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), subscribeTimeout)
	defer cancel()
	_ = n.send(ctx, conn, true, channel)
}

// sendWithin is send, returned from when ctx ends, whether or not the
// command was sent: go-redis holds a subscription's commands while it
// dials the server again, past any deadline. The command goes on behind
// the caller (close waits for it); ErrClosed once close has run.
func (n *notifier) sendWithin(ctx context.Context, conn *redis.PubSub, subscribe bool, channel string) error {
	done := make(chan error, 1)
	if !n.goBehind(func() { done <- n.send(ctx, conn, subscribe, channel) }) {
		return ErrClosed
	}
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}

// send subscribes conn to channel, or unsubscribes it, in the flavour of
// the deployment: sharded on Cluster, plain elsewhere.
func (n *notifier) send(ctx context.Context, conn *redis.PubSub, subscribe bool, channel string) error {
	switch {
	case n.sharded && subscribe:
		return conn.SSubscribe(ctx, channel)
	case n.sharded:
		return conn.SUnsubscribe(ctx, channel)
	case subscribe:
		return conn.Subscribe(ctx, channel)
	}
	return conn.Unsubscribe(ctx, channel)
}

// notify handles a notice. A release notice wakes the waiter it is for:
// the fair waiter whose token it names, or else the first local waiter in
// line. A "want" notice ("*" and the id of the Locker whose waiter found
// the key busy) adds that Locker to the key's wanters, unless it is this
// one.
func (n *notifier) notify(channel, next string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	kw := n.keys[channel]
	if kw == nil || len(kw.waiters) == 0 {
		return
	}
	if kw.wake != wakeMutex {
		kw.notifyHolds(next)
		return
	}
	if token, hold, ok := parseGrant(next); ok {
		n.heardGrant.Store(true)
		kw.granted(token, hold)
		return
	}
	if strings.HasPrefix(next, "*") {
		if id := next[1:]; id != n.self {
			if kw.wanters == nil {
				kw.wanters = make(map[string]time.Time)
			}
			kw.wanters[id] = time.Now()
		}
		return
	}
	if next != "" {
		for _, w := range kw.waiters {
			// Fair waiters only, named by their place in the queue,
			// which never changes (their grant tokens do).
			if w.a.o.Fair && w.a.at.place == next {
				w.signal()
				return
			}
		}
		// The next fair waiter is in another process. Local non-fair
		// waiters still get their chance.
	}
	for _, w := range kw.waiters {
		if !w.a.o.Fair {
			w.signal()
			return
		}
	}
}

// goBehind runs f on a goroutine of its own that close waits for, and
// reports whether it did: not once close has run.
func (n *notifier) goBehind(f func()) bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.closed {
		return false
	}
	n.wg.Add(1)
	go func() {
		defer n.wg.Done()
		f()
	}()
	return true
}

// isClosed reports whether close has run.
func (n *notifier) isClosed() bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.closed
}

// close ends every subscription and waits for the readers. It wakes every
// waiter, which finds the notifier closed and gives up (ErrClosed) instead
// of sleeping out its wait.
func (n *notifier) close() {
	n.mu.Lock()
	if !n.closed {
		close(n.done)
	}
	n.closed = true
	for _, kw := range n.keys {
		for _, w := range kw.waiters {
			w.signal()
		}
	}
	n.mu.Unlock()
	n.connMu.Lock()
	conns := n.conns
	n.conns = nil
	n.connMu.Unlock()
	for _, ps := range conns {
		_ = ps.Close()
	}
	n.wg.Wait()
}

// notifyHolds handles a notice on a hold's channel: one naming a queued
// waiter's token wakes that waiter, if it is here; an empty one wakes one
// waiter (wakeOne) or all (wakeAll). A waiter woken while its attempt is
// on its way tries again at once when it comes back (parkHold). n.mu is
// held.
func (kw *keyWaiters) notifyHolds(next string) {
	if next != "" {
		for _, w := range kw.waiters {
			if w.h.named == next {
				w.kick()
				return
			}
		}
		// The waiter may be between its first attempt, which queued it
		// in Redis, and its place in this line: it looks here when it
		// comes (named).
		if len(kw.missed) == maxMissed {
			kw.missed = append(kw.missed[:0], kw.missed[1:]...)
		}
		kw.missed = append(kw.missed, next)
		return
	}
	if kw.wake == wakeAll {
		for _, w := range kw.waiters {
			w.kick()
		}
		return
	}
	kw.kickOne()
}
