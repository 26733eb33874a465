package keyfunc

import (
	"fmt"

	"github.com/gin-gonic/gin"

	"github.com/padlockgo/padlock/lockkey"
)

// Func returns the lock key for a Gin request: one or more escaped parts
// joined by lockkey.Sep (see the package comment). Errors match
// lockkey.ErrMissingPart, ErrAmbiguousPart, ErrInvalidPart, ErrBodyTooLarge
// or ErrMalformedBody when the request itself is at fault.
//
// A Func must not return a raw value taken from the request; wrap such a
// function with Custom, which escapes it.
type Func func(c *gin.Context) (string, error)

// Const returns a Func that always returns the part s, escaped.
// It panics if s is empty.
func Const(s string) Func {
	if s == "" {
		panic("keyfunc: Const: empty string")
	}
	v := lockkey.Escape(s)
	return func(*gin.Context) (string, error) { return v, nil }
}

// Custom turns fn, which returns one raw value (a tenant, a user id read
// from a token), into a Func that puts it through c (lockkey.Text() for
// text) and escapes it. An empty value is an error matching
// lockkey.ErrMissingPart that names the part as name; errors from fn are
// returned as they are. It panics if name is empty or fn is nil.
func Custom(name string, c lockkey.Canon, fn func(c *gin.Context) (string, error)) Func {
	if name == "" {
		panic("keyfunc: Custom: empty name")
	}
	if fn == nil {
		panic("keyfunc: Custom: nil fn")
	}
	return func(gc *gin.Context) (string, error) {
		v, err := fn(gc)
		if err != nil {
			return "", err
		}
		return c.Part(name, v)
	}
}

// Join returns a Func that runs parts in order and joins their results with
// lockkey.Sep. The first error stops it and is returned; a part that
// returns an empty string is an error matching lockkey.ErrMissingPart. It
// panics if parts is empty or holds a nil Func.
func Join(parts ...Func) Func {
	if len(parts) == 0 {
		panic("keyfunc: Join: no parts")
	}
	for i, p := range parts {
		if p == nil {
			panic(fmt.Sprintf("keyfunc: Join: part %d is nil", i+1))
		}
	}
	if len(parts) == 1 {
		return nonEmpty(parts[0])
	}
	funcs := make([]func(*gin.Context) (string, error), len(parts))
	for i, p := range parts {
		funcs[i] = p
	}
	return lockkey.JoinFuncs(funcs)
}

func nonEmpty(f Func) Func {
	return func(c *gin.Context) (string, error) {
		v, err := f(c)
		if err == nil && v == "" {
			err = lockkey.Missing("part 1")
		}
		return v, err
	}
}
