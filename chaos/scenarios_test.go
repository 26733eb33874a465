//go:build chaos

package chaos_test

import (
	"context"
	"strings"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/padlockgo/padlock/chaos/internal/record"
)

// scenarios returns every scenario, in the order of the table.
func scenarios() []scenario {
	const ttl = time.Second
	return []scenario{
		{
			name: "baseline", about: "single node, no fault",
			claim: "exclusion; fences", mode: "single", workers: 3, ttl: ttl, hold: 100 * time.Millisecond,
			settle: 3 * time.Second, exclusion: true, fenced: true,
		},
		{
			name: "paused-holder", about: "holder SIGSTOPped for 2.5×TTL, then resumed",
			claim: "overlap possible; lost fires on resume; fence rejects stale writes",
			mode:  "single", workers: 3, ttl: ttl, hold: 300 * time.Millisecond,
			fault: pauseHolder(2, 5*ttl/2), settle: ttl,
			fenced: true, wantLost: true,
		},
		{
			name: "paused-holder-unchecked", about: "as paused-holder, but the holder writes without checking its lock's context",
			claim: "overlap possible; fence rejects the stale writes",
			mode:  "single", workers: 3, ttl: ttl, hold: 300 * time.Millisecond, unchecked: true,
			fault: pauseHolder(2, 5*ttl/2), settle: ttl,
			fenced: true, wantLost: true, wantRejected: true,
		},
		{
			name: "killed-holder", about: "holder SIGKILLed, a new worker started",
			claim: "exclusion; fences", mode: "single", workers: 3, ttl: ttl, hold: 300 * time.Millisecond,
			fault: killHolder(2), settle: 2 * ttl,
			exclusion: true, fenced: true,
		},
		{
			name: "handoff-paused-holder", about: "3 processes × 4 goroutines sharing a Locker (hand-offs within each); the holder's process SIGSTOPped for 2.5×TTL",
			claim: "overlap possible; lost fires on resume; fence rejects stale writes", mode: "single",
			workers: 3, goroutines: 4, ttl: ttl, hold: 100 * time.Millisecond,
			fault: pauseHolder(2, 5*ttl/2), settle: ttl,
			fenced: true, wantLost: true,
		},
		{
			name: "handoff-killed-holder", about: "3 processes × 4 goroutines sharing a Locker; the holder's process SIGKILLed, a new one started",
			claim: "exclusion; fences", mode: "single",
			workers: 3, goroutines: 4, ttl: ttl, hold: 100 * time.Millisecond,
			fault: killHolder(2), settle: 2 * ttl,
			exclusion: true, fenced: true,
		},
		{
			name: "redis-restart", about: "single redis-server killed and restarted empty under a holder",
			claim: "overlap possible (the lock is forgotten); lost fires; fences keep rising",
			mode:  "single", workers: 3, ttl: ttl, hold: 500 * time.Millisecond,
			fault: restartRedis(2), settle: 2 * ttl,
			fenced: true, wantLost: true,
		},
		{
			name: "watchdog-starved", about: "every worker at GOMAXPROCS=1 with 4 CPU-burning goroutines",
			claim: "exclusion; fences", mode: "single", workers: 3, ttl: ttl, hold: 300 * time.Millisecond,
			spin: 4, settle: 8 * time.Second,
			exclusion: true, fenced: true,
		},
		{
			name: "watchdog-starved-severe", about: "TTL 300ms, every worker at GOMAXPROCS=1 with 16 CPU-burning goroutines",
			claim: "overlap possible (a starved process learns of the loss late); fences",
			mode:  "single", workers: 3, ttl: 300 * time.Millisecond, hold: 200 * time.Millisecond,
			spin: 16, settle: 8 * time.Second,
			fenced: true, starved: true,
		},
		{
			name: "redlock-baseline", about: "Redlock on 3 nodes, no fault",
			claim: "exclusion", mode: "redlock", workers: 3, ttl: ttl, hold: 100 * time.Millisecond,
			settle: 3 * time.Second, exclusion: true,
		},
		{
			name: "redlock-node-restart", about: "holder on 2 of 3 nodes (one was down); both others restarted empty",
			// The hold spans several renewals after the restarts: the first
			// on each restarted node may meet a connection the restart
			// broke (the workers do not retry commands), and only a
			// renewal that gets an answer can find the lock gone.
			claim: "exclusion (delayed restart); lost fires", mode: "redlock", workers: 3, ttl: ttl, hold: 1500 * time.Millisecond,
			fault: redlockRestart, settle: ttl,
			exclusion: true, wantLost: true,
		},
		{
			name: "redlock-node-paused", about: "one of 3 nodes SIGSTOPped for 2.5×TTL under a holder",
			claim: "exclusion", mode: "redlock", workers: 3, ttl: ttl, hold: 300 * time.Millisecond,
			fault: redlockPause(2, 5*ttl/2), settle: ttl,
			exclusion: true,
		},
		{
			name: "sentinel-failover", about: "replication cut, master killed under a holder, replica promoted",
			claim: "overlap possible (async replication); fences keep rising",
			mode:  "sentinel", workers: 3, ttl: 5 * time.Second, hold: 2500 * time.Millisecond,
			fault: sentinelFailover, settle: 2 * time.Second,
			fenced: true,
		},
		{
			name: "sentinel-failover-replica-ack", about: "as sentinel-failover, with WithReplicaAck(1, 200ms)",
			claim: "exclusion; fences", mode: "sentinel", workers: 3, ttl: 5 * time.Second, hold: 2500 * time.Millisecond,
			replicaAck: 1,
			fault:      sentinelFailover, settle: 2 * time.Second,
			exclusion: true, fenced: true,
		},
		{
			name: "handoff-partitioned-holder", about: "hold 3s; 3 processes × 2 goroutines; the holder's process cut off from Redis (a proxy holds all its traffic back) for 2.5×TTL",
			claim: "lost fires before the lease in Redis ends (no window); fences", mode: "single",
			workers: 3, goroutines: 2, ttl: ttl, hold: 3 * time.Second, proxy: true, wait: 10 * time.Second,
			fault: partitionHolder(2, 5*ttl/2), settle: ttl,
			fenced: true, wantLost: true,
		},
		{
			name: "handoff-redis-restart", about: "TTL 3s; 3 processes × 4 goroutines; the single redis-server restarted empty under a holder, and a new process started at once",
			claim: "held at once only in the restart window, never by a lock handed on after it; fences keep rising", mode: "single",
			// TTL 3s: the hand-off goes on while more than half the lease
			// is trusted, 1.5s after the last renewal here, long enough
			// for the new process to take the key from the empty server.
			workers: 3, goroutines: 4, ttl: 3 * time.Second, hold: 100 * time.Millisecond,
			fault: restartRedisJoin(2, true), settle: 2 * ttl,
			// Not wantLost: a holder that releases before its first renewal
			// after the restart is told ErrUnavailable (its connection
			// broke), not that the lock was lost.
			fenced: true,
			awaits: "a hand-off only of a lock Redis still holds",
		},
		{
			name: "handoff-sentinel-failover", about: "TTL 8s; 3 processes × 4 goroutines; as sentinel-failover, and a new process started once the replica is promoted",
			claim: "held at once only in the failover window, never by a lock handed on after it; fences keep rising", mode: "sentinel",
			// TTL 8s: the Locker hands on while more than half the lease
			// is trusted, up to 4s after the last renewal the dead master
			// answered, past the failover (about 2s).
			workers: 3, goroutines: 4, ttl: 8 * time.Second, hold: 500 * time.Millisecond,
			fault: handoffSentinelFailover, settle: 2 * time.Second,
			fenced: true,
			awaits: "a hand-off only of a lock Redis still holds",
		},
		{
			name: "extend-race", about: "TTL 100ms, hold 400ms; 3 processes × 2 goroutines; the holder calls Extend twice at once (30ms or 2s each) every 0–50ms, racing the watchdog",
			claim: "no lock reports held past its lease in Redis (no window); fences", mode: "single",
			workers: 3, goroutines: 2, ttl: 100 * time.Millisecond, hold: 400 * time.Millisecond,
			extends: "30ms,2s", wait: 3 * time.Second, settle: 8 * time.Second,
			fenced: true,
			awaits: "a trusted lease no later than any in-flight Extend's",
		},
		{
			name: "lost-replies", about: "TTL 200ms; 3 processes × 2 goroutines Extending as in extend-race; a reply to the holder's process lost (after Redis ran the command) every 50ms",
			claim: "no lock reports held past its lease in Redis (no window); fences", mode: "single",
			workers: 3, goroutines: 2, ttl: 200 * time.Millisecond, hold: 100 * time.Millisecond, proxy: true,
			extends: "30ms,200ms,1s", wait: 3 * time.Second,
			fault: dropReplies(8*time.Second, 50*time.Millisecond), settle: time.Second,
			fenced: true,
			awaits: "a trusted lease no later than any possibly-executed Extend's",
		},
		{
			name: "fair-lost-replies", about: "Fair, go-redis's default 3 retries; 3 processes × 4 goroutines; the reply to a command on the fair queue lost (after Redis ran it) every 100ms",
			claim: "exclusion of held locks; every waiter served within its 10s Wait; fences", mode: "single",
			workers: 3, goroutines: 4, ttl: ttl, hold: 50 * time.Millisecond, proxy: true, fair: true,
			wait: 10 * time.Second, redisRetries: 3,
			// Only commands on the fair queue lose replies: fair attempts,
			// the first of which puts the waiter in the queue.
			fault: dropRepliesTo(8*time.Second, 100*time.Millisecond, []byte(lockKey+":queue")), settle: 2 * time.Second,
			fenced: true, noRunOut: true,
			awaits: "fair queue entries idempotent per token",
		},
		{
			name: "close-with-waiters", about: "3 processes × 4 goroutines; the holder's process closes its Locker while its other goroutines wait",
			claim: "waiters return ErrClosed within 1s; exclusion of held locks; fences", mode: "single",
			workers: 3, goroutines: 4, ttl: ttl, hold: 300 * time.Millisecond,
			fault: closeHolderProcess(2), settle: ttl,
			fenced: true, closeWithin: time.Second,
			awaits: "Close waking its waiters",
		},
		{
			name: "cluster-slow-master", about: "Cluster of 3 masters, one key on each; 3 processes × 3 goroutines, one per key, hold 2×TTL; one master SIGSTOPped for 2.5×TTL, twice",
			claim: "locks on the other masters are not lost; exclusion of held locks; fences", mode: "cluster",
			// Holds of 2×TTL: the locks on healthy masters renew while the
			// slow one hangs.
			workers: 3, goroutines: 3, ttl: ttl, hold: 2 * ttl, wait: 10 * time.Second,
			fault: slowClusterMaster(2, 5*ttl/2), settle: ttl,
			fenced: true, slowMaster: true,
			awaits: "per-node Cluster renewal",
		},
		{
			name: "multi-paused-holder", about: "AcquireAll of 2 keys, each worker listing them in its own order; the holder SIGSTOPped for 2.5×TTL",
			claim: "overlap possible; lost fires on resume; fence rejects stale writes on every key", mode: "single",
			primitive: "multi", workers: 3, ttl: ttl, hold: 300 * time.Millisecond,
			fault: pauseHolder(2, 5*ttl/2), settle: ttl,
			fenced: true, wantLost: true,
		},
		{
			name: "multi-redis-restart", about: "AcquireAll of 2 keys; the single redis-server restarted empty under a holder",
			claim: "overlap possible (the locks are forgotten); lost fires; fences keep rising", mode: "single",
			primitive: "multi", workers: 3, ttl: ttl, hold: 500 * time.Millisecond,
			fault: restartRedis(2), settle: 2 * ttl,
			fenced: true, wantLost: true,
		},
		{
			name: "multi-cluster-paused-holder", about: "Cluster of 3 masters; AcquireAll of one key on each (three slots, taken in order with rollback); the holder SIGSTOPped for 2.5×TTL",
			claim: "overlap possible; lost fires on resume; fence rejects stale writes on every key", mode: "cluster",
			primitive: "multi", workers: 3, ttl: ttl, hold: 300 * time.Millisecond, wait: 10 * time.Second,
			fault: pauseHolder(2, 5*ttl/2), settle: ttl,
			fenced: true, wantLost: true,
		},
		{
			name: "election-paused-leader", about: "leader election; the leader SIGSTOPped for 2.5×TTL",
			claim: "overlap possible; the deposed leader's lost fires on resume; fence rejects its stale writes", mode: "single",
			primitive: "election", workers: 3, ttl: ttl, hold: 300 * time.Millisecond,
			fault: pauseHolder(2, 5*ttl/2), settle: ttl,
			fenced: true, wantLost: true,
		},
		{
			name: "election-redis-restart", about: "leader election; the single redis-server restarted empty under a leader",
			claim: "overlap possible (the term is forgotten); lost fires; fences keep rising", mode: "single",
			primitive: "election", workers: 3, ttl: ttl, hold: 500 * time.Millisecond,
			fault: restartRedis(2), settle: 2 * ttl,
			fenced: true, wantLost: true,
		},
	}
}

