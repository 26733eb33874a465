package padlock_test

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/padlockgo/padlock"
	"github.com/padlockgo/padlock/internal/explore"

	"github.com/redis/go-redis/v9"
)

// The copy-inert invariant: a copy of a waiting attempt that reaches
// Redis after the clean-up of that attempt changes nothing ("Nobody holds
// for nobody", docs/locks.md, row "forgot a grant"; lua/claim.lua). The
// caller of an attempt whose reply was lost cleans it up before its next
// attempt, and a waiting attempt's clean-up (Locker.cleanupLost, an
// AcquireAll's rollbackLost) buries its token in the key's lost set for
// the attempt's lease, so a copy held up in the network that lands later
// takes no key, leaves no bid and queues nobody, whether its waiter still
// waits, gave up or was served. Read off Redis itself, on the in-memory
// servers: every late copy (a delayed command, or one a paused server
// runs as it resumes) of an attempt that named its key's lost set (acquire
// and acquire_fair with it, multi_acquire's '2'), whose token a clean-up
// (release, release_fair or multi_release naming it, on the same first
// key) had run with before the copy was sent to the server, and within
// the attempt's lease of that clean-up, must leave every key it names
// but the lost set as it found it: each is read whole just before and
// just after the copy, in one transaction with it. Excused: a restart
// between the clean-up and the copy (the lost set went with it).
const invCopyInert = "copy-inert"

// copiesSeen is what the invariant has seen: when each attempt's token was
// first cleaned up, by the token and the first key its clean-up named.
type copiesSeen struct {
	cleanups map[string]string // the clean-up scripts, by SHA1 and by source
	mu       sync.Mutex
	cleaned  map[string]time.Duration
}

func newCopiesSeen() *copiesSeen {
	return &copiesSeen{cleanups: padlock.CleanupScripts(), cleaned: map[string]time.Duration{}}
}

// scriptCall is an EVALSHA or EVAL's parts: the script (SHA1 or source),
// its keys and its arguments.
type scriptCall struct {
	script     string
	keys, argv []string
}

func scriptCallOf(c redis.Cmder) (scriptCall, bool) {
	args := c.Args()
	if len(args) < 3 {
		return scriptCall{}, false
	}
	if verb := strings.ToLower(fmt.Sprint(args[0])); verb != "evalsha" && verb != "eval" {
		return scriptCall{}, false
	}
	nk, err := strconv.Atoi(fmt.Sprint(args[2]))
	if err != nil || nk < 0 || 3+nk > len(args) {
		return scriptCall{}, false
	}
	str := func(as []any) []string {
		out := make([]string, len(as))
		for i, a := range as {
			out[i] = fmt.Sprint(a)
		}
		return out
	}
	return scriptCall{script: fmt.Sprint(args[1]), keys: str(args[3 : 3+nk]), argv: str(args[3+nk:])}, true
}

