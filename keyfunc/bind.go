package keyfunc

import (
	"errors"
	"fmt"
	"net/http"

	"github.com/gin-gonic/gin"
	"github.com/gin-gonic/gin/binding"

	"github.com/padlockgo/padlock/lockkey"
)

// Bind returns a Func that takes the key from the bound, validated request
// instead of from its raw text, so that the key and the handler can never
// read different values: it binds the request into a new T with bind, one
// of gin's binding methods ((*gin.Context).ShouldBindUri,
// ShouldBindBodyWithJSON, ShouldBindQuery, ...), which also runs the
// struct's validator v10 tags; stores the bound value in the gin context,
// where the handler reads it with Bound; and builds the key from the raw
// parts parts returns, escaped and joined as lockkey.Join does:
//
//	type orderURI struct {
//		ID int64 `uri:"id" binding:"required,gt=0"`
//	}
//	key := keyfunc.Bind((*gin.Context).ShouldBindUri, func(u *orderURI) []string {
//		return []string{strconv.FormatInt(u.ID, 10)}
//	})
//
// /orders/13, /orders/013, /orders/+13 and /orders/%2013 all bind as ID 13,
// so all lock "13". A request that does not bind or validate is an error
// matching lockkey.ErrInvalidPart (HTTP 400) that also wraps the binding's
// error (validator.ValidationErrors, for one), so a Responder can list the
// fields at fault; a body over a http.MaxBytesReader limit is one matching
// lockkey.ErrBodyTooLarge (413). A part parts returns empty is missing.
//
// Format numbers from the bound value canonically (strconv.FormatInt,
// FormatUint, FormatFloat with -1 precision); strings are taken exactly as
// bound. Bind panics if bind or parts is nil.
func Bind[T any](bind func(c *gin.Context, obj any) error, parts func(v *T) []string) Func {
	if bind == nil {
		panic("keyfunc: Bind: nil bind")
	}
	if parts == nil {
		panic("keyfunc: Bind: nil parts")
	}
	return func(c *gin.Context) (string, error) {
		v := new(T)
		if err := bind(c, v); err != nil {
			var mbe *http.MaxBytesError
			if errors.As(err, &mbe) {
				return "", fmt.Errorf("%w (limit %d bytes): %w", lockkey.ErrBodyTooLarge, mbe.Limit, err)
			}
			return "", fmt.Errorf("%w %q (the request does not bind): %w", lockkey.ErrInvalidPart, "bound request", err)
		}
		c.Set(boundKey[T]{}, v)
		return lockkey.Join(parts(v)...)
	}
}

// boundKey is the gin context key of the value Bind bound, one per type.
type boundKey[T any] struct{}

// Bound returns the value a Bind key func bound into a T for this request,
// or nil when none was (no Bind[T] on the route, or it ran after the
// handler). The handler reads the request from it rather than binding
// again, so it works on the very value the key names.
func Bound[T any](c *gin.Context) *T {
	if c == nil {
		return nil
	}
	v, _ := c.Get(boundKey[T]{})
	t, _ := v.(*T)
	return t
}

// Tag returns lockkey.Text() validated with the validator v10 tag tag
// ("required,uuid4", "numeric,max=20") by gin's binding validator, the one
// that checks the handler's `binding:"..."` tags, so custom validations
// registered there apply too. It panics if tag is empty or gin's validator
// is not validator v10.
func Tag(tag string) lockkey.Canon {
	return lockkey.Text().Validate(Validator(), tag)
}

// Validator returns gin's binding validator engine, for
// lockkey.Canon.Validate: lockkey.Int(64).Validate(keyfunc.Validator(),
// "gt=0"). It panics if gin's validator is not validator v10 (it is unless
// the app replaced binding.Validator with another kind).
func Validator() lockkey.Validator {
	v, ok := binding.Validator.Engine().(lockkey.Validator)
	if !ok {
		panic(fmt.Sprintf("keyfunc: gin's binding validator engine is %T, want a validator v10 *validator.Validate", binding.Validator.Engine()))
	}
	return v
}
