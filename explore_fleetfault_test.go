package padlock_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/padlockgo/padlock/internal/explore"
	"github.com/redis/go-redis/v9"
)

// Command faults in the fleet runs. One fleet run in two lets its
// commands meet faults (stalls, lost replies, resets, delays, slow
// replies) at fleetFaultRate: a fault may stall the key, but only as
// long as the fault itself lasts, never a lease. An attempt whose reply
// was lost may hold the key until its waiter's clean-up lets it go, and
// that clean-up buries it, so a copy of it that runs later still takes
// nothing (lua/claim.lua). So each fault is given its reach (faultReach):
// while it lasts, the idle invariant takes the key as held by someone,
// and the claimed one excuses the faulted Locker's grants; after it, both
// bounds hold again, the quiet one once quietLookBack has passed, as
// after a lost notice.

// fleetFaultRate is the share of a faulted fleet's commands that meet a
// fault (more follow one, in bursts: explore.Plan).
const fleetFaultRate = 0.03

// fleetRefuseRate is the share of a faulted fleet's other commands whose
// connection is refused: they never reach Redis (more after a fault: the
// clean-up of a lost reply is refused with it, explore.Plan.RefuseRate).
// What a refused clean-up leaves undone its waiter does again: a copy
// of the lost attempt may still land while it waits, and its bid is the
// waiter's to claim.
const fleetRefuseRate = 0.01

// lateCopyRate is the share of a faulted fleet's attempts (Acquire's,
// AcquireAll's, in either mode) whose caller times out at once while the
// command runs later (explore.Delay), lateCopyMin to lateCopyMax later
// (half of them within lateCopyShort: while the waiter still waits):
// beside the drawn faults, of every kind and command, which make few
// late copies of the commands the grant at release turns on. A copy
// that lands after its waiter's next attempt was answered may replace
// the waiter's bid (the release then grants the key to the token of
// the lost attempt, which the waiter must still name), or, in fair
// mode, after its waiter was served or gave up, must queue nobody;
// its clean-up, sent at once, is often refused with it (a burst).
const (
	lateCopyRate = 0.08
	// lateReleaseRate: the same for the releases that bid, which are
	// few (a turn over with waiters of the Locker's own in line).
	lateReleaseRate = 0.3
	lateCopyMin     = 5 * time.Millisecond
	lateCopyShort   = 300 * time.Millisecond
	lateCopyMax     = 2 * time.Second
	// cleanupRefusals: a clean-up and padlock's four sends again.
	cleanupRefusals = 5
	// lateCopyLanded: how long after a late copy lands its clean-ups
	// are still refused, when they are until it lands.
	lateCopyLanded = 5 * time.Millisecond
)

// The holders' releases (not an attempt's clean-up, nor one that bids)
// meet faults of their own in a faulted fleet seed's run: refusedReleases
// of them are refused cleanupRefusals times, so Release returns an error
// and the release must go on behind it until Redis answers; and
// stalledReleases are held up between padlock's send and go-redis's, up
// to releaseStallMax, so that a Release's short deadline (opCtx) may end
// on its way and the release never leave unless padlock sends it again.
const (
	refusedReleases = 0.1
	stalledReleases = 0.1
	releaseStallMax = 300 * time.Millisecond
)

