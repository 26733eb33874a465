package main

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// roundTrips is a go-redis hook that counts what a client sends: every
// command sent on its own is one round trip (a script's EVALSHA that falls
// back to EVAL is two), every pipeline is one round trip carrying
// pipelined commands. go-redis sends pub/sub (UN)SUBSCRIBE outside hooks;
// those are taken from the server's commandstats instead (see sample).
type roundTrips struct {
	commands  atomic.Int64 // sent on their own
	pipelines atomic.Int64
	piped     atomic.Int64 // commands sent in pipelines
	slowest   atomic.Int64 // the longest pipeline round trip, in ns

	named sync.Map // request name -> *atomic.Int64, for clients that count by name (etcd's gRPC methods)
}

// count counts one request sent on its own, by name.
func (h *roundTrips) count(name string) {
	h.commands.Add(1)
	h.tally(name)
}

// tally counts name without counting a request: something the breakdown
// shows beside the requests.
func (h *roundTrips) tally(name string) {
	n, ok := h.named.Load(name)
	if !ok {
		n, _ = h.named.LoadOrStore(name, new(atomic.Int64))
	}
	n.(*atomic.Int64).Add(1)
}

func (h *roundTrips) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *roundTrips) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		h.commands.Add(1)
		return next(ctx, cmd)
	}
}

func (h *roundTrips) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		h.pipelines.Add(1)
		h.piped.Add(int64(len(cmds)))
		start := time.Now()
		err := next(ctx, cmds)
		d := int64(time.Since(start))
		for {
			old := h.slowest.Load()
			if d <= old || h.slowest.CompareAndSwap(old, d) {
				break
			}
		}
		return err
	}
}

type hookCounts struct {
	commands, pipelines, piped int64
	named                      map[string]int64 // requests counted by name
}

func (h *roundTrips) load() hookCounts {
	c := hookCounts{commands: h.commands.Load(), pipelines: h.pipelines.Load(), piped: h.piped.Load()}
	h.named.Range(func(k, v any) bool {
		if c.named == nil {
			c.named = map[string]int64{}
		}
		c.named[k.(string)] = v.(*atomic.Int64).Load()
		return true
	})
	return c
}

func (a hookCounts) sub(b hookCounts) hookCounts {
	c := hookCounts{commands: a.commands - b.commands, pipelines: a.pipelines - b.pipelines, piped: a.piped - b.piped}
	for k, n := range a.named {
		if n -= b.named[k]; n != 0 {
			if c.named == nil {
				c.named = map[string]int64{}
			}
			c.named[k] = n
		}
	}
	return c
}

// serverStats is what INFO says about one server at one moment.
type serverStats struct {
	calls map[string]int64 // commandstats: calls per command, script-internal ones included
	total int64            // total_commands_processed
	cpu   time.Duration    // used_cpu_user + used_cpu_sys

	raftEntries, fsyncs int64 // an etcd member's: applied index, WAL fsyncs
}

// readStats reads INFO stats, cpu and commandstats in one command.
func readStats(ctx context.Context, admin *redis.Client) (serverStats, error) {
	info, err := admin.Info(ctx, "stats", "cpu", "commandstats").Result()
	if err != nil {
		return serverStats{}, fmt.Errorf("bench: INFO on %s: %w", admin.Options().Addr, err)
	}
	st := serverStats{calls: map[string]int64{}}
	var cpu float64
	for line := range strings.Lines(info) {
		k, v, ok := strings.Cut(strings.TrimSpace(line), ":")
		if !ok {
			continue
		}
		switch {
		case k == "total_commands_processed":
			st.total, _ = strconv.ParseInt(v, 10, 64)
		case k == "used_cpu_user" || k == "used_cpu_sys":
			f, _ := strconv.ParseFloat(v, 64)
			cpu += f
		case strings.HasPrefix(k, "cmdstat_"):
			for field := range strings.SplitSeq(v, ",") {
				if n, ok := strings.CutPrefix(field, "calls="); ok {
					st.calls[strings.TrimPrefix(k, "cmdstat_")], _ = strconv.ParseInt(n, 10, 64)
				}
			}
		}
	}
	st.cpu = time.Duration(cpu * float64(time.Second))
	return st, nil
}

// ownCommands are the benchmark's own: left out of every count.
var ownCommands = map[string]bool{"info": true, "config|resetstat": true, "flushall": true, "ping": true}

