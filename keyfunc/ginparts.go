package keyfunc

import (
	"fmt"
	"net/http"
	"strconv"

	"github.com/gin-gonic/gin"

	"github.com/padlockgo/padlock/lockkey"
)

// Param returns a Func that reads the path parameter name (":id" in the
// route "/orders/:id") as c says it is: Param("id", lockkey.Int(64)) for an
// id the handler binds into an int64, so that /orders/13, /orders/013,
// /orders/+13 and /orders/%2013 lock one order (or, with Strict, all but
// the first are refused with 400). The part is named "path param <name>" in
// errors. It panics if name is empty.
func Param(name string, c lockkey.Canon) Func {
	mustName("Param", name)
	part := "path param " + name
	return func(gc *gin.Context) (string, error) {
		return c.Part(part, gc.Param(name))
	}
}

// Query returns a Func that reads the URL query value name as c says it
// is. A repeated value (?id=1&id=2) is an error matching
// lockkey.ErrAmbiguousPart. The part is named "query <name>" in errors. It
// panics if name is empty.
func Query(name string, c lockkey.Canon) Func {
	mustName("Query", name)
	part := "query " + name
	return func(gc *gin.Context) (string, error) {
		vals, _ := gc.GetQueryArray(name)
		return c.One(part, vals)
	}
}

// Header returns a Func that reads the request header name as c says it
// is. A header sent more than once is an error matching
// lockkey.ErrAmbiguousPart. The part is named "header <name>" in errors.
// It panics if name is empty.
func Header(name string, c lockkey.Canon) Func {
	mustName("Header", name)
	part := "header " + name
	name = http.CanonicalHeaderKey(name)
	return func(gc *gin.Context) (string, error) {
		return c.One(part, gc.Request.Header[name])
	}
}

// Form returns a Func that reads the form value name from a URL-encoded or
// multipart request body (not from the query string) as c says it is. The
// body is parsed once for the request, at most lockkey.WithMaxBodyBytes long
// (default lockkey.DefaultMaxBodyBytes), and stays available to the handler
// through c.PostForm and c.Request.PostForm but no longer as
// c.Request.Body. The part is named "form field <name>" in errors. It
// panics if name is empty or an option is invalid.
func Form(name string, c lockkey.Canon, opts ...lockkey.BodyOption) Func {
	mustName("Form", name)
	limit := bodyLimit("Form", opts)
	part := "form field " + name
	return func(gc *gin.Context) (string, error) {
		form, err := lockkey.ParseForm(gc.Request, limit)
		if err != nil {
			return "", err
		}
		return c.One(part, form[name])
	}
}

// Route returns a Func that reads the matched route template, c.FullPath(),
// so that different routes get different keys. The part is escaped with
// lockkey.EscapeRoute: "/orders/:id" gives "/orders/$id". It is missing
// when no route matched.
func Route() Func {
	return func(c *gin.Context) (string, error) {
		v := c.FullPath()
		if v == "" {
			return "", lockkey.Missing("route")
		}
		return lockkey.EscapeRoute(v), nil
	}
}

// ClientIP returns a Func that reads c.ClientIP(): the peer's address, or
// the address an X-Forwarded-For or X-Real-IP header names when the peer is
// one of the engine's trusted proxies.
//
// gin trusts every peer as a proxy unless told otherwise, so by default
// any client picks its own key with X-Forwarded-For, and can lock out
// another client by sending that client's address. Before using ClientIP
// for a key, call engine.SetTrustedProxies with the addresses of your own
// proxies, or with nil when clients connect directly (engine.TrustedPlatform
// for a platform header such as gin.PlatformCloudflare).
func ClientIP() Func {
	return func(c *gin.Context) (string, error) {
		return lockkey.Text().Part("client ip", c.ClientIP())
	}
}

// Value returns a Func that reads a value an earlier middleware stored with
// c.Set(key, v), such as the authenticated user's id. A string is used as it
// is, a fmt.Stringer through its String method, integers and booleans in
// decimal and "true"/"false"; any other type is formatted with fmt.Sprint.
// Text is normalized to NFC, as lockkey.Text does. An unset or nil value is
// missing. The part is named "context value <key>" in errors. It panics if
// key is nil or "".
func Value(key any) Func {
	if key == nil || key == "" {
		panic("keyfunc: Value: empty key")
	}
	part := fmt.Sprint("context value ", key)
	return func(c *gin.Context) (string, error) {
		v, ok := c.Get(key)
		if !ok || v == nil {
			return "", lockkey.Missing(part)
		}
		return lockkey.Text().Part(part, format(v))
	}
}

func format(v any) string {
	switch v := v.(type) {
	case string:
		return v
	case fmt.Stringer:
		return v.String()
	case int:
		return strconv.Itoa(v)
	case int64:
		return strconv.FormatInt(v, 10)
	case int32:
		return strconv.FormatInt(int64(v), 10)
	case uint:
		return strconv.FormatUint(uint64(v), 10)
	case uint64:
		return strconv.FormatUint(v, 10)
	case uint32:
		return strconv.FormatUint(uint64(v), 10)
	case bool:
		return strconv.FormatBool(v)
	}
	return fmt.Sprint(v)
}

func mustName(fn, name string) {
	if name == "" {
		panic("keyfunc: " + fn + ": empty name")
	}
}
