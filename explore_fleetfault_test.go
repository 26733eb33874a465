package padlock_test

import (
	"fmt"
	"math/rand/v2"
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
// command runs later (explore.Delay), lateCopyMin to lateCopyMax later:
// beside the drawn faults, of every kind and command, which make few
// late copies of the commands the grant at release turns on. A copy
// that lands after its waiter's next attempt was answered may replace
// the waiter's bid (the release then grants the key to the token of
// the lost attempt, which the waiter must still name), or, in fair
// mode, after its waiter was served or gave up, must queue nobody;
// its clean-up, sent at once, is often refused with it (a burst).
const (
	lateCopyRate = 0.04
	lateCopyMin  = 50 * time.Millisecond
	lateCopyMax  = 2 * time.Second
)

// lateCopies aims late copies at the attempts sent through h, in a
// faulted fleet run.
func (w *world) lateCopies(h *explore.Hook) {
	if !w.fleetFaults {
		return
	}
	h.Target = func(cmds []redis.Cmder, idx uint64) explore.Fault {
		if len(cmds) != 1 || !w.isAttempt(cmds[0]) {
			return explore.Fault{}
		}
		r := rand.New(rand.NewPCG(w.seed^0x1a7ec0b1, uint64(h.ID)<<40^idx))
		if r.Float64() >= lateCopyRate {
			return explore.Fault{}
		}
		return explore.Fault{Kind: explore.Delay, D: lateCopyMin + time.Duration(r.Int64N(int64(lateCopyMax-lateCopyMin)))}
	}
}

// isAttempt reports whether c is an attempt: a script that takes a
// mutex key or bids for it (acquire, acquire_fair, multi_acquire).
func (w *world) isAttempt(c redis.Cmder) bool {
	args := c.Args()
	if len(args) < 2 {
		return false
	}
	if verb := strings.ToLower(fmt.Sprint(args[0])); verb != "evalsha" && verb != "eval" {
		return false
	}
	switch w.tokens.scripts[fmt.Sprint(args[1])].Name {
	case "acquire", "acquire_fair", "multi_acquire":
		return true
	}
	return false
}

// faultsSeen is when each Locker's commands met a fault, and until when
// that fault may still keep the key (faultReach).
type faultsSeen struct {
	mu      sync.Mutex
	windows map[int][]faultWindow
}

type faultWindow struct{ from, to time.Duration }

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
	h.Faulted = func(cmds []redis.Cmder, f explore.Fault) {
		now := w.chk.now()
		fs := &w.faults
		fs.mu.Lock()
		defer fs.mu.Unlock()
		if fs.windows == nil {
			fs.windows = map[int][]faultWindow{}
		}
		fs.windows[li] = append(fs.windows[li], faultWindow{now, now + faultReach(f)})
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