// pauseHolder pauses the lock holder inside its critical section for d,
// times times.
func pauseHolder(times int, d time.Duration) func(*env) {
	return func(e *env) {
		for range times {
			for attempt := 0; attempt < 5; attempt++ {
				id := e.awaitHolder(0, 20*time.Second)
				if id == 0 {
					e.t.Fatalf("no lock holder to pause")
				}
				at := record.Now()
				e.pause(id)
				if !e.stillHolding(id, record.Now()) {
					e.resume(id) // it had just let go; try again
					continue
				}
				e.hitHolder(id, at)
				time.Sleep(d)
				e.resume(id)
				e.window("frozen process", at, record.Now()+int64(wakeSlack), id%record.GoroutineStride)
				break
			}
			time.Sleep(e.sc.ttl)
		}
	}
}

// killHolder kills the lock holder inside its critical section and starts
// a worker in its place, times times.
func killHolder(times int) func(*env) {
	return func(e *env) {
		for range times {
			for attempt := 0; attempt < 5; attempt++ {
				id := e.awaitHolder(0, 20*time.Second)
				if id == 0 {
					e.t.Fatalf("no lock holder to kill")
				}
				e.kill(id)
				e.start()
				if e.stillHolding(id, record.Now()) {
					e.hit()
					break
				}
			}
			time.Sleep(2 * e.sc.ttl)
		}
	}
}

