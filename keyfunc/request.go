package keyfunc

import (
	"fmt"
	"net/http"
	"strconv"

	"github.com/gin-gonic/gin"
)

// Param returns a Func that reads the path parameter name (":id" in the
// route "/orders/:id"). The part is named "path param <name>" in errors.
// It panics if name is empty.
func Param(name string) Func {
	mustName("Param", name)
	part := "path param " + name
	return func(c *gin.Context) (string, error) {
		v := c.Param(name)
		if v == "" {
			return "", missing(part)
		}
		return Escape(v), nil
	}
}

// Query returns a Func that reads the URL query value name. A repeated value
// (?id=1&id=2) is an error matching ErrAmbiguousPart. The part is named
// "query <name>" in errors. It panics if name is empty.
func Query(name string) Func {
	mustName("Query", name)
	part := "query " + name
	return func(c *gin.Context) (string, error) {
		vals, _ := c.GetQueryArray(name)
		return one(part, vals)
	}
}

// Header returns a Func that reads the request header name. A header sent
// more than once is an error matching ErrAmbiguousPart. The part is named
// "header <name>" in errors. It panics if name is empty.
func Header(name string) Func {
	mustName("Header", name)
	part := "header " + name
	name = http.CanonicalHeaderKey(name)
	return func(c *gin.Context) (string, error) {
		return one(part, c.Request.Header[name])
	}
}

// Form returns a Func that reads the form value name from a URL-encoded or
// multipart request body (not from the query string). The body is parsed once
// for the request, at most MaxBodyBytes long (default DefaultMaxBodyBytes),
// and stays available to the handler through c.PostForm and c.Request.PostForm
// but no longer as c.Request.Body. The part is named "form field <name>" in
// errors. It panics if name is empty or an option is invalid.
func Form(name string, opts ...BodyOption) Func {
	mustName("Form", name)
	limit := bodyLimit("Form", opts)
	part := "form field " + name
	return func(c *gin.Context) (string, error) {
		form, err := parseForm(c.Request, limit)
		if err != nil {
			return "", err
		}
		return one(part, form[name])
	}
}

// Route returns a Func that reads the matched route template, c.FullPath(),
// so that different routes get different keys. The part is escaped with
// EscapeRoute: "/orders/:id" gives "/orders/$id". It is missing when no
// route matched.
func Route() Func {
	return func(c *gin.Context) (string, error) {
		v := c.FullPath()
		if v == "" {
			return "", missing("route")
		}
		return EscapeRoute(v), nil
	}
}

// ClientIP returns a Func that reads c.ClientIP(), which trusts forwarding
// headers only from the engine's trusted proxies (see
// gin.Engine.SetTrustedProxies).
func ClientIP() Func {
	return func(c *gin.Context) (string, error) {
		v := c.ClientIP()
		if v == "" {
			return "", missing("client ip")
		}
		return Escape(v), nil
	}
}

// Value returns a Func that reads a value an earlier middleware stored with
// c.Set(key, v), such as the authenticated user's id. A string is used as it
// is, a fmt.Stringer through its String method, integers and booleans in
// decimal and "true"/"false"; any other type is formatted with fmt.Sprint.
// An unset or nil value is missing. The part is named "context value <key>"
// in errors. It panics if key is nil or "".
func Value(key any) Func {
	if key == nil || key == "" {
		panic("keyfunc: Value: empty key")
	}
	part := fmt.Sprint("context value ", key)
	return func(c *gin.Context) (string, error) {
		v, ok := c.Get(key)
		if !ok || v == nil {
			return "", missing(part)
		}
		s := format(v)
		if s == "" {
			return "", missing(part)
		}
		return Escape(s), nil
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
