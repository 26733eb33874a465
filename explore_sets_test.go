package padlock_test

import (
	"context"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/padlockgo/padlock"
	"github.com/padlockgo/padlock/internal/explore"

	"github.com/redis/go-redis/v9"
)

// The whole-or-none invariant of AcquireAll ("all of a set of keys or
// none"): on one node, nobody ever sees part of a set taken under an
// attempt's token that was not granted (every key of one slot is taken by
// one script, and rolled back by one), and once an AcquireAll failed with
// no fault on its commands, no key of its set is left under any of its
// attempts' tokens.

// invWholeOrNone is the invariant's name, as failures report it.
const invWholeOrNone = "whole-or-none"

// opKey is the context key under which an operation's commands carry
// their operation (*opSeen), so that the fault hook can tell what each
// operation sent and met.
type opKey struct{}

// opSeen is what one operation's commands were seen to send and meet.
type opSeen struct {
	mu      sync.Mutex
	tokens  []string   // the tokens of its grant-making commands
	queued  []queuedAt // the queues its fair attempts named it in
	faulted bool       // a command met a fault, or an error (a lost reply, a closed connection)
	// faultsAt: when each command that did returned to its caller.
	faultsAt []time.Duration

	// What the order invariants read (explore_order_test.go), for the
	// locker goroutines' Acquires: which Locker, kind and key; when it
	// was called, joined its Locker's line (waitAt, if waited), returned
	// (ended) and returned a grant (granted; -1 if not); whether it was
	// handed the lock in its line; and the replies to its leader-record
	// writes (Campaign, Proclaim).
	li                      int
	kind, key               string
	fair, waited, handedOff bool
	began, ended, granted   time.Duration
	waitAt                  time.Duration
	records                 []int64
	// busy: it returned ErrNotAcquired, the key held throughout its
	// wait (not unavailable, nor ended by its context); wait is the
	// Wait it asked for, ttl its lease (the progress invariant).
	busy      bool
	wait, ttl time.Duration
	hold      *hold // what it was granted, if anything
}

// withOp returns ctx carrying a new operation record.
func withOp(ctx context.Context) (context.Context, *opSeen) {
	op := &opSeen{}
	return context.WithValue(ctx, opKey{}, op), op
}

// sets is what the whole-or-none invariant has seen: the keys of each
// multi-key attempt's token, and the tokens granted.
type sets struct {
	mu      sync.Mutex
	keys    map[string][]string // by token: the lock keys its attempts named
	granted map[string]bool
	partial map[string]bool // reported already
	// owner is the operation of each fair waiter's place; faulted, the
	// places of batched commands that met a fault before their owner was
	// known.
	owner   map[string]*opSeen
	faulted map[string]bool
}

func newSets() *sets {
	return &sets{keys: map[string][]string{}, granted: map[string]bool{}, partial: map[string]bool{},
		owner: map[string]*opSeen{}, faulted: map[string]bool{}}
}

// opOf returns the operation ctx carries (nil if none), and makes it
// the owner of the place q names, if any.
func (s *sets) opOf(ctx context.Context, q queuedAt) *opSeen {
	op, _ := ctx.Value(opKey{}).(*opSeen)
	if op != nil && q.place != "" {
		s.mu.Lock()
		s.owner[q.place] = op
		s.mu.Unlock()
	}
	return op
}

// batched records a command sent in a batch, which went under another
// caller's context: by its place, for the operation that owns it, or
// for whichever does when it met a fault.
func (s *sets) batched(q queuedAt, f explore.Fault, err error, at time.Duration) {
	if q.place == "" {
		return
	}
	s.mu.Lock()
	op := s.owner[q.place]
	if op == nil && (f.Kind != explore.None || err != nil) {
		s.faulted[q.place] = true
	}
	s.mu.Unlock()
	opCommand(op, "", q, f, err, at)
}

// opCommand records, for op (none if nil), a command seen: a
// grant-making one's token, a fair attempt's place, and any fault or
// error it met, returned to its caller at at.
func opCommand(op *opSeen, token string, q queuedAt, f explore.Fault, err error, at time.Duration) {
	if op == nil {
		return
	}
	op.mu.Lock()
	defer op.mu.Unlock()
	if token != "" && !slices.Contains(op.tokens, token) {
		op.tokens = append(op.tokens, token)
	}
	if q.place != "" && !slices.Contains(op.queued, q) {
		op.queued = append(op.queued, q)
	}
	if f.Kind != explore.None || err != nil && err != redis.Nil && !strings.HasPrefix(err.Error(), "NOSCRIPT") {
		op.faulted = true
		op.faultsAt = append(op.faultsAt, at)
	}
}

// setSent records the lock keys (every key but the fence counter, the
// last) of a multi-key attempt under token.
func (w *world) setSent(token string, keys []any) {
	if len(keys) < 2 {
		return
	}
	w.sets.mu.Lock()
	defer w.sets.mu.Unlock()
	if w.sets.keys[token] != nil {
		return
	}
	if last, _ := keys[len(keys)-1].(string); strings.HasSuffix(last, ":lost") {
		keys = keys[:len(keys)-1] // a waiting attempt's lost set (lua/multi_acquire.lua)
	}
	for _, k := range keys[:len(keys)-1] {
		w.sets.keys[token] = append(w.sets.keys[token], k.(string))
	}
}

// setGranted records that AcquireAll returned m.
func (w *world) setGranted(m *padlock.MultiLock) {
	token := padlock.FromContext(m.Context(context.Background())).Token()
	w.sets.mu.Lock()
	w.sets.granted[token] = true
	w.sets.mu.Unlock()
}