// restartRedis kills the single Redis server under a holder and starts
// it again, empty, times times.
func restartRedis(times int) func(*env) { return restartRedisJoin(times, false) }

// restartRedisJoin is restartRedis; with join, a new worker process starts
// right after each restart, as another instance of a service arrives: its
// first Acquire finds the key free at once, while the old holder's Locker
// may still be handing the lock on.
func restartRedisJoin(times int, join bool) func(*env) {
	return func(e *env) {
		for range times {
			for attempt := 0; attempt < 5; attempt++ {
				id := e.awaitHolder(0, 20*time.Second)
				if id == 0 {
					e.t.Fatalf("no lock holder")
				}
				at := record.Now()
				e.servers[0].Restart(e.t)
				// A holder learns of the loss from its first renewal that
				// gets an answer, at the latest when its trusted lease ends.
				e.window("restart without persistence", at, record.Now()+int64(e.sc.ttl+wakeSlack), 0)
				if join {
					e.start()
				}
				if e.stillHolding(id, at) {
					e.hitHolder(id, at)
					break
				}
			}
			time.Sleep(2 * e.sc.ttl)
		}
	}
}

// redlockRestart is the restart Redlock's delayed-restart rule is for.
// With node 3 down, a holder takes the lock on nodes 1 and 2 only; node 3
// comes back empty, and node 1 restarts empty: only node 2 still knows
// the holder, and nodes 1 and 3 would make a majority for anyone else if
// they voted at once.
func redlockRestart(e *env) {
	e.servers[2].Kill(e.t)
	since := record.Now()
	id := e.awaitHolder(since, 20*time.Second)
	if id == 0 {
		e.t.Fatalf("no lock holder on two nodes")
	}
	e.servers[2].Restart(e.t)
	e.servers[0].Restart(e.t)
	if e.stillHolding(id, record.Now()) {
		e.hit()
	}
	// The restarted nodes vote again after the max lease and a second or
	// two; until then nobody can take the lock.
	time.Sleep(e.sc.ttl + 3*time.Second)
}

