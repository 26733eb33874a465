// Package middleware guards Gin handlers with padlock locks. It is the Gin
// face of padlock/httplock, which holds the net/http middleware, the
// options and the problem responses, and does not import gin.
//
// Lock is a Gin middleware that builds a lock key from the request with a
// keyfunc.Func, takes the lock, runs the rest of the chain while holding it
// and releases it afterwards:
//
//	r.POST("/orders/:id/pay", middleware.Lock(locker, keyfunc.Param("id", lockkey.Int(64))), pay)
//
// Each key part says what it is, so that /orders/13/pay and /orders/013/pay,
// which the handler binds as the same order, take the same lock (see
// keyfunc); keyfunc.Bind takes the key from the bound request struct itself.
//
// What a request gets:
//
//   - Lock held elsewhere: 409 Conflict (or 423 Locked, see
//     httplock.WithBusyStatus)
//     with a Retry-After header, in whole seconds rounded up (at least 1):
//     when a retry is likely to succeed, the longest of the last 8 holds
//     measured in the route's namespace, capped at the holder's remaining
//     lease (which is the answer until a hold was measured; see
//     httplock.Guard.Acquire).
//     The body names the key's namespace, not the key, which is built
//     from request data that may be secret (see httplock.WithEchoKey).
//   - Redis unreachable: 503 Service Unavailable. The handler never runs
//     without the lock.
//   - Held for longer than httplock.WithMaxHold allows: the handler's context is
//     cancelled and the lock no longer renewed; it is released when the
//     handler returns, or ends with its lease if the handler does not
//     return by then, and never while the handler runs. 503 when the
//     handler had written nothing by then, and what it writes afterwards
//     is dropped. Another request for the key meanwhile gets the busy
//     answer above, its Retry-After up to the lease's end.
//   - Key part missing, repeated, malformed or not of its kind: 400 Bad
//     Request; body over the key's limit: 413 Content Too Large.
//
// Every error response is an RFC 9457 problem, application/problem+json
// (see httplock.Problem), unless httplock.WithResponder writes something
// else.
//
// While the handler runs, c.Request's context carries the lock: it is
// cancelled if the lock is lost, Acquire with it on the same key is
// reentrant, and LockFrom reads the lock back (for its fence). The lock is
// released when the handler returns or panics (the panic goes on to gin's
// recovery), with a fresh bounded context, so a request whose client went
// away still releases.
//
// Lock keys are namespaced by route template (c.FullPath()) unless
// httplock.WithNamespace says otherwise, so POST /orders/:id/pay and
// POST /orders/:id/refund do not share a lock on the same id. The final key
// is lockkey.Shorten(lockkey.EscapeRoute(namespace) + ":" + key), for
// example "/orders/$id/pay:42". KeyFor asks the engine for the key a
// request would lock, for tests (padlocktest's BusyFor and LoseFor).
//
// Each lock names who took it (padlock.Options.Caller), after the
// Locker's Owner: the route template and, with WithCaller, a keyed hash of
// the caller's identity, "route=/orders/$id/pay caller=#3fa9c1e2d4b5",
// never the identity itself. The lock page (lockview), Locker.Inspect and
// a refused request's padlock.NotAcquiredError.Holder read it.
//
// httplock.Lock is the same middleware for net/http routers (http.ServeMux,
// chi), sharing the same core, httplock.Guard.
//
// Idempotency-Key handling, for payment and order endpoints, is its own
// package: padlock/idempotency, with its Gin face in
// padlock/idempotency/ginidem.
//
// Limit caps concurrency instead of excluding: it holds one of the
// permits of a padlock.Semaphore for the key, so at most N requests per
// key run at once, and refuses the rest with 429 or 503 (the app picks)
// and Retry-After:
//
//	provider, _ := locker.Semaphore(3)
//	r.POST("/merchants/:id/charge", middleware.Limit(provider, keyfunc.Param("id", lockkey.Int(64)), http.StatusTooManyRequests), charge)
package middleware
