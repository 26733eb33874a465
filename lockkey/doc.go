// Package lockkey builds lock keys: it escapes and joins key parts, reads
// them in their canonical form, and builds keys from function arguments.
// It imports neither gin nor any router; padlock/keyfunc (Gin),
// padlock/httplock (net/http) and padlock/decorator build on it.
//
// # A key names the resource, not its spelling
//
// Two requests for the same resource must get the same key, or one of them
// must be refused. A handler that binds the :id of /orders/:id into an
// int64 reads "13", "013", "+13", " 13" and "13\n" as order 13; a key made
// of the raw text would give five locks for one order. A Canon says what a
// part is, and the key holds the canonical value:
//
//	lockkey.Int(64)                  // "013", "+13", " 13" -> "13"
//	lockkey.Uint(64), lockkey.Float(64), lockkey.UUID()
//	lockkey.Text()                   // text, normalized to Unicode NFC
//	lockkey.Text().Validate(v, "required,uuid4")   // a validator v10 tag
//	lockkey.Func("an order number", canonicalOrderNumber)
//
// By default a Canon canonicalizes; Strict refuses every spelling but the
// canonical one instead, with ErrInvalidPart (HTTP 400) naming the part.
// Numbers are read the way the bound Go type reads them: Int and Uint
// exactly (2^53 and 2^53+1 are two keys), Float as the float (0.1 and
// 0.1000000000000000055511151231257827 are one float64, so one key).
//
// Unicode: text parts, request text and JSON strings alike, are normalized
// to NFC, so "é" sent precomposed (U+00E9) or decomposed ("e" and U+0301)
// gives one key. Normalizing can only merge keys, never split one value in
// two, so at worst it locks more than needed; Text().Strict() refuses text
// that is not NFC instead. Join, Arg and Args, for values from code, take
// their parts exactly as given.
//
// Merging is right for a resource and wrong for an identity: two accounts
// named "josé" (precomposed and decomposed) or "Kim" and "Kim" (a
// Kelvin sign) are two accounts, and whatever is scoped by who asks (the
// stored responses of padlock/idempotency, a quota) must keep them apart.
// Make such a part with Escape, which keeps the bytes as they are.
//
// # Key encoding
//
// A key is a list of parts joined by Sep (":"). Every part is escaped first
// (see Escape), so it never contains Sep, Cluster hash tag braces, '#', '%'
// other than in an escape, or control bytes. Hence the list of parts can
// always be read back from the key, and two different lists never get the
// same key, however the parts are crafted: an id of "1:pay" gives
// "order:1%3Apay", never "order:1:pay". Route templates use EscapeRoute,
// which reads better ("/orders/$id/pay") and is just as one-to-one.
// Shorten hashes keys longer than MaxKeyLen, keeping a readable prefix; a
// hashed key is the only kind that contains '#'.
//
// # Function arguments
//
// Arg and Args build keys from a function's argument, for
// decorator.WithLock; Join does the same for code that has the raw parts
// at hand:
//
//	lockkey.Arg("order", func(r PayRequest) string { return r.OrderID }) // "order:42"
//	lockkey.Join("report", "2024-06")                                    // "report:2024-06"
package lockkey
