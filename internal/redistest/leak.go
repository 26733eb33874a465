package redistest

import "go.uber.org/goleak"

// DialProbe is the goleak option for tests that stop servers under their
// clients: after a failed dial, a go-redis pool probes the server from a
// goroutine that sleeps a second between tries, and ends at its first
// look after the pool is closed. That can be up to a second after the
// test closed its client, longer than goleak waits, so it is not a leak.
var DialProbe = goleak.IgnoreAnyFunction("github.com/redis/go-redis/v9/internal/pool.(*ConnPool).tryDial")
