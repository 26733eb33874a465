//go:build chaos

package chaos_test

import (
	"context"
	"strings"
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
			fenced: true,
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
				e.pause(id)
				if !e.stillHolding(id, record.Now()) {
					e.resume(id) // it had just let go; try again
					continue
				}
				e.hit()
				time.Sleep(d)
				e.resume(id)
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
func restartRedis(times int) func(*env) {
	return func(e *env) {
		for range times {
			for attempt := 0; attempt < 5; attempt++ {
				id := e.awaitHolder(0, 20*time.Second)
				if id == 0 {
					e.t.Fatalf("no lock holder")
				}
				at := record.Now()
				e.servers[0].Restart(e.t)
				if e.stillHolding(id, at) {
					e.hit()
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
func sentinelFailover(e *env) {
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
	s.Master().Kill(t)
	holding := id != 0 && e.stillHolding(id, record.Now())
	start := time.Now()
	s.WaitMaster(t, s.Replica().Addr())
	// Does the promoted replica know of the holder's lock? Not if it was
	// taken after the cut. (It may still have an older holder's, whose
	// release it never saw.)
	promoted, _ := replica.Get(ctx, lockKey).Result()
	lostByFailover := token != "" && promoted != token
	t.Logf("failover took %v; holder at the kill: worker %d (inside its section: %v); the new master lost its lock: %v",
		time.Since(start).Round(time.Millisecond), id, holding, lostByFailover)
	switch {
	case holding && lostByFailover:
		e.hit() // a holder whose lock the failover lost
	case e.sc.replicaAck > 0 && id == 0:
		e.hit() // nobody could take a lock the failover might lose
	}

	// The old master comes back empty, and the sentinels make it a replica
	// of the new one; with replica acks, locking resumes then.
	s.Master().Restart(t)
	awaitInfo(e, replica, "connected_slaves:1")
	sleepCtx(ctx, e.sc.ttl)
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