// redlockPause pauses one of three Redlock nodes under a holder for d,
// times times.
func redlockPause(times int, d time.Duration) func(*env) {
	return func(e *env) {
		for i := range times {
			id := e.awaitHolder(0, 20*time.Second)
			if id == 0 {
				e.t.Fatalf("no lock holder")
			}
			node := e.servers[1+i%2]
			node.Pause(e.t)
			if e.stillHolding(id, record.Now()) {
				e.hit()
			}
			time.Sleep(d)
			node.Resume(e.t)
			time.Sleep(e.sc.ttl)
		}
	}
}

// sentinelFailover cuts replication (the window every asynchronous
// replica has, held open), lets a holder take the lock on the master
// alone if it can, kills the master under it, waits for the sentinels to
// promote the replica, and brings the old master back as a replica.
func sentinelFailover(e *env) { sentinelFailoverJoin(e, false) }

// handoffSentinelFailover is sentinelFailover with a new worker process
// started as soon as the replica is promoted: its first Acquire finds the
// key free on the new master at once, while the old holder's Locker may
// still be handing the lock on.
func handoffSentinelFailover(e *env) { sentinelFailoverJoin(e, true) }

func sentinelFailoverJoin(e *env, join bool) {
	t, s := e.t, e.sentinel
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	// The replica stays the master's replica, the one a failover
	// promotes, but receives nothing more: its link is killed, and a wrong
	// masterauth makes every reconnection fail at AUTH.
	replica := s.Replica().Client(t)
	if err := replica.ConfigSet(ctx, "masterauth", "not-the-password").Err(); err != nil {
		t.Fatalf("replica: CONFIG SET masterauth: %v", err)
	}
	if err := replica.Do(ctx, "CLIENT", "KILL", "TYPE", "master").Err(); err != nil {
		t.Fatalf("replica: CLIENT KILL TYPE master: %v", err)
	}
	master := s.Master().Client(t)
	awaitInfo(e, master, "connected_slaves:0")
	cut := record.Now()

	// Without replica acks a worker takes the lock on the master alone;
	// with them, nobody can. Not long: the sentinels refuse to promote a
	// replica whose link has been down for ten times down-after (5s)
	// more than the master.
	id := e.awaitHolder(cut, e.sc.hold+time.Second)
	token, _ := master.Get(ctx, lockKey).Result() // the holder's, as the master has it
	killed := record.Now()
	s.Master().Kill(t)
	if e.sc.replicaAck == 0 {
		// A lock the failover lost reports held until its holder's
		// renewal reaches the new master, at the latest until its trusted
		// lease ends.
		e.window("asynchronous failover", killed, record.Now()+int64(e.sc.ttl+wakeSlack), 0)
	}
	holding := id != 0 && e.stillHolding(id, record.Now())
	start := time.Now()
	s.WaitMaster(t, s.Replica().Addr())
	// Does the promoted replica know of the holder's lock? Not if it was
	// taken after the cut. (It may still have an older holder's, whose
	// release it never saw.)
	promoted, _ := replica.Get(ctx, lockKey).Result()
	// Compare grants, not values: a value carries the number of the last
	// lease change, which the cut replica may not have seen.
	grant := func(v string) string { tok, _, _ := strings.Cut(v, "|"); return tok }
	lostByFailover := token != "" && grant(promoted) != grant(token)
	t.Logf("failover took %v (master killed at %d, replica promoted at %d); holder at the kill: worker %d (inside its section: %v); the new master lost its lock: %v",
		time.Since(start).Round(time.Millisecond), killed, record.Now(), id, holding, lostByFailover)
	switch {
	case holding && lostByFailover:
		e.hit() // a holder whose lock the failover lost
	case e.sc.replicaAck > 0 && id == 0:
		e.hit() // nobody could take a lock the failover might lose
	}
	if join {
		// The promoted replica still has the lock of the holder before
		// the cut, whose release it never saw: with a lagging rather than
		// a cut link it would have seen that release and not the next
		// grant. Drop it, so the key is free on the new master at once.
		if promoted != "" && promoted != token {
			if err := replica.Del(ctx, lockKey).Err(); err != nil {
				t.Fatalf("new master: DEL %s: %v", lockKey, err)
			}
		}
		e.start()
	}

	// The old master comes back empty, and the sentinels make it a replica
	// of the new one; with replica acks, locking resumes then.
	// The cut is over: the promoted replica gets the right masterauth
	// (none) back, so it can replicate again should a later failover make
	// it a replica.
	if err := replica.ConfigSet(ctx, "masterauth", "").Err(); err != nil {
		t.Fatalf("new master: CONFIG SET masterauth: %v", err)
	}
	// Every sentinel settles on the new master before the old one comes
	// back empty: one that still called the new master down would promote
	// the empty server and lose every lock a second time.
	s.WaitSettled(t, s.Replica().Addr())
	s.Master().Restart(t)
	restarted := record.Now()
	awaitReplicaOnline(e, replica, master)
	sleepCtx(ctx, e.sc.ttl)
	if now := s.MasterAddr(t); now != s.Replica().Addr() {
		// Settled is not a promise: a sentinel can still fail over again
		// on a loaded machine. Locks held then were lost like the first
		// time, and the same window covers them.
		t.Logf("a second failover made %s the master", now)
		e.window("second failover", restarted, record.Now()+int64(e.sc.ttl+wakeSlack), 0)
	}
}