// watchCopies makes the world check the late copies of the commands h's
// client sends, on an in-memory server.
func (w *world) watchCopies(h *explore.Hook) {
	srv := h.Server()
	if srv == nil {
		return
	}
	cs := w.copies
	h.Ran = func(cmds []redis.Cmder, err error) {
		for _, c := range cmds {
			e := c.Err()
			if e == nil && len(cmds) == 1 {
				e = err
			}
			sc, ok := scriptCallOf(c)
			if !ok || e != nil && e != redis.Nil || len(sc.keys) == 0 || len(sc.argv) == 0 || cs.cleanups[sc.script] == "" {
				continue
			}
			k := sc.argv[0] + "|" + sc.keys[0]
			now := w.chk.now()
			cs.mu.Lock()
			if _, ok := cs.cleaned[k]; !ok {
				cs.cleaned[k] = now
			}
			cs.mu.Unlock()
		}
	}
	h.Around = func(cmds []redis.Cmder) (around [][2]redis.Cmder, done func()) {
		type watched struct {
			token, script string
			cleaned       time.Duration
			keys          []string
			before, after *redis.Cmd
		}
		var ws []*watched
		now := w.chk.now()
		around = make([][2]redis.Cmder, len(cmds))
		for i, c := range cmds {
			token, name, lease, ok := w.buriable(c)
			if !ok {
				continue
			}
			sc, _ := scriptCallOf(c)
			cs.mu.Lock()
			at, cleaned := cs.cleaned[token+"|"+sc.keys[0]]
			cs.mu.Unlock()
			// Strictly before: a clean-up that came back at the instant
			// the copy goes out may have run after it.
			if !cleaned || at >= now || now-at >= lease-5*time.Millisecond || w.chk.restartIn(at, now) {
				continue
			}
			x := &watched{token: token, script: name, cleaned: at}
			for _, k := range sc.keys {
				if !strings.HasSuffix(k, ":lost") {
					x.keys = append(x.keys, k)
				}
			}
			x.before, x.after = dumpCmd(x.keys), dumpCmd(x.keys)
			around[i] = [2]redis.Cmder{x.before, x.after}
			ws = append(ws, x)
		}
		return around, func() {
			for _, x := range ws {
				b, errB := x.before.StringSlice()
				a, errA := x.after.StringSlice()
				if errB != nil || errA != nil {
					continue // the transaction did not run (a closed run)
				}
				for i, k := range x.keys {
					if b[i] != a[i] {
						w.chk.fail(invCopyInert, w.chk.now(), "a late copy of %s under token %s, whose clean-up ran at %.3fs, changed %s on %s from %q to %q: a copy of a waiting attempt that comes after its clean-up must take no key, leave no bid and queue nobody",
							x.script, x.token, x.cleaned.Seconds(), k, srv.Name, b[i], a[i])
					}
				}
			}
		}
	}
}

// dumpLua reads each of its keys whole: its type and its value.
const dumpLua = `local out = {}
for i, k in ipairs(KEYS) do
  local t = redis.call('type', k)
  if type(t) == 'table' then t = t.ok end
  local v = ''
  if t == 'string' then v = redis.call('get', k)
  elseif t == 'hash' then v = table.concat(redis.call('hgetall', k), ' ')
  elseif t == 'list' then v = table.concat(redis.call('lrange', k, 0, -1), ' ')
  elseif t == 'zset' then v = table.concat(redis.call('zrange', k, 0, -1, 'withscores'), ' ')
  elseif t == 'set' then
    local m = redis.call('smembers', k)
    table.sort(m)
    v = table.concat(m, ' ')
  end
  out[i] = t .. ':' .. v
end
return out`

// dumpCmd returns a command that reads keys whole (dumpLua).
func dumpCmd(keys []string) *redis.Cmd {
	args := []any{"eval", dumpLua, len(keys)}
	for _, k := range keys {
		args = append(args, k)
	}
	return redis.NewCmd(context.Background(), args...)
}

// buriable returns the token of an attempt whose clean-up buries it (it
// names its key's lost set), its script and its lease.
func (w *world) buriable(c redis.Cmder) (token, name string, lease time.Duration, ok bool) {
	sc, is := scriptCallOf(c)
	if !is {
		return "", "", 0, false
	}
	gs, is := w.tokens.scripts[sc.script]
	if !is || len(sc.argv) < 4 {
		return "", "", 0, false
	}
	switch gs.Name {
	case "acquire":
		ok = len(sc.keys) == 4 && len(sc.argv) >= 6
	case "acquire_fair":
		ok = len(sc.keys) == 4
	case "multi_acquire":
		ok = sc.argv[3] == "2"
	}
	ms, err := strconv.Atoi(sc.argv[1])
	if !ok || err != nil {
		return "", "", 0, false
	}
	return sc.argv[gs.Token-1], gs.Name, time.Duration(ms) * time.Millisecond, true
}