// lateCopies aims late copies at the attempts Locker li sends through
// h, in a faulted fleet seed's run (the plain seeds' fleets keep their
// drawn faults alone: more faults excuse more, and a turn taken out of
// order or a grant held its bid's lease shows best where faults are few;
// an honest impatient Locker's attempts have none either).
//
// One late copy in two has its clean-up refused too, every time padlock
// sends it (the first cleanupRefusals clean-up scripts that name its
// token: a waiter's cleanupLost, sent again on a refused connection, as
// every command, 8 to 64 ms apart): its token is not buried then, and the
// copy, when it lands, may take the key or bid, while its waiter still
// waits or after; what the clean-up left undone the waiter's withdrawal,
// or the claim that serves it, does. Of the others, each short one (one
// that lands within lateCopyShort, well within a clean-up's bound) has
// every clean-up naming its token refused until it has landed: the burial
// comes after the copy, whatever the waiter did meanwhile (a fair waiter
// leaves the queue after it). Releases that bid for their Locker's first
// waiter are held up so too (never refused): one that lands after that
// Locker's waiters left, and withdrew the bid, places none.
func (w *world) lateCopies(h *explore.Hook, li int) {
	if !w.fleetFaults || !w.fleetSeed || li == w.impatient && w.impatientHonest {
		return
	}
	var mu sync.Mutex
	refuse := map[string]int{}            // tokens whose next clean-ups are refused, how many
	refuseUntil := map[string]time.Time{} // tokens whose clean-ups are refused until then
	drawn := map[string]bool{}            // holders' tokens whose release faults are drawn
	h.Target = func(cmds []redis.Cmder, idx uint64) explore.Fault {
		if len(cmds) != 1 {
			return explore.Fault{}
		}
		c := cmds[0]
		bidding := w.releaseBidding(c)
		if w.copies.cleanups[scriptOf(c)] != "" && !bidding {
			mu.Lock()
			defer mu.Unlock()
			if token, ok := holderRelease(w, c); ok && !drawn[token] {
				drawn[token] = true
				r := rand.New(rand.NewPCG(w.seed^0x7e1ea5e, uint64(h.ID)<<40^idx))
				switch x := r.Float64(); {
				case x < refusedReleases:
					refuse[token] = cleanupRefusals
				case x < refusedReleases+stalledReleases:
					return explore.Fault{Kind: explore.Stall, D: time.Millisecond + time.Duration(r.Int64N(int64(releaseStallMax)))}
				}
			}
			for _, s := range namesOf(cmds) {
				if refuse[s] > 0 {
					refuse[s]--
					return explore.Fault{Kind: explore.Refused}
				}
				if until, ok := refuseUntil[s]; ok && time.Now().Before(until) {
					return explore.Fault{Kind: explore.Refused}
				}
			}
			return explore.Fault{}
		}
		if !bidding && !w.isAttempt(c) {
			return explore.Fault{}
		}
		r := rand.New(rand.NewPCG(w.seed^0x1a7ec0b1, uint64(h.ID)<<40^idx))
		if rate := r.Float64(); rate >= lateCopyRate && !bidding || rate >= lateReleaseRate {
			return explore.Fault{}
		}
		upTo := lateCopyMax
		if r.IntN(2) == 0 {
			upTo = lateCopyShort
		}
		d := lateCopyMin + time.Duration(r.Int64N(int64(upTo-lateCopyMin)))
		if token := w.attemptToken(c); token != "" && !bidding {
			switch k := r.IntN(4); {
			case k < 2:
				mu.Lock()
				refuse[token] = cleanupRefusals
				mu.Unlock()
			case upTo == lateCopyShort:
				mu.Lock()
				refuseUntil[token] = time.Now().Add(d + lateCopyLanded)
				mu.Unlock()
			}
		}
		return explore.Fault{Kind: explore.Delay, D: d}
	}
}

// holderRelease returns the token c releases when c is a holder's
// release: release.lua, not for an attempt (ARGV[4] '1', or 'x' when it
// buries it).
func holderRelease(w *world, c redis.Cmder) (string, bool) {
	sc, ok := scriptCallOf(c)
	if !ok || w.copies.cleanups[sc.script] != "release" || len(sc.argv) == 0 {
		return "", false
	}
	if len(sc.argv) >= 4 && (sc.argv[3] == "1" || strings.HasPrefix(sc.argv[3], "x")) {
		return "", false
	}
	return sc.argv[0], true
}

// releaseBidding reports whether c is a release that bids for its
// Locker's first waiter (lua/release.lua's ARGV[7]).
func (w *world) releaseBidding(c redis.Cmder) bool {
	sc, ok := scriptCallOf(c)
	return ok && w.copies.cleanups[sc.script] == "release" && len(sc.argv) >= 8 && sc.argv[6] != ""
}

// scriptOf returns the SHA1 (or source) of the script c runs, or "".
func scriptOf(c redis.Cmder) string {
	args := c.Args()
	if len(args) < 2 {
		return ""
	}
	if verb := strings.ToLower(fmt.Sprint(args[0])); verb != "evalsha" && verb != "eval" {
		return ""
	}
	return fmt.Sprint(args[1])
}

// attemptToken returns the token of the grant attempt c would make, or "".
func (w *world) attemptToken(c redis.Cmder) string {
	gs, ok := w.tokens.scripts[scriptOf(c)]
	args := c.Args()
	if !ok || len(args) < 3 {
		return ""
	}
	nk, err := strconv.Atoi(fmt.Sprint(args[2]))
	at := 3 + nk + gs.Token - 1
	if err != nil || at >= len(args) {
		return ""
	}
	return fmt.Sprint(args[at])
}

// isAttempt reports whether c is an attempt: a script that takes a
// mutex key or bids for it (acquire, acquire_fair, multi_acquire).
func (w *world) isAttempt(c redis.Cmder) bool {
	switch w.scriptName(c) {
	case "acquire", "acquire_fair", "multi_acquire":
		return true
	}
	return false
}

// scriptName returns the name of the grant-making script c runs
// (padlock.GrantScripts), or "".
func (w *world) scriptName(c redis.Cmder) string {
	return w.tokens.scripts[scriptOf(c)].Name
}

