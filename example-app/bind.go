package main

import (
	"encoding/json"
	"errors"
	"io"
	"mime"
	"net/http"
	"strings"
	"unicode"

	"github.com/gin-gonic/gin"
	"github.com/gin-gonic/gin/binding"
	"github.com/go-playground/validator/v10"
)

// Errors of strict JSON binding; their text is for the client.
var (
	errEmptyBody    = errors.New("the request body is empty; want a JSON object")
	errTrailingData = errors.New("the request body must be one JSON object with nothing after it")
)

// mediaTypeError refuses a body that is not sent as JSON (415).
type mediaTypeError struct{ got string }

func (e *mediaTypeError) Error() string {
	if e.got == "" {
		return "the request has no Content-Type; send the body as application/json"
	}
	return "the request body is " + e.got + "; send it as application/json"
}

// invalidRequest lists the fields of a bound request that broke a rule.
type invalidRequest struct{ errs []fieldError }

func (e *invalidRequest) Error() string { return "the request is invalid" }

// checker is a bound request with rules of its own beyond its binding
// tags; check lists the fields that break them.
type checker interface{ check() []fieldError }

// bindJSON binds a JSON body of at most maxBodyBytes into obj, strictly:
// the body must be sent as application/json (UTF-8), hold exactly one JSON
// value, and name no field obj does not have. Then obj's binding tags are
// validated, and its check, if it has one, runs. Lax decoding would let a
// client's typo ("ammount_cents") or a second object pass unnoticed, and
// two readers of one body (a proxy, the lock key, the handler) disagree
// about what it says.
func bindJSON(c *gin.Context, obj any) error {
	if err := checkJSONMediaType(c.GetHeader("Content-Type")); err != nil {
		return err
	}
	c.Request.Body = http.MaxBytesReader(c.Writer, c.Request.Body, maxBodyBytes)
	dec := json.NewDecoder(c.Request.Body)
	dec.DisallowUnknownFields()
	if err := dec.Decode(obj); err != nil {
		switch {
		case errors.Is(err, io.EOF):
			return errEmptyBody
		case strings.HasPrefix(err.Error(), `json: unknown field "`):
			name := strings.TrimSuffix(strings.TrimPrefix(err.Error(), `json: unknown field "`), `"`)
			return &invalidRequest{errs: []fieldError{{Field: name, Rule: "unknown"}}}
		}
		return err
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return err
		}
		return errTrailingData
	}
	if err := binding.Validator.ValidateStruct(obj); err != nil {
		var verrs validator.ValidationErrors
		if !errors.As(err, &verrs) {
			return err
		}
		invalid := &invalidRequest{}
		for _, fe := range verrs {
			invalid.errs = append(invalid.errs, fieldError{Field: fieldName(obj, fe.StructField()), Rule: fe.Tag(), Param: fe.Param()})
		}
		return invalid
	}
	if ch, ok := obj.(checker); ok {
		if errs := ch.check(); len(errs) > 0 {
			return &invalidRequest{errs: errs}
		}
	}
	return nil
}

// checkJSONMediaType accepts application/json, with no charset or UTF-8.
func checkJSONMediaType(ct string) error {
	mt, params, err := mime.ParseMediaType(ct)
	if err != nil || mt != "application/json" {
		return &mediaTypeError{got: mt}
	}
	if cs, ok := params["charset"]; ok && !strings.EqualFold(cs, "utf-8") {
		return &mediaTypeError{got: mt + " in " + cs}
	}
	return nil
}

// checkName lists what is wrong with a name a client gave (a customer):
// blank (empty or only spaces), or holding control or formatting
// characters (a newline that forges a log line, a bidi override that
// shows "alice" for another name).
func checkName(field, s string) []fieldError {
	switch {
	case strings.TrimSpace(s) == "":
		return []fieldError{{Field: field, Rule: "notblank"}}
	case strings.ContainsFunc(s, func(r rune) bool {
		return unicode.IsControl(r) || unicode.Is(unicode.Cf, r) || r == unicode.ReplacementChar
	}):
		return []fieldError{{Field: field, Rule: "printable"}}
	}
	return nil
}
