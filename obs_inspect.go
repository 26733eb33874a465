package padlock

import (
	"context"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// Inspection is what Locker.Inspect found in Redis: the locks every
// process holds under the Locker's key prefix.
type Inspection struct {
	// Locks are the locks held, by key. On a Redlock Locker a lock is
	// listed once, with the number of nodes holding it.
	Locks []RemoteLock
	// Truncated is true when a node held more locks than the limit and
	// some were left out.
	Truncated bool
	// Nodes is how many nodes were asked: 1 for a single node or
	// Sentinel deployment, the masters of a Cluster, the Redlock nodes.
	// NodesUp is how many answered.
	Nodes, NodesUp int
	// Need is, on a Redlock Locker, how many nodes a lock needs; 0
	// otherwise.
	Need int
	// Degraded is true on a Redlock Locker when some nodes did not answer
	// but a quorum did: locking goes on, with less margin.
	Degraded bool
	// Errors are the nodes' errors, if any, by node address.
	Errors map[string]error
}

// RemoteLock is one lock Inspect found in Redis.
type RemoteLock struct {
	// Key is the lock key as passed to Acquire (unescaped from the Redis
	// key). It may carry request data.
	Key string
	// Token is the owner token (without the '*' a waiter may append).
	Token string
	// Owner is the holder's Options.Owner and Options.Caller (joined by
	// a space), if it set one.
	Owner string
	// TTL is the remaining lease in Redis (on Redlock, the shortest among
	// the nodes holding it).
	TTL time.Duration
	// Nodes is, on a Redlock Locker, how many nodes hold the lock (a
	// majority, unless it is being taken, released or lost); 1 otherwise.
	Nodes int
	// Local is true when this Locker holds the lock (see Held).
	Local bool
}

// DefaultInspectLimit is how many locks Inspect lists per node when its
// limit is 0.
const DefaultInspectLimit = 1000

// Inspect lists the locks held in Redis under the Locker's key prefix, by
// any process: on a single node or Sentinel master, on every master of a
// Cluster, on every node of a Redlock Locker (where a lock is listed once,
// with the number of nodes holding it). It reads at most limit locks per
// node (0: DefaultInspectLimit), with SCAN, GET and PTTL: cheap, but not
// free on a large keyspace; call it from an operator's view, not per
// request. It fails with an ErrUnavailable error when no node answered,
// or on Redlock when fewer than a quorum did; the nodes that did answer
// are listed either way.
//
// The Redis user needs SCAN, GET and PTTL on the prefix's keys.
func (l *Locker) Inspect(ctx context.Context, limit int) (*Inspection, error) {
	if limit <= 0 {
		limit = DefaultInspectLimit
	}
	nodes := l.inspectNodes()
	in := &Inspection{Nodes: len(nodes)}
	if q, ok := l.store.(*quorum); ok {
		in.Need = q.need
	}
	byKey := map[string]*RemoteLock{}
	var mu sync.Mutex
	add := func(addr string, found []RemoteLock, more bool, err error) {
		mu.Lock()
		defer mu.Unlock()
		if err != nil {
			if in.Errors == nil {
				in.Errors = map[string]error{}
			}
			in.Errors[addr] = err
			return
		}
		in.NodesUp++
		in.Truncated = in.Truncated || more
		for _, f := range found {
			if prev := byKey[f.Key]; prev != nil && prev.Token == f.Token {
				prev.Nodes++
				prev.TTL = min(prev.TTL, f.TTL)
				continue
			}
			byKey[f.Key] = &f
		}
	}
	var wg sync.WaitGroup
	for _, n := range nodes {
		wg.Go(func() {
			if cc, ok := n.client.(*redis.ClusterClient); ok {
				masters := 0
				err := cc.ForEachMaster(ctx, func(ctx context.Context, m *redis.Client) error {
					mu.Lock()
					masters++
					mu.Unlock()
					found, more, err := l.scanLocks(ctx, m, limit)
					add(m.Options().Addr, found, more, err)
					return nil
				})
				mu.Lock()
				in.Nodes += masters - 1
				mu.Unlock()
				if masters == 0 && err != nil {
					in.Nodes++
					add("cluster", nil, false, err)
				}
				return
			}
			found, more, err := l.scanLocks(ctx, n.client, limit)
			add(n.addr, found, more, err)
		})
	}
	wg.Wait()
	local := map[string]bool{}
	for _, h := range l.Held() {
		local[h.Token] = true
	}
	for _, f := range byKey {
		f.Local = local[f.Token]
		in.Locks = append(in.Locks, *f)
	}
	slices.SortFunc(in.Locks, func(a, b RemoteLock) int { return strings.Compare(a.Key, b.Key) })
	switch {
	case in.Need > 0:
		in.Degraded = in.NodesUp >= in.Need && in.NodesUp < in.Nodes
		if in.NodesUp < in.Need {
			return in, unavailable("inspect", firstError(in.Errors))
		}
	case in.NodesUp == 0 && in.Nodes > 0:
		return in, unavailable("inspect", firstError(in.Errors))
	}
	return in, nil
}

func firstError(errs map[string]error) error {
	addrs := make([]string, 0, len(errs))
	for a := range errs {
		addrs = append(addrs, a)
	}
	slices.Sort(addrs)
	if len(addrs) == 0 {
		return context.DeadlineExceeded
	}
	return errs[addrs[0]]
}

// inspectNode is one deployment Inspect scans.
type inspectNode struct {
	client redis.UniversalClient
	addr   string
}

func (l *Locker) inspectNodes() []inspectNode {
	switch s := l.store.(type) {
	case *quorum:
		out := make([]inspectNode, len(s.nodes))
		for i, n := range s.nodes {
			out[i] = inspectNode{n.client, n.addr}
		}
		return out
	case single:
		return []inspectNode{{s.client, "redis"}}
	case acked:
		return []inspectNode{{s.client, "redis"}}
	}
	return nil
}

// scanLocks lists the locks on one node, at most limit; more reports that
// there were others.
func (l *Locker) scanLocks(ctx context.Context, node redis.UniversalClient, limit int) (found []RemoteLock, more bool, err error) {
	prefix := l.keys.prefix + "{"
	var keys []string
	iter := node.Scan(ctx, 0, escapeGlob(prefix)+"*", 200).Iterator()
	for iter.Next(ctx) {
		k := iter.Val()
		if !strings.HasSuffix(k, "}") { // P{K}:queue
			continue
		}
		if len(keys) == limit {
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
		// markers a Locker leaves when it yields a key (wait_handoff.go).
		if err != nil || strings.HasPrefix(token, "y:") {
			continue
		}
		found = append(found, RemoteLock{
			Key:   unescapeKey(k[len(prefix) : len(k)-1]),
			Token: tokenOf(token),
			Owner: ownerOf(token),
			TTL:   max(pttls[i].Val(), 0),
			Nodes: 1,
		})
	}
	return found, more, nil
}

var (
	keyUnescaper = strings.NewReplacer(`\\`, `\`, `\[`, "{", `\]`, "}")
	globEscaper  = strings.NewReplacer(`\`, `\\`, "*", `\*`, "?", `\?`, "[", `\[`, "]", `\]`)
)

// unescapeKey undoes escapeKey (config_keys.go).
func unescapeKey(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	return keyUnescaper.Replace(s)
}

// escapeGlob makes s match itself in a SCAN pattern.
func escapeGlob(s string) string { return globEscaper.Replace(s) }