// pubsubCommands are requests a client sends outside go-redis hooks.
var pubsubCommands = map[string]bool{
	"subscribe": true, "unsubscribe": true, "ssubscribe": true,
	"sunsubscribe": true, "psubscribe": true, "punsubscribe": true,
}

// delta is what happened on a set of servers between two samples.
type delta struct {
	calls    map[string]int64 // by command, summed over the servers
	commands int64            // all commands, the benchmark's own left out
	pubsub   int64            // (un)subscribe requests
	cpu      time.Duration    // servers' CPU, summed

	raftEntries, fsyncs int64 // an etcd member's: entries applied, WAL fsyncs
}

// sampler reads the stats of a set of servers through admin clients that
// carry no counting hook, or those of an etcd member.
type sampler struct {
	admins []*redis.Client
	member *etcdMember // not closed by close
}

func newSampler(servers []*server) *sampler {
	s := &sampler{}
	for _, srv := range servers {
		s.admins = append(s.admins, redis.NewClient(&redis.Options{Addr: srv.addr, PoolSize: 1}))
	}
	return s
}

func (s *sampler) close() {
	for _, c := range s.admins {
		c.Close()
	}
}

func (s *sampler) sample(ctx context.Context) ([]serverStats, error) {
	out := make([]serverStats, len(s.admins))
	for i, c := range s.admins {
		st, err := readStats(ctx, c)
		if err != nil {
			return nil, err
		}
		out[i] = st
	}
	if s.member != nil {
		st, err := s.member.stats()
		if err != nil {
			return nil, err
		}
		out = append(out, st)
	}
	return out, nil
}

// reset empties every server and zeroes its statistics, so a run starts
// clean whatever ran before on the same servers.
func (s *sampler) reset(ctx context.Context) error {
	for _, c := range s.admins {
		if err := c.FlushAll(ctx).Err(); err != nil {
			return fmt.Errorf("bench: FLUSHALL: %w", err)
		}
		if err := c.ConfigResetStat(ctx).Err(); err != nil {
			return fmt.Errorf("bench: CONFIG RESETSTAT: %w", err)
		}
	}
	return nil
}

func diff(before, after []serverStats) delta {
	d := delta{calls: map[string]int64{}}
	for i := range after {
		for name, n := range after[i].calls {
			n -= before[i].calls[name]
			if n == 0 || ownCommands[name] {
				continue
			}
			d.calls[name] += n
			d.commands += n
			if pubsubCommands[name] {
				d.pubsub += n
			}
		}
		d.cpu += after[i].cpu - before[i].cpu
		d.raftEntries += after[i].raftEntries - before[i].raftEntries
		d.fsyncs += after[i].fsyncs - before[i].fsyncs
	}
	return d
}

// breakdown formats per-op command counts, largest first.
func breakdown(calls map[string]int64, ops float64) string {
	type kv struct {
		name string
		n    int64
	}
	var list []kv
	for k, v := range calls {
		list = append(list, kv{k, v})
	}
	sort.Slice(list, func(i, j int) bool {
		if list[i].n != list[j].n {
			return list[i].n > list[j].n
		}
		return list[i].name < list[j].name
	})
	var parts []string
	for _, e := range list {
		per := float64(e.n) / ops
		if per < 0.005 {
			continue
		}
		parts = append(parts, fmt.Sprintf("%s %.2f", e.name, per))
	}
	return strings.Join(parts, ", ")
}

// newClient returns a go-redis client for addr with the counting hook.
// poolSize 0 keeps go-redis's default. The client has
// ContextTimeoutEnabled, as padlock.New requires (and a service's client
// should have, whichever library it serves).
func newClient(addr string, h *roundTrips, poolSize int) *redis.Client {
	c := redis.NewClient(&redis.Options{Addr: addr, PoolSize: poolSize, ContextTimeoutEnabled: true})
	if h != nil {
		c.AddHook(h)
		clientHooks.Store(c, h)
	}
	return c
}

// clientHooks maps each client newClient made to its counting hook, so a
// library that brings its own client (rueidislock) counts into the same
// one.
var clientHooks sync.Map // *redis.Client -> *roundTrips

// hookOf returns c's counting hook, or a fresh one nobody reads.
func hookOf(c *redis.Client) *roundTrips {
	if h, ok := clientHooks.Load(c); ok {
		return h.(*roundTrips)
	}
	return &roundTrips{}
}
