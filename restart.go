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
// an uptime check (INFO server) sent once dials had reached d, every reply
// on a connection among those d comes from the process the check saw, or
// from one that started before the check and is therefore that same one.
// Only when the client has dialled since is the next grant followed by a
// new check. The check itself can only err on the safe side: it takes the
// process to have started as late as its uptime in whole seconds allows (so
// a node votes one or two seconds after the max lease), and a process with
// a new run_id as a new process.
type restartGuard struct {
	maxLease time.Duration

	mu      sync.Mutex
	dials   uint64    // connections dialled (or being dialled) so far
	checked bool      // an uptime check has succeeded
	okDials uint64    // dials when that check was sent
	runID   string    // the server process it saw
	started time.Time // the latest that process can have started (monotonic)
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

// counts reports whether a grant that was sent at sent, and whose reply has
// arrived, counts. It checks c's uptime first when c dialled since the last
// check.
func (g *restartGuard) counts(ctx context.Context, c redis.UniversalClient, sent time.Time) (bool, error) {
	g.mu.Lock()
	fresh := g.checked && g.dials == g.okDials
	started, dials := g.started, g.dials
	g.mu.Unlock()
	if !fresh {
		// dials was read after the reply arrived, so the connection that
		// carried the grant is among them.
		var err error
		if started, err = g.check(ctx, c, dials); err != nil {
			return false, err
		}
	}
	return !sent.Before(started.Add(g.maxLease)), nil
}

// check reads the server's uptime and returns the latest time its process
// can have started; dials is the count of connections before the check was
// sent.
func (g *restartGuard) check(ctx context.Context, c redis.UniversalClient, dials uint64) (time.Time, error) {
	info, err := c.Info(ctx, "server").Result()
	if err != nil {
		return time.Time{}, err
	}
	answered := time.Now()
	runID, uptime, err := parseServerInfo(info)
	if err != nil {
		return time.Time{}, err
	}
	// Redis counts uptime as whole seconds now less whole seconds at start,
	// each rounded down: the process has been up for more than uptime less
	// one second.
	started := answered.Add(time.Second - uptime)
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.checked && runID == g.runID {
		// The same process as before (run_id is new on every start): the
		// earlier bound holds too, and the whole-second rounding must not
		// take back a vote it already allowed.
		started = earliest(started, g.started)
	}
	if !g.checked || dials >= g.okDials {
		g.checked, g.okDials, g.runID, g.started = true, dials, runID, started
	}
	return started, nil
}

func earliest(a, b time.Time) time.Time {
	if b.Before(a) {
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
