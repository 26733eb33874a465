// Package httplock guards net/http handlers with padlock locks, for
// http.ServeMux, chi and any router that takes func(http.Handler)
// http.Handler middleware. It does not import gin; the Gin middleware
// (padlock/middleware) is a thin layer over it.
//
// Lock builds a lock key from the request with a KeyFunc, takes the lock,
// runs the handler while holding it and releases it afterwards:
//
//	pay := httplock.Lock(locker, httplock.PathValue("id", lockkey.Int(64)))
//	mux.Handle("POST /orders/{id}/pay", pay(http.HandlerFunc(payOrder)))
//
// Each key part says what it is (lockkey.Int, UUID, Text, ...), so that
// /orders/13, /orders/013 and /orders/+13 take one lock, as the handler
// reads them all as order 13 (see lockkey.Canon).
//
// What a request gets:
//
//   - Lock held elsewhere: 409 Conflict (or 423 Locked, see WithBusyStatus)
//     with a Retry-After header, in whole seconds rounded up (at least 1):
//     when a retry is likely to succeed, the longest of the last 8 holds
//     measured in the route's namespace, capped at the holder's remaining
//     lease (which is the answer until a hold was measured; see
//     httplock.Guard.Acquire).
//     The body names the key's namespace, not the key, which is built
//     from request data that may be secret (see httplock.WithEchoKey).
//   - Redis unreachable: 503 Service Unavailable. The handler never runs
//     without the lock.
//   - Held for longer than WithMaxHold allows: the handler's context is
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
// (see Problem), unless WithResponder writes something else.
//
// While the handler runs, r.Context() carries the lock: it is cancelled if
// the lock is lost, Acquire with it on the same key is reentrant, and
// padlock.FromContext reads the lock back (for its fence). The lock is
// released when the handler returns or panics, with a fresh bounded
// context, so a request whose client went away still releases.
//
// Lock keys are namespaced by the route pattern (r.Pattern) unless
// WithNamespace says otherwise, so POST /orders/{id}/pay and
// POST /orders/{id}/refund do not share a lock on the same id. The final
// key is lockkey.Shorten(lockkey.EscapeRoute(namespace) + ":" + key), for
// example "POST /orders/<id>/pay:42". The route template is the router's:
// with a method on http.ServeMux ("POST /orders/<id>/pay:42"), without on
// chi ("/orders/<id>/pay:42"), none on gorilla/mux or before routing
// (WithNamespace's then). KeyFor asks the router for the key a request
// would lock, so that tests (padlocktest's BusyFor and LoseFor) and
// operators need not spell it.
//
// Each lock names who took it (padlock.Options.Caller), after the
// Locker's Owner: the route template and, with WithCaller, a keyed hash of
// the caller's identity, "route=POST /orders/<id>/pay
// caller=#3fa9c1e2d4b5", never the identity itself. The lock page
// (lockview), Locker.Inspect and a refused request's
// padlock.NotAcquiredError.Holder read it.
//
// Guard is the same sequence as a type, for adapters to other routers.
//
// Limit and Limiter are Lock and Guard for a padlock.Semaphore: at most N
// requests per key at once, the rest refused with 429 or 503 and
// Retry-After.
package httplock
