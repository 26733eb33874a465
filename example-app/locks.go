package main

import (
	"context"
	"net/http"
	"slices"
	"strings"
	"sync"

	"github.com/gin-gonic/gin"
	"github.com/redis/go-redis/v9"

	"github.com/padlockgo/padlock"
)

// maxListedLocks bounds the lock view.
const maxListedLocks = 1000

// heldLock is one entry of the lock view.
type heldLock struct {
	Key   string `json:"key"`             // as passed to Acquire
	Owner string `json:"owner"`           // the start of the owner token
	TTLMS int64  `json:"ttl_ms"`          // remaining lease
	Nodes int    `json:"nodes,omitempty"` // Redlock: how many nodes hold it
}

// locks lists the locks held right now: every padlock key P{K} (the
// P{K}:queue companions of fair waiters left out), with owner and lease.
// On Redlock a lock is listed once with the number of nodes holding it.
func (s *server) locks(c *gin.Context) {
	ctx := c.Request.Context()
	byKey := map[string]*heldLock{}
	var mu sync.Mutex
	truncated := false
	add := func(ctx context.Context, node redis.UniversalClient) error {
		found, more, err := scanLocks(ctx, node)
		mu.Lock()
		defer mu.Unlock()
		truncated = truncated || more
		for _, h := range found {
			if prev, ok := byKey[h.Key]; ok {
				prev.Nodes++
				prev.TTLMS = min(prev.TTLMS, h.TTLMS)
				continue
			}
			h.Nodes = 1
			byKey[h.Key] = &h
		}
		return err
	}
	for _, n := range s.backend.nodes {
		var err error
		if cc, ok := n.(*redis.ClusterClient); ok {
			err = cc.ForEachMaster(ctx, func(ctx context.Context, m *redis.Client) error { return add(ctx, m) })
		} else {
			err = add(ctx, n)
		}
		if err != nil {
			s.logger.Warn("lock view: scan", "err", err)
			writeProblem(c, newProblem(http.StatusServiceUnavailable, "redis unreachable"))
			return
		}
	}
	list := make([]heldLock, 0, len(byKey))
	for _, h := range byKey {
		if s.backend.mode != modeRedlock {
			h.Nodes = 0
		}
		list = append(list, *h)
	}
	slices.SortFunc(list, func(a, b heldLock) int { return strings.Compare(a.Key, b.Key) })
	c.JSON(http.StatusOK, gin.H{"redis": s.backend.desc, "locks": list, "truncated": truncated})
}

// scanLocks lists the locks on one node, at most maxListedLocks; more
// reports that there were others.
func scanLocks(ctx context.Context, node redis.UniversalClient) (found []heldLock, more bool, err error) {
	prefix := padlock.DefaultKeyPrefix + "{"
	var keys []string
	iter := node.Scan(ctx, 0, prefix+"*", 200).Iterator()
	for iter.Next(ctx) {
		k := iter.Val()
		if !strings.HasSuffix(k, "}") { // P{K}:queue
			continue
		}
		if len(keys) == maxListedLocks {
			more = true
			break
		}
		keys = append(keys, k)
	}
	if err := iter.Err(); err != nil {
		return nil, false, err
	}
	if len(keys) == 0 {
		return nil, more, nil
	}
	gets := make([]*redis.StringCmd, len(keys))
	pttls := make([]*redis.DurationCmd, len(keys))
	_, err = node.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, k := range keys {
			gets[i] = p.Get(ctx, k)
			pttls[i] = p.PTTL(ctx, k)
		}
		return nil
	})
	if err != nil && err != redis.Nil {
		return nil, false, err
	}
	for i, k := range keys {
		token, err := gets[i].Result()
		// Skip keys released between SCAN and GET, and the short-lived
		// markers a Locker leaves when it yields a key to another's waiters.
		if err != nil || strings.HasPrefix(token, "y:") {
			continue
		}
		if len(token) > 8 {
			token = token[:8] + "…"
		}
		found = append(found, heldLock{Key: unescapeLockKey(k[len(prefix) : len(k)-1]), Owner: token, TTLMS: pttls[i].Val().Milliseconds()})
	}
	return found, more, nil
}

// unescapeLockKey undoes the escaping padlock applies to a key inside its
// hash tag: '\\' for '\', '\[' for '{' and '\]' for '}'.
func unescapeLockKey(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	return strings.NewReplacer(`\\`, `\`, `\[`, "{", `\]`, "}").Replace(s)
}
