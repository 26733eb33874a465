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
				took := record.Now()
				if !e.stillHolding(id, took) {
					e.resume(id) // it had just let go; try again
					continue
				}
				e.hitHolder(id, at, took)
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
					e.hitHolder(id, at, at)
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
