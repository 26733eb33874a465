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
	tokens  []string // the tokens of its grant-making commands
	faulted bool     // a command met a fault, or an error (a lost reply, a closed connection)
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
}

func newSets() *sets {
	return &sets{keys: map[string][]string{}, granted: map[string]bool{}, partial: map[string]bool{}}
}

// opCommand records, for the operation ctx carries, a command seen: a
// grant-making one's token, and any fault or error it met.
func opCommand(ctx context.Context, token string, f explore.Fault, err error) {
	op, _ := ctx.Value(opKey{}).(*opSeen)
	if op == nil {
		return
	}
	op.mu.Lock()
	defer op.mu.Unlock()
	if token != "" && !slices.Contains(op.tokens, token) {
		op.tokens = append(op.tokens, token)
	}
	if f.Kind != explore.None || err != nil && err != redis.Nil && !strings.HasPrefix(err.Error(), "NOSCRIPT") {
		op.faulted = true
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
// on its way, its rollbacks ran, and no key holds its tokens.
func (w *world) setFailed(li int, g string, keys []string, op *opSeen, began time.Duration) {
	op.mu.Lock()
	faulted, tokens := op.faulted, slices.Clone(op.tokens)
	op.mu.Unlock()
	now := w.chk.now()
	start := w.tr.Start()
	if faulted || len(tokens) == 0 || w.pausedIn(start.Add(began), start.Add(now)) || w.chk.restartIn(began-maxInFlight, now) {
		return
	}
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
