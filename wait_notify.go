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
// a waiter that wants a key another Locker holds (handoff.go); the notifier
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
	// waited counts the entries of keys, so that a release with nobody
	// waiting in this Locker skips the lock (handOff).
	waited atomic.Int32

	connMu sync.Mutex // guards conns; held while a subscription is made
	conns  map[string]*redis.PubSub
	wg     sync.WaitGroup // one reader per PubSub
}

// keyWaiters are the local waiters for one lock key, oldest first.
type keyWaiters struct {
	waiters []*waiter
	conn    *redis.PubSub // nil when subscribing failed
	// ready is closed once the SUBSCRIBE was confirmed or failed to send.
	// A SUBSCRIBE that Redis refuses leaves it open: go-redis drops the
	// error reply (see live).
	ready chan struct{}
	live  bool // confirmed: notices for the key arrive
	// wanters are the other Lockers whose waiters asked for the key, and
	// when they last did: a lock held here yields to one of them when it
	// goes back to Redis (see handoff.go).
	wanters map[string]time.Time
	// wake says whom a notice wakes: a mutex's waiters (the zero value)
	// or a hold's (hold_wait.go).
	wake wakePolicy
	// missed are the last hold waiter tokens that notices named while
	// no such waiter was in line (hold_wait.go).
	missed []string
}

// waiter is one waiting Acquire.
type waiter struct {
	a    *acquisition  // its token, options and key
	wake chan struct{} // capacity 1: a wake-up is never lost, never doubled
	kw   *keyWaiters

	h *holdAcquisition // instead of a: a hold's waiter (hold_wait.go)

	// Guarded by notifier.mu.
	parked bool  // asleep until woken: a lock may be handed to it
	handed *Lock // the lock handed to it, until it takes it (unpark)
	kicked bool  // a hold's waiter: a notice came for it since it last tried
}

func (w *waiter) signal() {
	select {
	case w.wake <- struct{}{}:
	default:
	}
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
	}
}

// state reports whether some local Acquire already waits for channel (a
// newcomer then queues behind it instead of barging in), and whether
// notices for channel are known to arrive.
func (n *notifier) state(channel string) (waiting, live bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	kw := n.keys[channel]
	if kw == nil {
		return false, false
	}
	return len(kw.waiters) > 0, kw.live
}

// live reports whether w's notices are known to arrive, and while the
// outcome of the SUBSCRIBE is not known, returns the channel that is
// closed when it is (nil once it is known). Redis may never answer: go-redis
// drops the error reply of a SUBSCRIBE that an ACL refuses (NOPERM), so a
// waiter must not wait for that outcome, only wake when it comes.
func (n *notifier) live(w *waiter) (live bool, pending <-chan struct{}) {
	n.mu.Lock()
	defer n.mu.Unlock()
	select {
	case <-w.kw.ready:
	default:
		pending = w.kw.ready
	}
	return w.kw.live, pending
}

// join queues a waiter for channel, subscribing to it first if nobody local
// waits for it yet. A failed SUBSCRIBE is not an error: the waiter polls
// instead. After close, the waiter is alone in a line of its own, and park
// refuses it.
func (n *notifier) join(ctx context.Context, channel string, a *acquisition) *waiter {
	return n.enter(ctx, channel, &waiter{a: a, wake: make(chan struct{}, 1)}, wakeMutex)
}

// enter queues w for channel, whose notices wake as policy says, as join
// does.
func (n *notifier) enter(ctx context.Context, channel string, w *waiter, policy wakePolicy) *waiter {
	n.mu.Lock()
	if n.closed {
		n.mu.Unlock()
		w.kw = &keyWaiters{ready: make(chan struct{}), waiters: []*waiter{w}}
		close(w.kw.ready)
		return w
	}
	kw := n.keys[channel]
	fresh := kw == nil
	if fresh {
		kw = &keyWaiters{ready: make(chan struct{}), wake: policy}
		n.keys[channel] = kw
		n.waited.Add(1)
	}
	kw.waiters = append(kw.waiters, w)
	w.kw = kw
	if w.h != nil {
		kw.named(w)
	}
	n.mu.Unlock()
	if !fresh {
		return w
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), subscribeTimeout)
	conn, err := n.subscribe(sctx, channel)
	cancel()
	n.mu.Lock()
	// go-redis keeps a channel it failed to subscribe to and subscribes on
	// reconnect: keep the conn either way, so that leave unsubscribes.
	kw.conn = conn
	if err != nil {
		kw.markReady(false) // poll instead
	}
	n.mu.Unlock()
	return w
}

// markReady records the SUBSCRIBE's outcome. A confirmation may come after
// a failure was recorded (go-redis subscribes again on reconnect): notices
// arrive from then on. n.mu is held.
func (kw *keyWaiters) markReady(live bool) {
	kw.live = kw.live || live
	select {
	case <-kw.ready:
	default:
		close(kw.ready)
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
		return ps, n.send(ctx, ps, true, channel)
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
			n.notify(m.Channel, m.Payload)
		}
	}
}

func (n *notifier) confirmed(channel string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if kw := n.keys[channel]; kw != nil {
		kw.markReady(true)
	}
}

// unsubscribed handles the confirmation of an UNSUBSCRIBE. When waiters
// came back for the channel after the last ones left, their SUBSCRIBE may
// have reached Redis before that UNSUBSCRIBE: subscribe again for them.
func (n *notifier) unsubscribed(channel string) {
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

// leave takes w out of line. When w was first and did not get the lock, the
// next waiter is woken to try in its place. Leaving again does nothing.
func (n *notifier) leave(channel string, w *waiter, acquired bool) {
	n.mu.Lock()
	kw := n.keys[channel]
	if kw == nil || kw != w.kw {
		n.mu.Unlock()
		return
	}
	wasFirst := len(kw.waiters) > 0 && kw.waiters[0] == w
	for i, x := range kw.waiters {
		if x == w {
			kw.waiters = append(kw.waiters[:i], kw.waiters[i+1:]...)
			break
		}
	}
	if len(kw.waiters) > 0 {
		switch {
		case kw.wake != wakeMutex:
			kw.passOn(w)
		case wasFirst && !acquired:
			kw.waiters[0].signal()
		}
		n.mu.Unlock()
		return
	}
	delete(n.keys, channel)
	n.waited.Add(-1)
	conn := kw.conn
	n.mu.Unlock()
	if conn == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), subscribeTimeout)
	defer cancel()
	_ = n.send(ctx, conn, false, channel)
}

// park marks w asleep: from now until unpark, a lock may be handed to it.
// It returns false, leaving w awake, once the notifier is closed: nothing
// would wake w but its own timer.
func (n *notifier) park(w *waiter) bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.closed {
		return false
	}
	w.parked = true
	return true
}

// unpark marks w awake and returns the lock handed to it meanwhile, if any.
func (n *notifier) unpark(w *waiter) *Lock {
	n.mu.Lock()
	defer n.mu.Unlock()
	w.parked = false
	lk := w.handed
	w.handed = nil
	return lk
}

// isFirst reports whether w is first in line for its key.
func (n *notifier) isFirst(w *waiter) bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return len(w.kw.waiters) > 0 && w.kw.waiters[0] == w
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