// setFailed checks an AcquireAll of keys on Locker li that failed, begun
// at began, whose commands op records: with no fault, pause or restart
// on its way, its rollbacks ran, and no key holds its set attempts'
// tokens.
func (w *world) setFailed(li int, g string, keys []string, op *opSeen, began time.Duration) {
	op.mu.Lock()
	faulted, tokens := op.faulted, slices.Clone(op.tokens)
	op.mu.Unlock()
	now := w.chk.now()
	start := w.tr.Start()
	if faulted || len(tokens) == 0 || w.pausedIn(start.Add(began), start.Add(now)) || w.chk.restartIn(began-maxInFlight, now) {
		return
	}
	// The set's attempts' tokens only: while it waits for a busy key as a
	// single-key Acquire does, that wait's bid, granted as it gives up,
	// is let go behind its answer, as an Acquire's is (wait_bid.go).
	w.sets.mu.Lock()
	tokens = slices.DeleteFunc(tokens, func(t string) bool { return w.sets.keys[t] == nil })
	w.sets.mu.Unlock()
	for _, k := range keys {
		rk := w.lockers[li].RedisKey(k)
		for _, s := range w.srvs {
			v, err := s.M.Get(rk)
			if err == nil && slices.Contains(tokens, padlock.StoredToken(v)) {
				w.chk.fail(invWholeOrNone, now, "%s: AcquireAll %v failed with no fault on its way, yet %s holds its attempt's token on %s", g, keys, k, s.Name)
			}
		}
	}
}

// watchSets samples, every few milliseconds until the run ends, every
// key of the run in one script (atomically) on the one server, and checks
// that no token of a multi-key attempt that was not granted holds part
// of its set.
func (w *world) watchSets() {
	c := redis.NewClient(&redis.Options{Addr: "127.0.0.1:6379", Dialer: w.srv.Dial, DisableIdentity: true, Protocol: 2})
	defer c.Close()
	ctx := context.Background()
	var rks []string
	for _, k := range w.keys {
		rks = append(rks, w.lockers[0].RedisKey(k))
	}
	read := redis.NewScript(`local r = {} for i, k in ipairs(KEYS) do r[i] = redis.call('get', k) or '' end return r`)
	for time.Now().Before(w.end) {
		time.Sleep(5 * time.Millisecond)
		vals, err := read.Run(ctx, c, rks).StringSlice()
		if err != nil {
			continue
		}
		on := map[string]bool{}
		for i, v := range vals {
			if v != "" {
				on[padlock.StoredToken(v)+"|"+rks[i]] = true
			}
		}
		w.sets.mu.Lock()
		for token, keys := range w.sets.keys {
			if w.sets.granted[token] || w.sets.partial[token] {
				continue
			}
			held := 0
			for _, k := range keys {
				if on[token+"|"+k] {
					held++
				}
			}
			if held > 0 && held < len(keys) {
				w.sets.partial[token] = true
				w.chk.fail(invWholeOrNone, w.chk.now(), "the attempt under token %s holds %d of its keys %v, and was not granted", token, held, keys)
			}
		}
		w.sets.mu.Unlock()
	}
}

// queuedAt names a fair waiter's place in a queue, on a server.
type queuedAt struct{ srv, queue, place string }

// invProgress is the name of the invariant that waiting wins a free key,
// as failures report it: a fair queue's head is a live waiter
// (leftQueue), and a waiter does not give up on a key that stood free
// (checkProgress, explore_promise_test.go).
const invProgress = "progress"

// leftQueue checks a fair Acquire (of a mutex, a permit or a write hold)
// of Locker li that ended without the grant, begun at began, whose
// commands op records: with no fault, pause or restart on its way, it
// left every queue it joined, so that the queue's head is a live waiter
// and a free key goes to one ("Fair mode hands the lock to the longest
// waiter": one that gave up is nobody).
func (w *world) leftQueue(g, what string, op *opSeen, began time.Duration) {
	op.mu.Lock()
	faulted, queued := op.faulted, slices.Clone(op.queued)
	op.mu.Unlock()
	w.sets.mu.Lock()
	for _, q := range queued {
		faulted = faulted || w.sets.faulted[q.place]
	}
	w.sets.mu.Unlock()
	now := w.chk.now()
	start := w.tr.Start()
	if faulted || len(queued) == 0 || w.pausedIn(start.Add(began), start.Add(now)) || w.chk.restartIn(began-maxInFlight, now) {
		return
	}
	for _, q := range queued {
		for _, s := range w.srvs {
			if s.Name != q.srv {
				continue
			}
			entries, err := queueOn(s, q.queue)
			if err != nil {
				continue
			}
			for _, e := range entries {
				if queuedPlace(e) == q.place {
					w.chk.fail(invProgress, now, "%s: %s gave up with no fault on its way, yet its place %s is still queued in %s: %v", g, what, q.place, q.queue, entries)
				}
			}
		}
	}
}

// queueOn reads queue on s through a client of its own, without faults
// (miniredis hands out its lists themselves, not copies, and the server
// changes them while they are read).
func queueOn(s *explore.Server, queue string) ([]string, error) {
	c := redis.NewClient(&redis.Options{Addr: s.Addr, Dialer: s.Dial, DisableIdentity: true, Protocol: 2})
	defer c.Close()
	return c.LRange(context.Background(), queue, 0, -1).Result()
}