// awaitReplicaOnline waits until one of the two servers is a master with
// its replica connected, whichever the sentinels made master.
func awaitReplicaOnline(e *env, a, b *redis.Client) {
	e.t.Helper()
	ctx := context.Background()
	var last string
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		for _, c := range []*redis.Client{a, b} {
			info, err := c.Info(ctx, "replication").Result()
			if err != nil {
				last = err.Error()
				continue
			}
			if strings.Contains(info, "role:master") && strings.Contains(info, "connected_slaves:1") {
				return
			}
			last = info
		}
	}
	e.t.Fatalf("neither server became a master with its replica connected; last INFO replication: %s", last)
}

// wakeSlack is how long a process resumed from SIGSTOP, or a holder whose
// lease has just ended, may take on this loaded machine to run its
// watchdog and mark the lock lost.
const wakeSlack = 300 * time.Millisecond

// partitionHolder cuts the holder's process off from Redis (its proxy
// holds all traffic back) for d, times times. No window: the holder's
// trusted lease ends before the lease in Redis, so its lock reports lost
// before anyone else can take the key.
func partitionHolder(times int, d time.Duration) func(*env) {
	return func(e *env) {
		for range times {
			for attempt := 0; attempt < 5; attempt++ {
				// A fresh holder, with its whole hold ahead: one that
				// releases while cut off is told ErrUnavailable, not that
				// its lock was lost.
				id := e.awaitHolder(record.Now(), 20*time.Second)
				if id == 0 {
					e.t.Fatalf("no lock holder to cut off")
				}
				p := e.proxy(id)
				p.Partition(true)
				if !e.stillHolding(id, record.Now()) {
					p.Partition(false)
					continue
				}
				e.hit()
				time.Sleep(d)
				p.Partition(false)
				break
			}
			time.Sleep(e.sc.ttl)
		}
	}
}

