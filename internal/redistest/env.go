package redistest

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"testing"
)

// requireEnv names the environment variable that forbids the miniredis
// fallback. CI sets it so a missing redis-server is a failure, not a quiet
// downgrade to a fake that cannot hang or crash.
const requireEnv = "PADLOCK_REQUIRE_REDIS"

// serverEnv and cliEnv name the environment variables that choose the
// server binary and its command-line client: a path, or a name looked up
// on PATH. They run the suite against another server build, Valkey's say
// (PADLOCK_REDIS_SERVER=valkey-server PADLOCK_REDIS_CLI=valkey-cli).
// Default: redis-server and redis-cli.
const (
	serverEnv = "PADLOCK_REDIS_SERVER"
	cliEnv    = "PADLOCK_REDIS_CLI"
)

// installHint ends every message about a missing redis-server.
const installHint = "install it with: apt-get install -y redis-server, or name a server binary in " + serverEnv

// redisRequired reports whether the environment forbids the fallback.
// Any value strconv.ParseBool reads as true counts, "1" included.
func redisRequired() bool {
	v, _ := strconv.ParseBool(os.Getenv(requireEnv))
	return v
}

// findRedisServer returns the path of the server binary (PADLOCK_REDIS_SERVER,
// default redis-server), or an error saying why a real server cannot be
// run. It is looked up on every call, not cached, so t.Setenv("PATH", ...)
// in a test takes effect.
func findRedisServer() (string, error) {
	if !canRunRedis {
		return "", fmt.Errorf("redistest: real redis-server is not supported on %s", runtime.GOOS)
	}
	name, from := binary(serverEnv, "redis-server")
	path, err := exec.LookPath(name)
	if err != nil {
		if errors.Is(err, exec.ErrNotFound) {
			return "", fmt.Errorf("redistest: %s not found%s", name, from)
		}
		return "", fmt.Errorf("redistest: %s%s unusable: %w", name, from, err)
	}
	return path, nil
}

// findRedisCLI returns the path of the command-line client
// (PADLOCK_REDIS_CLI, default redis-cli), or an error when there is none.
func findRedisCLI() (string, error) {
	name, _ := binary(cliEnv, "redis-cli")
	return exec.LookPath(name)
}

// binary returns the binary env names, or def, and where the name came
// from for messages: " (PADLOCK_REDIS_SERVER)" when env set it.
func binary(env, def string) (name, from string) {
	if v := os.Getenv(env); v != "" {
		return v, " (" + env + ")"
	}
	return def, " on PATH"
}

// Require skips t unless a real redis-server can be run, for tests that
// mean nothing on miniredis (a hung server, Cluster, Sentinel). Under
// PADLOCK_REQUIRE_REDIS=1 it fails t instead of skipping.
func Require(t testing.TB) {
	t.Helper()
	requireBinary(t)
}

// requireBinary is Require returning the binary's path.
func requireBinary(t testing.TB) string {
	t.Helper()
	bin, err := findRedisServer()
	if err == nil {
		return bin
	}
	if redisRequired() {
		t.Fatalf("%v and %s=1 forbids the miniredis fallback; %s", err, requireEnv, installHint)
	}
	t.Skipf("%v; this test needs a real Redis (%s)", err, installHint)
	return ""
}

// SkipSlowDeployments skips t under go test -short: what starts a real
// Redis Cluster or Sentinel deployment takes seconds to form and to fail
// over, so the inner loop (-short) leaves those tests out. CI runs them.
// what names the deployment in the skip message.
func SkipSlowDeployments(t testing.TB, what string) {
	t.Helper()
	if testing.Short() {
		t.Skipf("-short: starts %s on real servers (CI runs it)", what)
	}
}

// heavySlots bounds how many Clusters and Sentinel deployments one test
// binary runs at once, whatever its -parallel (go test's default is the
// number of CPUs): each is several redis-servers, and their tests time
// renewals and failovers, which more of them at once on a small machine
// would starve.
var heavySlots = make(chan struct{}, 2)

// holdHeavySlot waits for one of heavySlots and keeps it until t ends.
func holdHeavySlot(t testing.TB) {
	t.Helper()
	heavySlots <- struct{}{}
	t.Cleanup(func() { <-heavySlots })
}
