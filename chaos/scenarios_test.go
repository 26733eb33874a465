//go:build chaos

package chaos_test

import (
	"time"
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
