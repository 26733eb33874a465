package padlock

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// restartGuard applies Redlock's delayed-restart rule to one node: a grant
// counts only if the server process that made it had been up for the max
// lease when the request was sent, so it cannot have forgotten a lease that
// is still running elsewhere.
//
// Which process answered is known without asking on every request. A
// process's connections die with it, so a reply on a connection comes from
// the process that accepted it, and that process was alive throughout. As a
// go-redis hook, the guard counts the connections the client dials. After
// a check (INFO server) sent once dials had reached d, every reply on a
// connection among those d comes from the process the check saw, or from
// one that started before the check and is therefore that same one. Only
// when the client has dialled since is the next grant followed by a new
// check.
//
// When the process started is judged on the client's monotonic clock, and
// errs late, never early:
//
//   - A run_id the guard saw before is the same process (run_id is new on
//     every start), which keeps the start the guard first gave it. A new
//     uptime reading is never trusted to move it earlier: after a wall
//     clock step forward, uptime_in_seconds (which Redis derives from the
//     wall clock) overstates how long the process has been up.
//   - A run_id that replaces one the guard saw is a process that started
//     after the guard last saw the old one, and before this check was
//     answered. The old process may have granted leases up to the moment
//     it died, so the new one is taken to have started when the check was
//     answered, whatever its uptime says: it votes a max lease after the
//     client first saw it. (Counting from the last sight of the old
//     process instead would let it vote early when the old one lived on
//     unobserved, granting leases, after that sight.)
//   - The first run_id the guard sees has nothing before it: its uptime is
//     all there is, taken as a second shorter than it says (Redis rounds
//     it down to whole seconds). A wall clock stepped forward between that
//     process's start and the guard's first check makes it vote early.
//
// With WithPersistentNodes the same check also reads the node's
// appendonly and appendfsync settings: a node that persists every write
// before it answers remembers its locks across a restart, and its grants
// count at once. A node whose settings say otherwise is held to the rule;
// one that refuses CONFIG GET is taken at the caller's word.
type restartGuard struct {
	maxLease   time.Duration
	persistent bool // WithPersistentNodes

	mu      sync.Mutex
	dials   uint64 // connections dialled (or being dialled) so far
	checked bool   // a check has succeeded
	okDials uint64 // dials when that check was sent
	last    sighting
}

// sighting is what one check learnt of the process behind a node.
type sighting struct {
	durable bool      // it persists every write before answering (or is promised to)
	why     error     // WithPersistentNodes, but its settings say it does not
	runID   string    // "" when unknown (a durable node whose INFO failed)
	started time.Time // the latest it can have started (monotonic)
}

// verdict is the guard's answer on one grant.
type verdict struct {
	counts bool
	wait   time.Duration // when not counts: until a grant sent then would count
	why    error         // sighting.why
}

// DialHook counts a new connection before it is made.
func (g *restartGuard) DialHook(next redis.DialHook) redis.DialHook {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		g.mu.Lock()
		g.dials++
		g.mu.Unlock()
		return next(ctx, network, addr)
	}
}

func (g *restartGuard) ProcessHook(next redis.ProcessHook) redis.ProcessHook { return next }

func (g *restartGuard) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// counts says whether a grant that was sent at sent, and whose reply has
// arrived, counts. It checks the node first when c dialled since the last
// check.
func (g *restartGuard) counts(ctx context.Context, c redis.UniversalClient, sent time.Time) (verdict, error) {
	g.mu.Lock()
	fresh := g.checked && g.dials == g.okDials
	s, dials := g.last, g.dials
	g.mu.Unlock()
	if !fresh {
		// dials was read after the reply arrived, so the connection that
		// carried the grant is among them.
		var err error
		if s, err = g.check(ctx, c, dials); err != nil {
			return verdict{}, err
		}
	}
	if s.durable {
		return verdict{counts: true}, nil
	}
	votes := s.started.Add(g.maxLease)
	if !sent.Before(votes) {
		return verdict{counts: true}, nil
	}
	return verdict{wait: max(time.Until(votes), 0), why: s.why}, nil
}

