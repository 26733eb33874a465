// Package padlocktest runs padlock inside a test process, so the tests of
// code that takes locks cover its busy (409), Redis-down (503) and
// lock-lost paths in milliseconds, with no redis-server to install.
//
// New starts an Env: an in-process Redis (miniredis), a go-redis client on
// it and a padlock.Locker on that client, all closed when the test ends.
// Build the code under test on Env.Locker, then steer what it meets:
//
//	env := padlocktest.New(t)
//	h := newHandler(env.Locker())
//
//	env.Busy(ctx, "order:42", time.Minute) // someone else holds it: 409, Retry-After 60
//	env.Down()                             // Redis is gone: 503
//	env.Up()
//	env.Lose("order:42")                   // the holder's Done closes at its next renewal
//
// For a lock a middleware takes (httplock.Lock, the Gin middleware.Lock),
// BusyFor and LoseFor take the request instead of the key: they ask the
// app's router which key the request locks (httplock.KeyFor), so the test
// never guesses how a route spells it:
//
//	env.BusyFor(ctx, mux, httptest.NewRequest("POST", "/orders/42/pay", nil), time.Minute)
//	env.LoseFor(mux, httptest.NewRequest("POST", "/orders/42/pay", nil))
//
// Leases expire in real time: miniredis expires keys only when told that
// time has passed, and the Env tells it every 10ms. With WithManualClock the
// test moves Redis's clock itself (Advance), so a busy key stays busy until
// the test says its lease is over, however slow the machine.
//
// A scheduled job's ticks follow a clock too: give schedule.Every the
// Env's Clock (schedule.Options.Clock), and each Clock.Advance is the
// next tick, for the job and for Redis, so a test of three instances over
// ten ticks of a one-minute job takes milliseconds:
//
//	clock := env.Clock()
//	go schedule.Every(ctx, locker, "job:settle", time.Minute, schedule.Options{Clock: clock}, settle)
//	clock.AwaitWaiters(ctx, 1) // the job waits for its next tick
//	clock.Advance(time.Minute) // and runs it
//
// Down is quiet: the Env's client dials nothing while Redis is down, so
// go-redis logs no failed dial and a test needs no redis.SetLogger.
//
// # Losing a lock
//
// A lock is lost when Redis forgets it before its holder lets go. LoseLock
// does that to a Lock the test holds and makes the Lock notice at once.
// Lose does it to whatever lock holds a key, for a lock the test cannot
// reach, and LoseFor to the lock a request takes, such as the one a
// middleware took for a request in flight. Its holder
// notices at its next renewal, a third into its lease, so give the Env's
// Locker a short default lease for such tests. A second makes that a third
// of a second, and still leaves a loaded test machine most of a second to
// renew in before the lease runs out on its own:
//
//	env := padlocktest.New(t, padlocktest.WithLockerOptions(
//		padlock.WithDefaults(padlock.Options{TTL: time.Second})))
//
// A handler can also hand its lock to the test: padlock.FromContext on the
// request's context returns the lock a middleware took.
//
// # What miniredis is not
//
// The Env is a single Redis node. miniredis has no sharded pub/sub
// (SSUBSCRIBE) and no INFO server, so Cluster and Redlock cannot run on it,
// and it cannot hang or stall the way a real server can. padlock's own
// tests of those paths use real servers.
//
// # Why middleware and decorator take a *padlock.Locker
//
// The middleware and decorator packages take the concrete *padlock.Locker,
// not an interface of its Acquire method, and this package is the reason
// they can. An interface would exist to let tests put a fake in place of
// the Locker, but a fake could only fail: Acquire returns a *padlock.Lock,
// and only a Locker makes one that is held, whose Done closes when it is
// lost and whose Context makes the next Acquire of the key reentrant. A
// fake that returned such locks would need Lock to be an interface too,
// and every fake would be a fresh chance to get the lock-lost contract
// wrong; a test would then prove the handler against the fake, not
// against padlock. An Env's Locker is the real one, costs about two
// milliseconds to start (BenchmarkStart), and is driven into every outcome
// a fake could give. Should a need appear that only an interface meets,
// accepting, later, an interface that *padlock.Locker satisfies breaks no
// call site, while going back from an interface to the concrete type
// would.
package padlocktest
