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
//     with a Retry-After header, in whole seconds rounded up, from the
//     holder's remaining lease.
//   - Redis unreachable: 503 Service Unavailable. The handler never runs
//     without the lock.
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
// example "/orders/$id/pay:42".
//
// httplock.Lock is the same middleware for net/http routers (http.ServeMux,
// chi), sharing the same core, httplock.Guard.
//
// # Idempotency
//
// Idempotency goes further than mutual exclusion, for payment and order
// endpoints: it implements the Idempotency-Key header (IETF draft
// "The Idempotency-Key HTTP Header Field"). The first request with a key
// runs the handler while holding a padlock lock on the key; its response is
// stored in Redis, and a retry with the same key gets that response back,
// marked "Idempotent-Replayed: true", in one Redis round trip:
//
//	r.POST("/orders", middleware.Idempotency(locker, rdb, middleware.WithCaller(clientID)), createOrder)
//
// A missing or malformed key is 400, the key reused for a different request
// is 422, and the key whose first request still runs is 409 with
// Retry-After (or a wait for its answer, see WaitForInFlight). A process
// that dies while running a request leaves its key busy only until the
// lock's lease runs out.
//
// Limit caps concurrency instead of excluding: it holds one of the
// permits of a padlock.Semaphore for the key, so at most N requests per
// key run at once, and refuses the rest with 429 or 503 (the app picks)
// and Retry-After:
//
//	provider, _ := locker.Semaphore(3)
//	r.POST("/merchants/:id/charge", middleware.Limit(provider, keyfunc.Param("id", lockkey.Int(64)), http.StatusTooManyRequests), charge)
package middleware
