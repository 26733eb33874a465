package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/padlockgo/padlock"
)

// nodeHealth is one Redlock node in /healthz.
type nodeHealth struct {
	Addr  string `json:"addr"`
	Up    bool   `json:"up"`
	Error string `json:"error,omitempty"`
}

// health is what /healthz knows of the Redis side.
type health struct {
	nodes    []nodeHealth  // Redlock: every node
	up       int           // Redlock: nodes that answer PING
	refused  error         // why locks cannot be taken now, or nil
	why      string        // refused, said for a person
	retryIn  time.Duration // when locking may work again, if known
	degraded bool          // locks work, but some nodes are down
}

// health checks that locks can be taken. On one node or a Cluster, every
// node must answer. On Redlock, a majority must answer and vote: a probe
// lock is taken and released, so nodes that answer PING but may not vote
// yet (up less than the max lease) count as what they are. Locks keep
// working with a minority of nodes down: that is degraded, not down.
func (b *backend) health(ctx context.Context) health {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	if b.mode != modeRedlock {
		if err := b.ping(ctx); err != nil {
			return health{refused: err, why: "redis unreachable"}
		}
		return health{}
	}
	h := health{nodes: make([]nodeHealth, len(b.nodes))}
	var wg sync.WaitGroup
	for i, n := range b.nodes {
		wg.Go(func() {
			// A node down is a node that does not answer in time, as
			// for a lock: its dial retries must not hold up the answer.
			ctx, cancel := context.WithTimeout(ctx, b.nodeTimeout)
			defer cancel()
			h.nodes[i] = nodeHealth{Addr: b.addrs[i], Up: true}
			if err := n.Ping(ctx).Err(); err != nil {
				h.nodes[i] = nodeHealth{Addr: b.addrs[i], Error: err.Error()}
			}
		})
	}
	wg.Wait()
	for _, n := range h.nodes {
		if n.Up {
			h.up++
		}
	}
	need := len(b.nodes)/2 + 1
	if h.up < need {
		h.refused = fmt.Errorf("%d of %d redlock nodes answer, %d needed", h.up, len(b.nodes), need)
		h.why = fmt.Sprintf("only %d of %d redis nodes answer, and a lock needs %d", h.up, len(b.nodes), need)
		return h
	}
	h.degraded = h.up < len(b.nodes)
	lk, err := b.locker.Acquire(ctx, "healthz", padlock.Options{TTL: min(time.Second, b.lockTTL), NoRenew: true})
	switch {
	case err == nil:
		_ = lk.Release(context.WithoutCancel(ctx))
	case errors.Is(err, padlock.ErrNotAcquired) && !errors.Is(err, padlock.ErrUnavailable):
		// Another instance's probe holds it: the nodes voted.
	default:
		h.refused = err
		h.why, h.retryIn = explainUnavailable(err, b.lockTTL)
	}
	return h
}

// explainUnavailable says, for a person, why a lock could not be taken
// because too few nodes agreed, and when that may change (0: unknown).
// Above all it names the case a fresh deployment meets: nodes up for less
// than the max lease do not vote yet (padlock's delayed-restart rule).
func explainUnavailable(err error, maxLease time.Duration) (string, time.Duration) {
	var qe *padlock.QuorumError
	if !errors.As(err, &qe) {
		return "the lock service is unavailable", 0
	}
	var waits []time.Duration
	for _, n := range qe.Nodes {
		if n.Outcome == padlock.NodeRestarting {
			waits = append(waits, n.Wait)
		}
	}
	short := qe.Need - qe.Agreed() // votes missing
	if len(waits) == 0 || short > len(waits) {
		return fmt.Sprintf("the lock service is unavailable: %d of %d redis nodes agreed, %d needed", qe.Agreed(), len(qe.Nodes), qe.Need), 0
	}
	slices.Sort(waits)
	in := waits[short-1]
	return fmt.Sprintf("the lock service cannot lock yet: %d of %d redis nodes have been up for less than the max lease (%v), "+
		"and a node may not vote until then, or it could grant a lock it held before a restart and forgot; enough of them vote in %v",
		len(waits), len(qe.Nodes), maxLease, in.Round(100*time.Millisecond)), in
}

// healthReport is the app's health: what the admin side's /healthz shows
// in full, and the public /healthz reduces to its status.
type healthReport struct {
	status  string        // ok, degraded or down
	redis   health        // the Redis side
	dbErr   error         // the database does not answer, or nil
	retryIn time.Duration // down: when it may be up again, if known
}

// Health statuses.
const (
	healthOK       = "ok"       // locks and the database work
	healthDegraded = "degraded" // they work, but a Redlock node is down
	healthDown     = "down"     // locks cannot be taken, or the database does not answer
)

// checkHealth checks Redis (see backend.health) and the database, and
// logs what is wrong.
func (s *server) checkHealth(ctx context.Context) healthReport {
	h := s.backend.health(ctx)
	rep := healthReport{status: healthOK, redis: h}
	switch {
	case h.refused != nil:
		s.logger.Warn("healthz: redis: "+h.why, "err", h.refused)
		rep.status, rep.retryIn = healthDown, h.retryIn
		return rep
	case h.degraded:
		rep.status = healthDegraded
		s.logger.Warn("healthz: redis degraded: locks work, but not every node answers", "up", h.up, "nodes", len(h.nodes))
	}
	if err := s.store.db.PingContext(ctx); err != nil {
		s.logger.Warn("healthz: database", "err", err)
		rep.status, rep.dbErr = healthDown, err
	}
	return rep
}

// healthz is the public health check, for load balancers and
// orchestrators: its status code (200 or 503) and one word, ok, degraded
// or down. What is down and where (the Redis nodes' addresses, their
// dial errors) is the admin side's (adminHealthz): anyone may ask this
// listener, and a map of the deployment is none of their business.
func (s *server) healthz(c *gin.Context) {
	rep := s.checkHealth(c.Request.Context())
	if rep.status == healthDown {
		p := newProblem(http.StatusServiceUnavailable, "down: the service cannot take orders' locks or reach its database now; retry later")
		p.RetryAfter = rep.retryIn
		writeProblem(c, p)
		return
	}
	c.JSON(http.StatusOK, gin.H{"status": rep.status})
}

// adminHealthz is the admin side's /healthz: the status, 200 or 503, as
// the public one, and the details behind it: the Redis mode, whether
// fences work, on Redlock every node by address with its error, and why
// the app is down.
func (s *server) adminHealthz(w http.ResponseWriter, r *http.Request) {
	rep := s.checkHealth(r.Context())
	h := rep.redis
	body := map[string]any{"status": rep.status, "redis": s.backend.desc, "fencing": s.backend.fenced}
	if h.nodes != nil {
		body["nodes"] = h.nodes
		body["nodes_up"] = h.up
		body["quorum"] = len(h.nodes)/2 + 1
	}
	code := http.StatusOK
	switch {
	case h.refused != nil:
		code = http.StatusServiceUnavailable
		body["why"] = "redis: " + h.why
		body["error"] = h.refused.Error()
	case rep.dbErr != nil:
		code = http.StatusServiceUnavailable
		body["why"] = "database unreachable"
		body["error"] = rep.dbErr.Error()
	}
	if rep.retryIn > 0 {
		w.Header().Set("Retry-After", strconv.Itoa(int(math.Ceil(rep.retryIn.Seconds()))))
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(body)
}
