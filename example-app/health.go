package main

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
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

// health is what /healthz reports of the Redis side.
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

func (s *server) healthz(c *gin.Context) {
	ctx := c.Request.Context()
	h := s.backend.health(ctx)
	if h.refused != nil {
		s.logger.Warn("healthz: redis: "+h.why, "err", h.refused)
		p := newProblem(http.StatusServiceUnavailable, "redis: "+h.why)
		p.RetryAfter = h.retryIn
		writeProblem(c, p)
		return
	}
	if err := s.store.db.PingContext(ctx); err != nil {
		s.logger.Warn("healthz: database", "err", err)
		writeProblem(c, newProblem(http.StatusServiceUnavailable, "database unreachable"))
		return
	}
	status := "ok"
	if h.degraded {
		status = "degraded"
		s.logger.Warn("healthz: redis degraded: locks work, but not every node answers", "up", h.up, "nodes", len(h.nodes))
	}
	body := gin.H{"status": status, "redis": s.backend.desc, "fencing": s.backend.fenced}
	if h.nodes != nil {
		body["nodes"] = h.nodes
		body["nodes_up"] = h.up
		body["quorum"] = len(h.nodes)/2 + 1
	}
	c.JSON(http.StatusOK, body)
}
