// Package chaos tries to break padlock's promises with real faults, and
// counts how often it succeeds.
//
// Its tests are built only with the chaos tag:
//
//	go test -tags chaos -count=1 -v ./chaos/
//
// TestChaos runs each scenario PADLOCK_CHAOS_RUNS times (default 1): three
// or more worker processes (internal/worker, built once per test run)
// contend for one lock on real redis-server processes and write to a
// fenced store (internal/fenced) with their fences, while the test pauses
// (SIGSTOP), kills (SIGKILL) or starves a lock holder, or kills, restarts or
// pauses a Redis server, or fails a Sentinel master over, or loses, delays
// or holds back the replies between a worker and Redis (internal/faultproxy
// sits between them), or closes a worker's Locker under its waiters. Every
// critical section, every store operation and, sampled every millisecond,
// whether each lock's Err() still said held is recorded (internal/record);
// the test then counts overlapping critical sections, locks that reported
// held at the same moment outside the windows RELIABILITY.md names, stale
// writes the store accepted, lock-lost signals and fence regressions,
// checks the store's
// history for linearizability with porcupine, and fails a scenario whose
// counts break what it claims. It prints the table RELIABILITY.md shows,
// and writes it as Markdown to the file PADLOCK_CHAOS_REPORT names. With
// PADLOCK_CHAOS_RECORDS naming a directory, each run's events, every
// worker's merged and sorted by time, are written there as JSON lines.
//
// TestIdle measures what a fault costs the others in time: four worker
// processes contend for one key with the default options (TTL 30s), in
// the default mode and Fair, while the test SIGKILLs waiters as they wait
// (a replacement started for each), and, in a run of its own, holders as
// they hold (TTL 3s there, PADLOCK_CHAOS_HOLDER_TTL to change it). From the
// workers' records it takes each fault's idle time: how long the key then
// sat free of any live holder while a live waiter waited. It fails when a
// killed waiter leaves the key idle for over 2s (its grant holds the key
// for a 500ms claim window, never a lease), or a killed holder for over 1s
// after its lease ends, and prints p50, p99 and max per kind, as Markdown to
// the file PADLOCK_CHAOS_IDLE_REPORT names. PADLOCK_CHAOS_RUNS scales it.
//
// TestLoadExampleApp runs the example app on loopback against a real
// redis-server, fires concurrent pays at a few hot orders for
// PADLOCK_LOAD_DURATION (default 3s), and fails on any double charge; it
// reports request counts and latency percentiles.
//
// Without redis-server the tests skip, or fail under
// PADLOCK_REQUIRE_REDIS=1.
package chaos
