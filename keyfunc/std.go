package keyfunc

import (
	"fmt"
	"net/http"
)

// RequestFunc is Func for a plain *http.Request, for net/http routers such
// as http.ServeMux and chi. It returns escaped parts joined by Sep, like
// Func, with the same errors.
type RequestFunc func(r *http.Request) (string, error)

// PathValue returns a RequestFunc that reads the path wildcard name with
// r.PathValue ("{id}" in the http.ServeMux pattern "POST /orders/{id}/pay";
// chi sets path values too). The part is named "path param <name>" in
// errors. It panics if name is empty.
func PathValue(name string) RequestFunc {
	mustName("PathValue", name)
	part := "path param " + name
	return func(r *http.Request) (string, error) {
		v := r.PathValue(name)
		if v == "" {
			return "", missing(part)
		}
		return Escape(v), nil
	}
}

// RequestQuery is Query for a plain *http.Request.
func RequestQuery(name string) RequestFunc {
	mustName("RequestQuery", name)
	part := "query " + name
	return func(r *http.Request) (string, error) {
		return one(part, r.URL.Query()[name])
	}
}

// RequestHeader is Header for a plain *http.Request.
func RequestHeader(name string) RequestFunc {
	mustName("RequestHeader", name)
	part := "header " + name
	name = http.CanonicalHeaderKey(name)
	return func(r *http.Request) (string, error) {
		return one(part, r.Header[name])
	}
}

// RequestJSON is JSON for a plain *http.Request. The body is read at most
// once per request, however many parts read it, and r.Body is restored for
// the handler.
func RequestJSON(path string, opts ...BodyOption) RequestFunc {
	p := newJSONPath("RequestJSON", path)
	limit := bodyLimit("RequestJSON", opts)
	return func(r *http.Request) (string, error) {
		body, err := readBody(r, limit)
		if err != nil {
			return "", err
		}
		return p.lookup(body)
	}
}

// RequestConst is Const for a plain *http.Request.
func RequestConst(s string) RequestFunc {
	if s == "" {
		panic("keyfunc: RequestConst: empty string")
	}
	v := Escape(s)
	return func(*http.Request) (string, error) { return v, nil }
}

// JoinRequest is Join for RequestFunc parts.
func JoinRequest(parts ...RequestFunc) RequestFunc {
	if len(parts) == 0 {
		panic("keyfunc: JoinRequest: no parts")
	}
	for i, p := range parts {
		if p == nil {
			panic(fmt.Sprintf("keyfunc: JoinRequest: part %d is nil", i+1))
		}
	}
	parts = append([]RequestFunc(nil), parts...)
	return func(r *http.Request) (string, error) { return join(parts, r) }
}