// claimFaulted reports whether a fault of Locker li in reach at some time
// in [from, to] may be what keeps its grant to token unclaimed: a fault
// of a command that names token (the claim, an attempt that takes the
// grant over, a withdraw); one of a clean-up, which may hold up the
// withdrawal of token behind it (a waiter that leaves withdraws its bids
// one after another); a stall or a slow reply that holds up one of li's
// operations that wait for a key (the first in line among them claims);
// or one of li's fair attempts held up so, behind which the next waits
// in the combiner. A lost, reset, delayed or refused attempt of another
// waiter returns to its caller at once: it holds up no claim.
func (w *world) claimFaulted(li int, token string, from, to time.Duration) bool {
	for _, f := range w.faultWindows(li) {
		if f.from > to || f.to < from {
			continue
		}
		if f.cleanup || slices.Contains(f.names, token) {
			return true
		}
		if f.kind != explore.Stall && f.kind != explore.Slow {
			continue
		}
		if f.fair {
			return true
		}
		if f.op == nil {
			continue
		}
		f.op.mu.Lock()
		// An AcquireAll's record has no kind: it may be waiting.
		o := f.op
		waiting := o.kind == "" || (o.granted < 0 || o.granted >= from) && (o.ended < 0 || o.ended >= from)
		f.op.mu.Unlock()
		if waiting {
			return true
		}
	}
	return false
}

// faultsSeen is when each Locker's commands met a fault, and until when
// that fault may still keep the key (faultReach).
type faultsSeen struct {
	mu      sync.Mutex
	windows map[int][]faultWindow
}

// faultWindow is one fault's reach, and what met it: the caller's
// operation (nil for a pipeline, or a command sent behind the caller),
// the kind of fault, the strings the commands name (tokens among them),
// whether they are fair attempts, which a Locker sends through its
// combiner (store_combine.go), so that one on its way holds up the next,
// and whether they are clean-ups (a release, a withdrawal, a burial),
// which a waiter that leaves sends one after another.
type faultWindow struct {
	from, to time.Duration
	op       *opSeen
	kind     explore.Kind
	names    []string
	fair     bool
	cleanup  bool
}

// names returns the strings cmds name that may be tokens.
func namesOf(cmds []redis.Cmder) []string {
	var out []string
	for _, c := range cmds {
		for _, a := range c.Args() {
			if s, ok := a.(string); ok && len(s) >= 16 {
				out = append(out, s)
			}
		}
	}
	return out
}

// faultReach is how long after it begins a fault may keep its effect on
// the key: a stall or a delay for its length, a slow reply until the
// caller gives up on it (its context's deadline or the read timeout),
// and then, for every kind, the clean-up or the send again that follows,
// which may meet a fault of its own (a window of its own); a delayed
// command's clean-up follows at once, not after it runs.
func faultReach(f explore.Fault) time.Duration {
	const after = 100 * time.Millisecond
	switch f.Kind {
	case explore.Delay:
		// The caller sees a timeout at once, and its clean-up, sent
		// then, has a window of its own: the command's own effect ends
		// as it runs, a round trip after its delay.
		return f.D + 20*time.Millisecond
	case explore.Stall:
		return f.D + after
	case explore.Slow:
		return min(f.D, 3*time.Second) + after
	}
	return after
}

// watchFaults makes the world record the faults Locker li's commands meet
// through h, in a faulted fleet run.
func (w *world) watchFaults(h *explore.Hook, li int) {
	if !w.fleetFaults {
		return
	}
	h.Faulted = func(ctx context.Context, cmds []redis.Cmder, f explore.Fault) {
		now := w.chk.now()
		fw := faultWindow{from: now, to: now + faultReach(f), kind: f.Kind, names: namesOf(cmds)}
		if !explore.Pipelined(ctx) {
			fw.op, _ = ctx.Value(opKey{}).(*opSeen)
		}
		for _, c := range cmds {
			fw.fair = fw.fair || w.scriptName(c) == "acquire_fair"
			fw.cleanup = fw.cleanup || w.copies.cleanups[scriptOf(c)] != ""
		}
		fs := &w.faults
		fs.mu.Lock()
		defer fs.mu.Unlock()
		if fs.windows == nil {
			fs.windows = map[int][]faultWindow{}
		}
		fs.windows[li] = append(fs.windows[li], fw)
	}
}

// faultWindows returns the fault windows of Locker li, or of every
// Locker when li < 0.
func (w *world) faultWindows(li int) []faultWindow {
	fs := &w.faults
	fs.mu.Lock()
	defer fs.mu.Unlock()
	var out []faultWindow
	for l, ws := range fs.windows {
		if li < 0 || l == li {
			out = append(out, ws...)
		}
	}
	return out
}

// faultedIn reports whether a fault of Locker li (any Locker when li < 0)
// was in reach at some time in [from, to].
func (w *world) faultedIn(li int, from, to time.Duration) bool {
	for _, f := range w.faultWindows(li) {
		if f.from <= to && f.to >= from {
			return true
		}
	}
	return false
}