// dropReplies loses one reply every interval for d: the next command of
// the holder's process (any process when nobody holds) runs in Redis and
// its answer is lost, its connection reset.
func dropReplies(d, every time.Duration) func(*env) { return dropRepliesTo(d, every, nil) }

// dropRepliesTo is dropReplies for the commands whose bytes contain match
// only, and, with a match, in every process in turn (its waiters' commands
// as much as its holder's).
func dropRepliesTo(d, every time.Duration, match []byte) func(*env) {
	return func(e *env) {
		deadline := time.Now().Add(d)
		for turn := 0; time.Now().Before(deadline); turn++ {
			var id int
			if match == nil {
				for _, h := range holding(e.events(), 0) {
					if e.alive(h) {
						id = h
						break
					}
				}
			}
			if id != 0 {
				e.hit()
			} else if match != nil {
				procs := e.all()
				id = procs[turn%len(procs)].id
				e.hit()
			} else {
				procs := e.all()
				id = procs[int(record.Now()/1000)%len(procs)].id
			}
			e.proxy(id).DropRepliesTo(1, match)
			time.Sleep(every)
		}
		dropped := 0
		for _, p := range e.all() {
			dropped += e.proxy(p.id).Dropped()
		}
		e.t.Logf("%d replies dropped", dropped)
	}
}

