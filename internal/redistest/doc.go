// Package redistest starts Redis servers for padlock's tests.
//
// Start runs a real redis-server on a free loopback port, with no
// persistence, and stops it when the test ends; StartN runs several
// independent ones at once (for Redlock). Each Server can be killed, paused
// (SIGSTOP), resumed and restarted on the same port, so tests can show how
// locks behave when Redis dies, hangs or comes back empty.
//
//	srv := redistest.Start(t)
//	rdb := srv.Client(t)
//	srv.Pause(t) // commands on rdb now time out
//	srv.Resume(t)
//
// When no redis-server binary is on PATH, Start and StartN fall back to an
// in-process miniredis and say so in the test log, so a fresh clone's tests
// still run. The fallback's clock is driven in real time, so keys with a TTL
// do expire; Pause and Resume skip the test there, since miniredis cannot
// hang. With PADLOCK_REQUIRE_REDIS=1 in the environment (as in CI) a missing
// binary fails the test instead of falling back.
//
// Clients made by Client (and the Options behind them) have short timeouts
// for tests: 1 s to dial, read and write, 2 s to get a pooled connection,
// one dial attempt and no command retries, so a dead or paused server shows
// on the first command, within about a second. They have
// ContextTimeoutEnabled, which padlock.New requires, so a context's
// deadline reaches the socket. Pass option functions to change them. On the fallback, Miniredis gives the miniredis itself.
//
// PADLOCK_REDIS_SERVER names the server binary to run instead of
// redis-server (a path, or a name on PATH), and PADLOCK_REDIS_CLI the
// client StartCluster forms a cluster with instead of redis-cli, so the
// suite runs against any server build:
//
//	PADLOCK_REDIS_SERVER=valkey-server PADLOCK_REDIS_CLI=valkey-cli go test ./...
//
// StartCluster and StartSentinel build a Redis Cluster and a Sentinel
// deployment from real servers; they skip the test without redis-server (or
// fail it under PADLOCK_REQUIRE_REDIS=1), as does Require.
//
// Everything a test starts here is torn down by t.Cleanup: servers are
// resumed if paused, killed and waited for, and clients are closed before
// the servers they talk to.
package redistest
