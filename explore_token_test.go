package padlock_test

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"

	"github.com/padlockgo/padlock"
	"github.com/padlockgo/padlock/internal/explore"

	"github.com/redis/go-redis/v9"
)

// The token-fresh invariant, read off the commands themselves: every
// attempt sends a token no earlier attempt sent ("One identity per grant"
// in ARCHITECTURE.md). A command that may make a grant (an attempt of any
// primitive, a hand-off's rename, a Resume) names its new grant's token;
// the same token may reach the same key on the same server again only as
// a copy of that command, which padlock sends after the connection closed
// under the first (or as EVAL after NOSCRIPT). Any other repeat is a
// second attempt under an earlier one's token: a late clean-up or
// rollback of the first would then change the second's grant.

// invTokenFresh is the invariant's name, as failures report it.
const invTokenFresh = "token-fresh"

// tokenSends is what the invariant has seen: the last send of each
// grant-making command, by server, token and first key.
type tokenSends struct {
	scripts map[string]padlock.GrantScript // by SHA1 and by source
	elect   map[string]bool                // the leader record's script, by SHA1 and by source

	mu     sync.Mutex
	last   map[string]tokenSend
	client map[string]int // the client that sent each token (claimed: its Locker's)
}

type tokenSend struct {
	script string
	client int
	args   string // the command's keys and arguments
	err    error
}

func newTokenSends() *tokenSends {
	return &tokenSends{scripts: padlock.GrantScripts(), elect: padlock.ElectScripts(), last: map[string]tokenSend{}, client: map[string]int{}}
}

// watchTokens makes the world check every command h's client sends.
func (w *world) watchTokens(h *explore.Hook) {
	id := h.ID
	w.watchCopies(h)
	commands := os.Getenv("PADLOCK_EXPLORE_COMMANDS") != ""
	h.Seen = func(ctx context.Context, cmds []redis.Cmder, f explore.Fault, srv string, err error) {
		for _, c := range cmds {
			if commands {
				w.tr.Add("L%d %v (fault %v, %v)", id, c, f.Kind, err) // its args, and its reply or error
			}
			e := c.Err()
			if e == nil && len(cmds) == 1 {
				e = err
			}
			token, q := w.tokenSent(id, srv, c, e)
			w.releaseBidSent(id, c)
			if e == nil && f.Kind == explore.None {
				var op *opSeen
				if !explore.Pipelined(ctx) {
					op, _ = ctx.Value(opKey{}).(*opSeen)
				}
				w.sawAsk(id, c, op)
			}
			if !explore.Pipelined(ctx) {
				op := w.sets.opOf(ctx, q)
				opCommand(op, token, q, f, e, w.chk.now())
				w.sawElection(op, c, token, e)
				w.touchedPlace(q.place)
				w.attemptPlace(token, q.place)
			} else {
				// A batch goes under its first caller's context:
				// tell the others by the place they name.
				w.sets.batched(q, f, e, w.chk.now())
				w.touchedPlace(q.place)
				w.attemptPlace(token, q.place)
			}
		}
	}
}

// tokenSent checks one command sent by client id to srv, which ended
// with cerr, and returns the new grant's token it named ("" for a command
// that makes no grant) and, for a fair waiter's attempt, the queue and
// the place it names.
func (w *world) tokenSent(id int, srv string, c redis.Cmder, cerr error) (string, queuedAt) {
	args := c.Args()
	if len(args) < 4 {
		return "", queuedAt{}
	}
	if verb := strings.ToLower(fmt.Sprint(args[0])); verb != "evalsha" && verb != "eval" {
		return "", queuedAt{}
	}
	gs, ok := w.tokens.scripts[fmt.Sprint(args[1])]
	if !ok {
		return "", queuedAt{}
	}
	nk, err := strconv.Atoi(fmt.Sprint(args[2]))
	at := 3 + nk + gs.Token - 1
	if err != nil || nk < 1 || at >= len(args) {
		return "", queuedAt{}
	}
	token, key := fmt.Sprint(args[at]), fmt.Sprint(args[3])
	if gs.Name == "multi_acquire" {
		w.setSent(token, args[3:3+nk])
	}
	var q queuedAt
	if p := gs.Place; p > 0 && 3+nk+p-1 < len(args) && nk >= 3 {
		q = queuedAt{srv: srv, queue: fmt.Sprint(args[3+2]), place: fmt.Sprint(args[3+nk+p-1])}
	}
	k := srv + "|" + token + "|" + key
	t := w.tokens
	t.mu.Lock()
	prev, again := t.last[k]
	sent := fmt.Sprint(args[2:])
	t.last[k] = tokenSend{script: gs.Name, client: id, args: sent, err: cerr}
	t.client[token] = id
	t.mu.Unlock()
	// A copy of the same attempt goes again on the same client, with the
	// same keys and arguments, after a closed connection or NOSCRIPT.
	if again && !(sentAgain(prev.err) && prev.client == id && prev.args == sent) {
		w.chk.fail(invTokenFresh, w.chk.now(), "%s on %s for %s under token %s, which an earlier %s (client %d, %v) sent: a new attempt reused an earlier attempt's token",
			gs.Name, srv, key, token, prev.script, prev.client, prev.err)
	}
	return token, q
}

// releaseBidSent records, for a release that places its Locker's next
// bid (release.lua's ARGV[7], the token of its first waiter's next
// attempt), that client id sent that token: a grant to it is that
// Locker's to claim (the claimed invariant).
func (w *world) releaseBidSent(id int, c redis.Cmder) {
	sc, ok := scriptCallOf(c)
	if !ok || w.copies.cleanups[sc.script] != "release" || len(sc.argv) < 8 || sc.argv[6] == "" {
		return
	}
	t := w.tokens
	t.mu.Lock()
	t.client[sc.argv[6]] = id
	t.mu.Unlock()
}

// sentAgain reports whether a command that ended with err is sent again
// by padlock, as the same attempt: after a closed connection, or as EVAL
// after NOSCRIPT.
func sentAgain(err error) bool {
	return err != nil && (padlock.ClosedConn(err) || strings.HasPrefix(err.Error(), "NOSCRIPT"))
}

// refused fails the run when an operation of g ended because padlock
// refused to send an attempt under a token an earlier one sent: the
// store's half of the rule caught a site that broke it.
func (w *world) refused(g string, err error) {
	if err != nil && strings.Contains(err.Error(), "reused an earlier attempt's token") {
		w.chk.fail(invTokenFresh, w.chk.now(), "%s: %v", g, err)
	}
}
