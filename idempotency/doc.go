// Package idempotency makes HTTP routes idempotent under the
// Idempotency-Key request header (IETF draft "The Idempotency-Key HTTP
// Header Field"), for payment and order endpoints: the first request with a
// key runs the handler, and a retry with the same key gets the first
// request's response back, status, headers and body, marked
// "Idempotent-Replayed: true", without running the handler again.
//
// New is the net/http middleware, and does not import gin;
// padlock/idempotency/ginidem is the Gin face of the same Core:
//
//	idem := idempotency.New(locker, rdb, userID)
//	mux.Handle("POST /orders", authenticate(idem(http.HandlerFunc(createOrder))))
//
// # Security
//
// A stored response is the answer to one caller: the middleware goes after
// authentication, and its caller func returns the authenticated identity
// (userID above reads what authenticate put in the request's context). A
// request without one is refused with 401, never answered from a scope
// shared by everyone who is not signed in; a caller func is required. Take
// the identity from the authentication step, never from a header the
// client sends unauthenticated (X-Client-ID): whoever copies it gets the
// other caller's responses, and can squat its keys. Clients should send
// unguessable keys (a random UUID per operation).
//
// The identity is opaque: its bytes are escaped, never normalized, so two
// accounts whose names differ only in their Unicode spelling ("josé" sent
// precomposed and decomposed, "Kim" and "\u212Aim" with a Kelvin sign)
// are two callers, each with its own responses, keys and quota. So is the
// Idempotency-Key: printable ASCII (see ParseKey), compared byte for byte,
// case included; only its quoting is read.
//
// The request fingerprint holds the method, the URI, the Content-Type and
// the body: the same bytes under another Content-Type (text/plain, which a
// cross-site form can send) are another request, 422. Of the response,
// only representation fields are stored and replayed (Content-Type,
// Location, ETag ...; see WithStoredHeaders): session and credential
// fields (Set-Cookie, Authentication-Info, X-Session-Token) go to the first
// response only.
//
// What a request gets (refusals are problem+json, see
// httplock.WriteProblem, unless WithResponder writes something else):
//
//   - No authenticated caller: 401.
//   - No Idempotency-Key: 400, unless WithOptionalKey (then the handler
//     runs with no idempotency). A malformed key (see ParseKey) or two
//     Idempotency-Key fields: 400.
//   - Body larger than WithMaxBodyBytes: 413.
//   - The key's first request is still running: 409 with "Retry-After: 1",
//     or, with WithWaitForInFlight, a wait for it to finish and then its
//     replay.
//   - The key was used with a different request (see WithFingerprint): 422.
//   - The key's first request finished: its stored response, replayed,
//     the handler's errors included, but not a 400 or 422 that says the
//     request failed validation: a corrected retry with the same key runs
//     (see DefaultStoreStatus, and StrictStoreStatus for the strict
//     behaviour), nor the refusal of a lock or limiter behind this
//     middleware (auth → idempotency → httplock.Lock is the safe order):
//     its 409, 423, 429 or 503 frees the key for the retry it asks for.
//     Every 2xx and 3xx of the handler is stored, one with a Retry-After
//     too (a 202 Accepted saying when to check back). If its response
//     was not kept (larger than WithMaxResponseBytes, or streamed): 409
//     without Retry-After, saying so; the handler does not run again.
//   - The key's first request got a 408, 503 or 504 that was not stored,
//     less than one in-flight lease ago: 409 with "Retry-After: 1" (see
//     Timeouts below).
//   - The caller is at its quota of stored responses (WithQuota): 429 with
//     Retry-After, before the handler runs.
//   - Redis unreachable: 503; the handler never runs without the in-flight
//     lock or without knowing whether the key was used.
//
// Stored responses are bounded per caller (WithQuota; by default 10000
// responses and 64 MiB at once), so that one caller cannot fill Redis. A
// request reserves its place in the quota, atomically, before its handler
// runs, so requests sent at once cannot together go over the count; the
// bytes can go over by at most the responses in flight. The quota of a
// caller lives at WithRecordPrefix + "quota:{<digest of the caller>}" and
// the same + ":bytes", kept for WithRetention.
//
// A key is scoped by route template, caller and key: the same key on
// another route, or from another caller, is another key. The route template
// is the router's (r.Pattern, which http.ServeMux and chi set; gin's
// c.FullPath()) unless WithNamespace sets one. Where the router reports
// none (a middleware chi runs before routing, with Use; gorilla/mux), the
// method and the request path stand in for it ("POST /orders/7/pay"): keys
// still never cross routes, but two spellings of one resource's path
// (/orders/7 and /orders/07) are two scopes, so a retry that spells the
// path differently runs the handler again. Set WithNamespace on such
// routes, or mount the middleware where the router has matched the route
// (chi's With or Route). In Redis, with
// scope = lockkey.Shorten(EscapeRoute(route) + ":" + Escape(caller) + ":" +
// Escape(key)), the record of a finished request is at WithRecordPrefix +
// scope (default "padlock:idempotency:" + scope), one string kept for
// WithRetention (24h), and the in-flight lock is the Locker's lock on
// "idempotency:" + scope. That lock names who holds it
// (padlock.Options.Caller), after the Locker's Owner: the route template
// and a keyed hash of the caller (see WithRedactor), "route=/orders/$id/pay
// caller=#3fa9c1e2d4b5", never the caller's identity, the path or the key.
//
// How a request runs:
//
//  1. Replay path, one Redis round trip: a GET of the record. Found: 422,
//     409 or the replay, and the chain stops.
//  2. Not found: take the in-flight lock (a padlock lock, renewed while the
//     handler runs, so it frees itself within WithInFlightTTL if the
//     process dies: a crash never leaves a key stuck), then GET again, for
//     a request that finished between step 1 and the lock, pipelined with
//     the reservation of a place in the caller's quota (freed again when
//     nothing is stored).
//  3. Run the handler with a response writer that holds the response back
//     (up to WithMaxResponseBytes). The handler sees the lock through its
//     request's context (cancelled if it is lost) and padlock.FromContext,
//     and the key through KeyFrom; it can still read the body.
//  4. Store the record (SET NX PX, pipelined with counting it against the
//     caller's quota, on a context detached from the request and bounded
//     by WithStoreTimeout), then send the response, then release the lock
//     (or leave it to run out; see Timeouts below). Storing first means
//     that a client that got the response gets the same one on a retry,
//     never a 409. A record is never overwritten.
//
// A response the handler flushed early, or one larger than
// WithMaxResponseBytes, is sent as it streams, with "Idempotent-Replayable:
// false", and a marker is stored in its place: a retry gets 409 saying the
// response cannot be replayed, never a second run. A panicking handler
// stores nothing, and a retry runs it again, unless its response had
// started to go out: then the marker is stored first (for a status that
// WithStoreStatus stores). Either way the lock is released and the panic
// goes on to the router's recovery. A 5xx is not stored (see
// DefaultStoreStatus). A handler that takes the connection over (Hijack)
// leaves the marker whatever it writes and whatever follows, a panic
// included: a retry gets 409, never a second run.
//
// # Timeouts and the order of middlewares
//
// A handler must not run twice at once for one key. The middleware holds
// the key's in-flight lock until the handler returns, which it can see
// only if the handler runs inside its ServeHTTP. A timeout wrapper between
// the two (http.TimeoutHandler, gin-contrib/timeout) answers when its time
// is up and returns while the handler goes on in a goroutine of its own:
// the middleware cannot know that the handler finished. So after an
// answer of 408, 503 or 504 that is not stored (what such wrappers send),
// the middleware does not release the key but leaves its lock to run out,
// unrenewed, one lease (WithInFlightTTL) later; retries meanwhile get 409.
// That keeps a second run away while the first runs on for up to one
// lease; a handler that runs on longer than that can meet a retry's run.
// A handler's own 408, 503 or 504 costs the same wait.
//
// The safe order is: authentication, then this middleware, then a lock
// middleware (httplock, padlock/middleware) if any, then the handler; put
// timeout wrappers (http.TimeoutHandler, gin-contrib/timeout) outside this
// middleware, never between it and the handler (http.Server's timeouts
// are outside already):
//
//	authenticate(http.TimeoutHandler(idem(lock(handler)), 10*time.Second, ""))
//
// There the handler runs inside the middleware's ServeHTTP: when the
// timeout answers the client, the middleware goes on holding the key,
// stores the handler's response when it returns, and a retry gets 409,
// then the replay. The timeout cancels the handler's context: a handler
// that gives up on it and answers a 5xx stores nothing, and a retry runs
// it again.
//
// The Retry-After of the in-flight 409 is 1 second, not the lock's
// remaining lease: the lease says when a crashed holder's key frees, while
// a live holder usually finishes far sooner.
package idempotency