// check asks the node what process it runs (and, with persistent, how it
// persists writes) and records what it learnt; dials is the count of
// connections before the check was sent.
func (g *restartGuard) check(ctx context.Context, c redis.UniversalClient, dials uint64) (sighting, error) {
	if !g.persistent {
		info, err := c.Info(ctx, "server").Result()
		if err != nil {
			return sighting{}, err
		}
		return g.observe(info, false, nil, time.Now(), dials)
	}
	// One round trip: the check runs within the grant's node timeout.
	var info *redis.StringCmd
	var aof, fsync *redis.MapStringStringCmd
	_, _ = c.Pipelined(ctx, func(p redis.Pipeliner) error {
		info = p.Info(ctx, "server")
		aof = p.ConfigGet(ctx, "appendonly")
		fsync = p.ConfigGet(ctx, "appendfsync")
		return nil
	})
	answered := time.Now()
	durable, why := persistence(aof, fsync)
	if err := info.Err(); err != nil && !durable {
		return sighting{}, err
	}
	return g.observe(info.Val(), durable, why, answered, dials)
}

// observe records what a check answered at answered says: the INFO server
// reply info, and whether the node persists every write (durable, or why
// not). A durable node needs no uptime, so a reply it cannot be read from
// is no error then.
func (g *restartGuard) observe(info string, durable bool, why error, answered time.Time, dials uint64) (sighting, error) {
	s := sighting{durable: durable, why: why}
	runID, uptime, err := parseServerInfo(info)
	if err != nil && !durable {
		return sighting{}, err
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if err == nil {
		s.runID = runID
		switch {
		case runID == g.last.runID:
			// The same process: the start given to it stands. Redis rounds
			// uptime to whole seconds, so a later reading may differ by one
			// either way; neither may move it (see restartGuard).
			s.started = g.last.started
		case g.checked:
			// A process the guard has not seen replaces one it has (or one
			// it could not name): it started before this answer, and that
			// is all the client's own clock can tell.
			s.started = latest(answered, answered.Add(time.Second-uptime))
		default:
			// Redis counts uptime as whole seconds now less whole seconds
			// at start, each rounded down: the process has been up for
			// more than uptime less one second.
			s.started = answered.Add(time.Second - uptime)
		}
	}
	if !g.checked || dials >= g.okDials {
		g.checked, g.okDials, g.last = true, dials, s
	}
	return s, nil
}

// persistence reads the node's appendonly and appendfsync settings from
// CONFIG GET replies: durable when it persists every write before it
// answers, or when it would not say (an error reply, or settings it does
// not know), leaving the caller's word (WithPersistentNodes) to stand;
// otherwise why it is not.
func persistence(aof, fsync *redis.MapStringStringCmd) (durable bool, why error) {
	for _, c := range [...]*redis.MapStringStringCmd{aof, fsync} {
		var rerr redis.Error
		switch err := c.Err(); {
		case errors.As(err, &rerr):
			return true, nil
		case err != nil:
			return false, fmt.Errorf("persistence not confirmed: CONFIG GET: %w", err)
		}
	}
	a, okA := aof.Val()["appendonly"]
	f, okF := fsync.Val()["appendfsync"]
	if !okA || !okF || (a == "yes" && f == "always") {
		return true, nil
	}
	return false, fmt.Errorf("appendonly is %s and appendfsync %s, not yes and always: "+
		"the node may restart without its latest writes, so WithPersistentNodes does not spare it the delayed-restart rule", a, f)
}

func latest(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// parseServerInfo reads run_id and uptime_in_seconds from an INFO server
// reply.
func parseServerInfo(info string) (runID string, uptime time.Duration, err error) {
	seen := false
	for line := range strings.Lines(info) {
		k, v, _ := strings.Cut(strings.TrimSpace(line), ":")
		switch k {
		case "run_id":
			runID = v
		case "uptime_in_seconds":
			s, perr := strconv.ParseInt(v, 10, 64)
			if perr != nil || s < 0 {
				return "", 0, fmt.Errorf("bad uptime_in_seconds %q in INFO server", v)
			}
			uptime, seen = time.Duration(s)*time.Second, true
		}
	}
	if runID == "" || !seen {
		return "", 0, errors.New("INFO server lacks run_id or uptime_in_seconds")
	}
	return runID, uptime, nil
}
