package httplock

import (
	"fmt"
	"net/http"

	"github.com/padlockgo/padlock/lockkey"
)

// KeyFunc returns the lock key for a request: one or more escaped parts
// joined by lockkey.Sep. Errors match lockkey.ErrMissingPart,
// ErrAmbiguousPart, ErrInvalidPart, ErrBodyTooLarge or ErrMalformedBody
// when the request itself is at fault (400 or 413); any other error is the
// app's own (500). A KeyFunc written by hand must escape what it takes from
// the request (lockkey.Canon's Part does).
type KeyFunc func(r *http.Request) (string, error)

// PathValue returns a KeyFunc that reads the path wildcard name with
// r.PathValue ("{id}" in the http.ServeMux pattern "POST /orders/{id}/pay";
// chi sets path values too) as c says it is: PathValue("id",
// lockkey.Int(64)) for an id the handler parses as an int64, so that
// /orders/13, /orders/013 and /orders/+13 lock one order (or, with Strict,
// all but the first are refused with 400). The part is named
// "path param <name>" in errors. It panics if name is empty.
func PathValue(name string, c lockkey.Canon) KeyFunc {
	mustName("PathValue", name)
	part := "path param " + name
	return func(r *http.Request) (string, error) {
		return c.Part(part, r.PathValue(name))
	}
}

// Query returns a KeyFunc that reads the URL query value name as c says it
// is. A repeated value (?id=1&id=2) is an error matching
// lockkey.ErrAmbiguousPart. The part is named "query <name>" in errors. It
// panics if name is empty.
func Query(name string, c lockkey.Canon) KeyFunc {
	mustName("Query", name)
	part := "query " + name
	return func(r *http.Request) (string, error) {
		return c.One(part, r.URL.Query()[name])
	}
}

// Header returns a KeyFunc that reads the request header name as c says it
// is. A header sent more than once is an error matching
// lockkey.ErrAmbiguousPart. The part is named "header <name>" in errors.
// It panics if name is empty.
func Header(name string, c lockkey.Canon) KeyFunc {
	mustName("Header", name)
	part := "header " + name
	name = http.CanonicalHeaderKey(name)
	return func(r *http.Request) (string, error) {
		return c.One(part, r.Header[name])
	}
}

// JSON returns a KeyFunc that reads the field at path from a JSON request
// body as c says it is (see lockkey.JSONField). The body is read at most
// once per request, however many parts read it, at most
// lockkey.WithMaxBodyBytes (default lockkey.DefaultMaxBodyBytes), and r.Body is
// restored for the handler. It panics if path is empty, has an empty
// segment or an option is invalid.
func JSON(path string, c lockkey.Canon, opts ...lockkey.BodyOption) KeyFunc {
	f, err := lockkey.NewJSONField(path, c)
	if err != nil {
		panic("httplock: JSON: " + err.Error())
	}
	limit, err := lockkey.BodyLimit(opts...)
	if err != nil {
		panic("httplock: JSON: " + err.Error())
	}
	return func(r *http.Request) (string, error) {
		body, err := lockkey.ReadBody(r, limit)
		if err != nil {
			return "", err
		}
		return f.Part(body)
	}
}

// Const returns a KeyFunc that always returns the part s, escaped. It
// panics if s is empty.
func Const(s string) KeyFunc {
	if s == "" {
		panic("httplock: Const: empty string")
	}
	v := lockkey.Escape(s)
	return func(*http.Request) (string, error) { return v, nil }
}

// Join returns a KeyFunc that runs parts in order and joins their results
// with lockkey.Sep. The first error stops it and is returned; a part that
// returns an empty string is an error matching lockkey.ErrMissingPart. It
// panics if parts is empty or holds a nil KeyFunc.
func Join(parts ...KeyFunc) KeyFunc {
	if len(parts) == 0 {
		panic("httplock: Join: no parts")
	}
	for i, p := range parts {
		if p == nil {
			panic(fmt.Sprintf("httplock: Join: part %d is nil", i+1))
		}
	}
	funcs := make([]func(*http.Request) (string, error), len(parts))
	for i, p := range parts {
		funcs[i] = p
	}
	return lockkey.JoinFuncs(funcs)
}

func mustName(fn, name string) {
	if name == "" {
		panic("httplock: " + fn + ": empty name")
	}
}
