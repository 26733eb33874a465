package keyfunc

import (
	"github.com/gin-gonic/gin"

	"github.com/padlockgo/padlock/lockkey"
)

// JSON returns a Func that reads the field at path from a JSON request body
// with c: Int(64) for a field the handler binds into an int64, Text for a
// string, and so on (see lockkey.JSONField for paths, case and duplicate
// fields, and lockkey.Canon for the kinds). A number for an integer field
// is read exactly, never through float64.
//
// The body is read once per request, at most lockkey.WithMaxBodyBytes (default
// lockkey.DefaultMaxBodyBytes), and kept under gin.BodyBytesKey;
// c.Request.Body is restored for the handler, and c.ShouldBindBodyWith
// reuses the bytes. The part is named "json field <path>" in errors. It
// panics if path is empty, has an empty segment or an option is invalid.
func JSON(path string, c lockkey.Canon, opts ...lockkey.BodyOption) Func {
	f, err := lockkey.NewJSONField(path, c)
	if err != nil {
		panic("keyfunc: JSON: " + err.Error())
	}
	limit := bodyLimit("JSON", opts)
	return func(gc *gin.Context) (string, error) {
		body, err := ReadBody(gc, limit)
		if err != nil {
			return "", err
		}
		return f.Part(body)
	}
}