// closeHolderProcess makes the holder's process close its Locker
// (SIGUSR1) while its other goroutines wait for the key, waits for it to
// exit, and starts a new one, times times.
func closeHolderProcess(times int) func(*env) {
	return func(e *env) {
		for range times {
			id := e.awaitHolder(0, 20*time.Second)
			if id == 0 {
				e.t.Fatalf("no lock holder")
			}
			p := e.proc(id)
			if err := p.cmd.Process.Signal(syscall.SIGUSR1); err != nil {
				e.t.Fatalf("SIGUSR1 worker %d: %v", p.id, err)
			}
			if e.stillHolding(id, record.Now()) {
				e.hit()
			}
			select {
			case <-p.exited:
			case <-time.After(5*e.sc.ttl + 10*time.Second):
				e.t.Errorf("worker %d still running %v after closing its Locker", p.id, 5*e.sc.ttl+10*time.Second)
			}
			e.start()
			time.Sleep(e.sc.ttl)
		}
	}
}

// slowClusterMaster pauses (SIGSTOP) the last master of the cluster, the
// one the last key lives on, for d while locks are held, times times: the
// locks on the other masters must not notice.
func slowClusterMaster(times int, d time.Duration) func(*env) {
	return func(e *env) {
		node := e.servers[len(e.servers)-1]
		for range times {
			id := e.awaitHolder(0, 20*time.Second)
			if id == 0 {
				e.t.Fatalf("no lock holder")
			}
			node.Pause(e.t)
			if e.stillHolding(id, record.Now()) {
				e.hit()
			}
			time.Sleep(d)
			node.Resume(e.t)
			time.Sleep(e.sc.ttl)
		}
	}
}

// lockKey is the Redis key of the workers' lock ("chaos", default prefix).
const lockKey = "padlock:{chaos}"

// awaitInfo waits up to 30s until c's INFO replication contains want.
func awaitInfo(e *env, c *redis.Client, want string) {
	e.t.Helper()
	ctx := context.Background()
	var last string
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		info, err := c.Info(ctx, "replication").Result()
		if err == nil && strings.Contains(info, want) {
			return
		}
		last = info
		if err != nil {
			last = err.Error()
		}
	}
	e.t.Fatalf("INFO replication never showed %q; last: %s", want, last)
}
