// Package keyfunc builds lock keys from Gin requests, for the Gin
// middleware (padlock/middleware). It is a thin layer over the gin-free
// lockkey package, which escapes, joins and canonicalizes the parts.
//
// A Func reads one or more parts of a request (a path parameter, a query
// value, a header, a form value, a JSON body field, the route template, the
// client IP, a value the app stored in the context, a constant) and returns
// them as a key:
//
//	keyfunc.Param("id", lockkey.Int(64))                               // "13" for /orders/013
//	keyfunc.Join(keyfunc.Const("order"), keyfunc.Param("id", lockkey.Int(64))) // "order:13"
//	keyfunc.MustTemplate("order:{param.id|int64}:{header.X-Tenant}")    // "order:13:acme"
//
// # A key names the resource, not its spelling
//
// The handler of /orders/:id binds "13", "013", "+13", "%2013" and "13%0A"
// as order 13. A key made of the raw text would give five locks for one
// order; every part therefore says what it is, with a lockkey.Canon:
// lockkey.Int(64) for an id the handler binds into an int64, lockkey.UUID(),
// lockkey.Float(64), Tag("required,uuid4") for a validator v10 tag,
// lockkey.Func for a kind of the app's own, and lockkey.Text() for text,
// which is normalized to Unicode NFC. By default a part canonicalizes
// (all five spellings lock "13"); .Strict() refuses all but the canonical
// spelling with 400 instead.
//
// Bind goes one step further: it binds the request into the struct the
// handler uses, with gin's binding and validator v10, keeps the bound value
// for the handler (Bound), and builds the key from its fields, so the key
// and the handler cannot read different values.
//
// # Missing and bad parts
//
// A part must have exactly one non-empty value. A missing or empty part is
// an error matching lockkey.ErrMissingPart, a part given twice (?id=1&id=2,
// two JSON fields "id" and "ID") one matching lockkey.ErrAmbiguousPart, and
// a value not of its kind one matching lockkey.ErrInvalidPart; all name the
// part and mean the request is bad (HTTP 400). Reading a JSON or form body
// is bounded (lockkey.DefaultMaxBodyBytes unless lockkey.WithMaxBodyBytes says
// otherwise): a larger body is lockkey.ErrBodyTooLarge (HTTP 413), one that
// does not parse is lockkey.ErrMalformedBody (HTTP 400).
//
// # Key encoding
//
// Every part taken from a request is escaped (see lockkey.Escape), so two
// requests that differ in any part never get the same key, however the
// parts are crafted: an id of "1:pay" gives "order:1%3Apay", never
// "order:1:pay". The string a Func returns is therefore already encoded; a
// Func written by hand must return an escaped value too (Custom does it).
//
// Keys for net/http routers are built by padlock/httplock's KeyFuncs, and
// keys from function arguments (padlock/decorator) by lockkey.Arg and
// lockkey.Args; neither imports gin.
package keyfunc
