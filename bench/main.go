// Command bench compares padlock with go-redsync/redsync, bsm/redislock,
// redis/rueidis's rueidislock and the raw go-redis floor in one run, on
// redis-server processes it starts on loopback, and prints one Markdown
// table. See README.md.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"runtime"
	"runtime/pprof"
	"slices"
	"strings"
	"syscall"
	"time"
)

func main() {
	if len(os.Args) == 3 && os.Args[1] == probeFlag {
		os.Exit(runProbe(os.Args[2]))
	}
	if len(os.Args) == 4 && os.Args[1] == delayProxyFlag {
		os.Exit(runDelayProxy(os.Args[2], os.Args[3]))
	}
	if len(os.Args) == 5 && os.Args[1] == etcdMemberFlag {
		os.Exit(runEtcdMember(os.Args[2], os.Args[3], os.Args[4]))
	}
	os.Exit(run())
}

func run() int {
	var (
		cfg       config
		scenarios string
		jsonPath  string
		bin       string
		timeout   time.Duration
		quiet     bool
		rtts      string
		pingAddr  string
	)
	flag.StringVar(&scenarios, "scenarios", "network,uncontended,contended,hotkeys,renewal,redlock,multikey", "comma-separated scenarios to run (also: semaphore, rwlock)")
	flag.StringVar(&rtts, "rtt", "1ms,200us,0", "network, uncontended, contended and hotkeys: comma-separated round-trip times to measure every row at, through a delay proxy between the clients and Redis (0: loopback, no proxy)")
	flag.StringVar(&cfg.rttHotKeys, "rtt-hotkeys", "64x4", "hotkeys at a round-trip time above 0: comma-separated KEYSxWORKERS (loopback uses -hotkeys)")
	flag.StringVar(&pingAddr, "ping", "", "only measure PING round trips and a pushed message's delay to the Redis at this address (e.g. one behind tc netem), and exit")
	flag.DurationVar(&cfg.window, "duration", 2*time.Second, "measured window of each uncontended, contended and Redlock run")
	flag.DurationVar(&cfg.warmup, "warmup", 500*time.Millisecond, "unmeasured warm-up before each window (contended: at least 1s)")
	flag.IntVar(&cfg.parallel, "parallel", 8, "uncontended: also measure this many goroutines, each cycling its own key (0: one goroutine only)")
	flag.IntVar(&cfg.workers, "workers", 32, "contended: goroutines competing for one key")
	flag.IntVar(&cfg.procs, "procs", 4, "contended and hotkeys: Lockers (each with its own go-redis client), and the peers' clients, the workers are spread over in the fleet rows (1: none)")
	flag.DurationVar(&cfg.hold, "hold", time.Millisecond, "contended: time.Sleep inside the critical section")
	flag.DurationVar(&cfg.think, "think", 0, "contended: time.Sleep between Release and the worker's next Acquire (0: straight back)")
	flag.DurationVar(&cfg.wait, "wait", 5*time.Second, "contended: each library's wait budget for one Acquire")
	flag.DurationVar(&cfg.poll, "poll", 5*time.Millisecond, "contended: retry delay of the tuned peer rows")
	flag.StringVar(&cfg.hotKeys, "hotkeys", "16x8,64x4", "hotkeys: comma-separated KEYSxWORKERS: workers per key on that many keys, on one client per library and, in the fleet rows, on -procs")
	flag.IntVar(&cfg.locks, "locks", 10000, "renewal: locks held at once")
	flag.DurationVar(&cfg.renewTTL, "renew-ttl", 3*time.Second, "renewal: lease of the held locks (renewed every TTL/3)")
	flag.DurationVar(&cfg.renewWindow, "renew-duration", 5*time.Second, "renewal: measured window of each library")
	flag.BoolVar(&cfg.renewPeers, "renew-peers", true, "renewal: also hold the locks with redsync and redislock, one goroutine per lock")
	flag.IntVar(&cfg.renewScale, "renew-scale", 0, "renewal: also hold this many locks with padlock alone (e.g. 1000000; takes minutes; 0: no)")
	flag.DurationVar(&cfg.renewScaleTTL, "renew-scale-ttl", time.Minute, "renewal: lease of the -renew-scale locks")
	flag.IntVar(&cfg.renewCluster, "renew-cluster", 0, "renewal: also hold the -renew-scale locks (or -locks ones) with padlock on a Redis Cluster of this many masters (e.g. 3; 0: no)")
	flag.IntVar(&cfg.nodes, "nodes", 5, "redlock: independent redis-servers")
	flag.DurationVar(&cfg.redlockTTL, "redlock-ttl", 5*time.Second, "redlock: lock TTL, and padlock's WithMaxLease")
	flag.DurationVar(&cfg.redlockRTT, "redlock-rtt", time.Millisecond, "redlock: also measure with this round-trip time added to every node (a delay proxy in front of each; 0: loopback only)")
	flag.IntVar(&cfg.rounds, "rounds", 1, "uncontended, contended and Redlock: measure each row this many times, interleaved, and show the median")
	flag.DurationVar(&cfg.settle, "settle", 0, "before each row, wait up to this long for the machine to be nearly idle (for shared machines; 0: don't wait)")
	noPeers := flag.Bool("no-peers", false, "measure padlock (and the floor) only: no peers, no etcd")
	libs := flag.String("libs", "", "comma-separated libraries to measure: floor, padlock, redsync, redislock, rueidislock, etcd (default all)")
	cpuProfile := flag.String("cpuprofile", "", "write a CPU profile of this process (the clients' side) to this file")
	flag.StringVar(&cfg.memProfile, "memprofile", "", "renewal: write a heap profile of this process to this file once each row's locks are taken (the last row's stays)")
	flag.StringVar(&jsonPath, "json", "", "also write the results as JSON to this file")
	flag.StringVar(&bin, "redis-server", "redis-server", "redis-server binary")
	flag.DurationVar(&timeout, "timeout", 25*time.Minute, "give up after this long")
	flag.BoolVar(&quiet, "q", false, "no progress on stderr")
	flag.Parse()
	cfg.skipPeers = *noPeers

	want := map[string]bool{}
	for s := range strings.SplitSeq(scenarios, ",") {
		s = strings.TrimSpace(s)
		if !slices.Contains([]string{scNetwork, scUncontended, scContended, scHotKeys, scRenewal, scRedlock, scMultiKey, scSemaphore, scRWLock}, s) {
			fmt.Fprintf(os.Stderr, "bench: unknown scenario %q\n", s)
			return 2
		}
		want[s] = true
	}
	if cfg.workers < 1 || cfg.procs < 1 || cfg.locks < 1 || cfg.nodes < 1 || cfg.poll <= 0 || cfg.window <= 0 {
		fmt.Fprintln(os.Stderr, "bench: -workers, -procs, -locks, -nodes, -poll and -duration must be positive")
		return 2
	}
	var err error
	if cfg.rtts, err = parseRTTs(rtts); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	if *libs != "" {
		names := map[string]string{"floor": libFloor, "padlock": libPadlock, "redsync": libRedsync, "redislock": libRedislock, "rueidislock": libRueidislock, "etcd": libEtcd}
		cfg.libs = map[string]bool{}
		for s := range strings.SplitSeq(*libs, ",") {
			name, ok := names[strings.TrimSpace(s)]
			if !ok {
				fmt.Fprintf(os.Stderr, "bench: unknown library %q in -libs\n", s)
				return 2
			}
			cfg.libs[name] = true
		}
	}
	if *cpuProfile != "" {
		f, err := os.Create(*cpuProfile)
		if err != nil {
			fmt.Fprintln(os.Stderr, "bench:", err)
			return 1
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			fmt.Fprintln(os.Stderr, "bench:", err)
			return 1
		}
		defer pprof.StopCPUProfile()
	}
	cfg.progress = func(format string, args ...any) {
		if !quiet {
			fmt.Fprintf(os.Stderr, "bench: "+format+"\n", args...)
		}
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()

	if pingAddr != "" {
		rs, err := runPing(ctx, pingAddr)
		if err != nil {
			fmt.Fprintln(os.Stderr, "bench:", err)
			return 1
		}
		writeMarkdown(os.Stdout, rs, nil, nil)
		return 0
	}

	l, err := newLauncher(bin)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	cfg.launcher = l
	defer l.stopAll()

	started, loadBefore := time.Now(), loadAverage()
	var results []result
	err = func() error {
		if want[scRedlock] {
			if err := startRedlockServers(ctx, &cfg); err != nil {
				return err
			}
		}
		steps := []struct {
			name string
			run  func(context.Context, *config) ([]result, error)
		}{
			{scNetwork, runNetwork},
			{scUncontended, runUncontended},
			{scContended, runContended},
			{scHotKeys, runHotKeys},
			{scRenewal, runRenewal},
			{scRedlock, runRedlock},
			{scMultiKey, runMultiKey},
			{scSemaphore + "," + scRWLock, runHolds},
		}
		for _, s := range steps {
			if !want[s.name] && !(s.name == scSemaphore+","+scRWLock && (want[scSemaphore] || want[scRWLock])) {
				continue
			}
			rs, err := s.run(ctx, &cfg)
			results = append(results, rs...)
			if err != nil {
				return err
			}
		}
		return nil
	}()
	annotate(results)
	targets := append(checkTargets(results, cfg.workers), holdTargets(results)...)
	settings := describe(&cfg, time.Since(started), loadBefore, loadAverage())
	writeMarkdown(os.Stdout, results, targets, settings)
	if jsonPath != "" {
		if jerr := writeJSON(jsonPath, results, targets, settings); jerr != nil {
			fmt.Fprintln(os.Stderr, jerr)
			return 1
		}
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		return 1
	}
	return 0
}

// describe says how the run was set up, for the reader of the table.
func describe(cfg *config, took time.Duration, loadBefore, loadAfter string) []string {
	load := ""
	if loadBefore != "" {
		load = fmt.Sprintf(" Load average (1 min) %s at the start, %s at the end.", loadBefore, loadAfter)
	}
	return []string{
		fmt.Sprintf("Run: %s/%s, %d CPUs, %s, redis-server on 127.0.0.1 (--save '' --appendonly no), a fresh server per row "+
			"(Redlock: %d servers, FLUSHALL + CONFIG RESETSTAT between rows); %v windows after %v warm-up, %d round(s); total %v.%s",
			runtime.GOOS, runtime.GOARCH, runtime.NumCPU(), runtime.Version(), cfg.nodes, cfg.window, cfg.warmup, cfg.rounds, took.Round(time.Second), load),
		fmt.Sprintf("Contended: %d goroutines on one key, each holding it %v (time.Sleep) per acquisition; wait = from calling Acquire "+
			"to holding the lock, across give-ups; wait budget %v for every library. Peers use one go-redis client, or as many "+
			"as their setup says (the fleet rows); padlock rows say how many Lockers (each with its own client) share the workers. "+
			"go-redis PoolSize = workers+2.",
			cfg.workers, cfg.hold, cfg.wait),
		fmt.Sprintf("Hotkeys: KEYSxWORKERS %s: that many workers per key, each holding it %v per acquisition, every library on one "+
			"client (one Locker) shared by all its workers, or in the fleet rows (\"%d Lockers\", \"%d clients\") on that many, "+
			"worker w on client w mod %d; same wait budget. Limit: keys / mean held time. CPU ceiling: CPUs / "+
			"(client + Redis CPU per acquisition).", cfg.hotKeys, cfg.hold, cfg.procs, cfg.procs, cfg.procs),
		fmt.Sprintf("Renewal: %d locks on distinct keys, TTL %v. padlock: one Locker, whose watchdog renews them; "+
			"peers: one goroutine per lock, started when it was taken, calling redsync Mutex.ExtendContext or redislock "+
			"Lock.Refresh every TTL/3. One go-redis client, PoolSize 64. CPU: getrusage of this process and INFO used_cpu of the server, "+
			"per second of the window.", cfg.locks, cfg.renewTTL),
		fmt.Sprintf("Round-trip time (rows named RTT 1ms, RTT 0.2ms, ...; -rtt %s): every client of the row, whichever library, reaches Redis "+
			"through a delay proxy, a process of its own on 127.0.0.1 (one epoll_pwait2 event loop on Linux) that writes each chunk it reads, "+
			"either way, half the RTT after it read it: a reply comes a round trip after its request, a pushed message (pub/sub, RESP3 push, "+
			"invalidation) half a round trip after Redis sent it. The network rows measure what it gives: PING one at a time from go-redis "+
			"and rueidis, and a message published on an undelayed connection until it reaches a subscriber behind the proxy. The proxy's "+
			"CPU is not in the client's figure (the notes give it per op); the servers still share this machine's CPUs. Rows without RTT are loopback.",
			rttList(cfg.rtts)),
		fmt.Sprintf("Redlock: one goroutine, Acquire+Release on one key; %d independent servers on this machine; clients with "+
			"ContextTimeoutEnabled. RTT rows: a delay proxy in front of each node. The fleet rows (\"one key, ... processes\"): "+
			"the contended load on the same nodes, over %d processes, each with clients of its own; a Redlock Locker makes no "+
			"grants at release, so a release's notice wakes one waiter per Locker to try.", cfg.nodes, cfg.procs),
		fmt.Sprintf("etcd (reference rows, contended): concurrency.Mutex (%s), a fresh Mutex per acquisition, on one etcd member "+
			"(server/v3/embed) started for each row in a process of its own on 127.0.0.1, data in a temp dir, every setting embed's default: "+
			"the WAL is fsynced on every write. %d clients (one gRPC connection each) and the workers spread over them as in the fleet rows; "+
			"one session (lease, default 60s TTL) per client, whose workers take turns for it, or one per worker. Not a peer: in no "+
			"best-peer ratio. Round trips: gRPC requests the clients sent (unary calls, and messages on streams: watch create and "+
			"cancel, lease keep-alives), counted by client interceptors.", etcdVersions(), cfg.procs),
		"Round trips/op: commands and pipelines the clients sent (a go-redis hook), plus pub/sub (UN)SUBSCRIBE requests " +
			"(from commandstats, as go-redis sends them outside hooks). Server cmds/op: INFO commandstats calls, commands " +
			"run inside Lua scripts included, the benchmark's own INFO/FLUSHALL left out.",
	}
}

func writeJSON(path string, rs []result, ts []target, settings []string) error {
	b, err := json.MarshalIndent(struct {
		Results  []result `json:"results"`
		Targets  []target `json:"targets"`
		Settings []string `json:"settings"`
	}{rs, ts, settings}, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(b, '\n'), 0o644)
}

func rttList(rtts []time.Duration) string {
	parts := make([]string, len(rtts))
	for i, d := range rtts {
		parts[i] = d.String()
	}
	return strings.Join(parts, ",")
}
