// Package keyfunc builds lock keys from request data.
//
// A Func reads one or more parts of a Gin request (a path parameter, a query
// value, a header, a form value, a JSON body field, the route template, the
// client IP, a value the app stored in the context, a constant) and returns
// them as a key:
//
//	keyfunc.Param("id")                                        // "42"
//	keyfunc.Join(keyfunc.Const("order"), keyfunc.Param("id")) // "order:42"
//	keyfunc.MustTemplate("order:{param.id}:{header.X-Tenant}") // "order:42:acme"
//
// # Missing parts
//
// A part must have exactly one non-empty value. A missing or empty part is an
// error matching ErrMissingPart, a part given twice (?id=1&id=2, two JSON
// fields "id" and "ID") is an error matching ErrAmbiguousPart; both name the
// part and mean the request is bad (HTTP 400). Reading a JSON or form body is
// bounded (DefaultMaxBodyBytes unless MaxBodyBytes says otherwise): a larger
// body is ErrBodyTooLarge (HTTP 413), one that does not parse is
// ErrMalformedBody (HTTP 400).
//
// # Key encoding
//
// A key is a list of parts joined by Sep (":"). Every part taken from a
// request is escaped first (see Escape), so it never contains Sep, Cluster
// hash tag braces, '#', '%' other than in an escape, or control bytes. Hence
// the list of parts can always be read back from the key, and two requests
// that differ in any part never get the same key, however the parts are
// crafted: an id of "1:pay" gives "order:1%3Apay", never "order:1:pay".
// Route templates use EscapeRoute instead, which reads better
// ("/orders/$id/pay") and is just as one-to-one.
// Shorten hashes keys longer than MaxKeyLen, keeping a readable prefix; a
// hashed key is the only kind that contains '#'.
//
// The string a Func returns is therefore already encoded. A Func written by
// hand must return an escaped value too; Custom wraps a function that returns
// a raw value.
//
// # Plain net/http
//
// RequestFunc is the same idea for a plain *http.Request (chi, http.ServeMux):
// PathValue, RequestQuery, RequestHeader, RequestJSON and JoinRequest.
//
// # Function arguments
//
// Arg and Args build keys from a function's argument instead of a request,
// for the decorator package, with the same escaping:
//
//	keyfunc.Arg("order", func(r PayRequest) string { return r.OrderID }) // "order:42"
//
// Key does the same for code that has the raw parts at hand.
package keyfunc
