package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"reflect"
	"strconv"
	"strings"

	"github.com/gin-gonic/gin"
	"github.com/go-playground/validator/v10"

	"github.com/padlockgo/padlock/httplock"
)

// problem is an RFC 9457 problem body: the middleware's, plus the fields
// that failed validation.
type problem struct {
	httplock.Problem
	Errors []fieldError `json:"errors,omitempty"`
}

// fieldError names one field of a request that failed validation and the
// rule it broke: a validator v10 tag (required, gt, iso4217, ...), or one
// of the app's own: "type" (Param names the JSON type wanted), "max" and
// "min" (an integer out of the range of its type, Param the bound), "unknown"
// (the route takes no such field), "duplicate" (the field is given twice),
// "case" (the field is spelled with other letter case than Param, its
// name), "notblank" and "printable" (no control or formatting
// characters).
type fieldError struct {
	Field string `json:"field"`
	Rule  string `json:"rule"`
	Param string `json:"param,omitempty"`
}

// statusTitle is the title of a problem with status: the status's name
// in RFC 9110, which renamed 413 ("Request Entity Too Large" in Go's
// http.StatusText) to Content Too Large.
func statusTitle(status int) string {
	if status == http.StatusRequestEntityTooLarge {
		return "Content Too Large"
	}
	return http.StatusText(status)
}

func newProblem(status int, detail string) *problem {
	return &problem{Problem: httplock.Problem{
		Type: "about:blank", Title: statusTitle(status), Status: status, Detail: detail,
	}}
}

// writeProblem aborts c with p as application/problem+json, the way the
// lock middleware answers too.
func writeProblem(c *gin.Context, p *problem) {
	writeProblemTo(c.Writer, c.Request, p)
	c.Abort()
}

// writeProblemTo writes p for r to w as application/problem+json.
func writeProblemTo(w http.ResponseWriter, r *http.Request, p *problem) {
	p.Instance = r.URL.Path
	if p.RetryAfter > 0 || p.Status == http.StatusConflict {
		// WriteProblem sets Retry-After; reuse it for the headers, then
		// write the extended body.
		httplock.WriteProblem(discardBody{w}, r, &p.Problem)
	} else {
		w.Header().Set("Content-Type", httplock.ProblemContentType)
		w.Header().Set("Cache-Control", "no-store")
	}
	body, _ := json.Marshal(p)
	w.WriteHeader(p.Status)
	_, _ = w.Write(body)
}

// discardBody lets WriteProblem set headers without writing a response.
type discardBody struct{ w http.ResponseWriter }

func (d discardBody) Header() http.Header         { return d.w.Header() }
func (d discardBody) Write(b []byte) (int, error) { return len(b), nil }
func (d discardBody) WriteHeader(int)             {}

// Where a request's bound values come from, as bindProblem tells the
// client.
const (
	fromPath  = "path"
	fromQuery = "query"
	fromBody  = "body"
)

// bindProblem turns an error of binding req (the struct bound) from the
// request's path, query or body (from) into a problem: 400 listing the
// fields at fault, 413 for a body too large, 415 for a body that is not
// JSON. Its details never carry Go type or struct names.
func bindProblem(err error, req any, from string) *problem {
	var (
		mbe     *http.MaxBytesError
		invalid *invalidRequest
		verrs   validator.ValidationErrors
		typeErr *json.UnmarshalTypeError
		synErr  *json.SyntaxError
		numErr  *strconv.NumError
		mtErr   *mediaTypeError
	)
	switch {
	case errors.As(err, &mbe):
		return newProblem(http.StatusRequestEntityTooLarge, fmt.Sprintf("the request body is larger than %d bytes", mbe.Limit))
	case errors.As(err, &mtErr):
		return newProblem(http.StatusUnsupportedMediaType, mtErr.Error())
	case errors.As(err, &invalid):
		p := newProblem(http.StatusBadRequest, "the request is invalid")
		p.Errors = invalid.errs
		return p
	case errors.As(err, &verrs):
		p := newProblem(http.StatusBadRequest, "the request is invalid")
		for _, fe := range verrs {
			p.Errors = append(p.Errors, fieldError{Field: fieldName(req, fe.StructField()), Rule: fe.Tag(), Param: fe.Param()})
		}
		return p
	case errors.As(err, &typeErr):
		if typeErr.Field == "" {
			return newProblem(http.StatusBadRequest, "the request body must be a JSON object")
		}
		p := newProblem(http.StatusBadRequest, "the request is invalid")
		p.Errors = []fieldError{{Field: typeErr.Field, Rule: "type", Param: jsonKind(typeErr.Type)}}
		if n, ok := strings.CutPrefix(typeErr.Value, "number "); ok {
			if fe, ok := outOfRange(typeErr.Field, n, typeErr.Type); ok {
				p.Errors = []fieldError{fe}
			}
		}
		return p
	case errors.As(err, &synErr):
		return newProblem(http.StatusBadRequest, fmt.Sprintf("the request body is not valid JSON: %s (at byte %d)", synErr.Error(), synErr.Offset))
	case errors.Is(err, io.ErrUnexpectedEOF):
		return newProblem(http.StatusBadRequest, "the request body is not valid JSON: it ends early")
	case errors.Is(err, errEmptyBody), errors.Is(err, errTrailingData):
		return newProblem(http.StatusBadRequest, strictError(err).Error())
	case errors.As(err, &numErr) && from != fromBody:
		p := newProblem(http.StatusBadRequest, "the request "+from+" is invalid")
		if f, ok := onlyField(req, from); ok {
			p.Errors = []fieldError{{Field: f.name, Rule: "type", Param: jsonKind(f.typ)}}
			if fe, ok := outOfRange(f.name, numErr.Num, f.typ); ok && errors.Is(numErr.Err, strconv.ErrRange) {
				p.Errors = []fieldError{fe}
			}
		}
		return p
	case from == fromBody:
		return newProblem(http.StatusBadRequest, "the request body could not be read")
	}
	return newProblem(http.StatusBadRequest, "the request "+from+" is invalid")
}

// strictError returns the one of errEmptyBody and errTrailingData that err
// matches, whose text is for the client.
func strictError(err error) error {
	if errors.Is(err, errEmptyBody) {
		return errEmptyBody
	}
	return errTrailingData
}

// outOfRange returns the rule an integer literal n broke when it is too
// large or too small for t, an integer type: "max" or "min", with the
// type's bound as Param. An integer out of range is an integer all the
// same, and "type" would tell the client to send what it sent.
func outOfRange(field, n string, t reflect.Type) (fieldError, bool) {
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t == nil || jsonKind(t) != "integer" {
		return fieldError{}, false
	}
	if _, err := strconv.ParseInt(n, 10, 64); err != nil && !errors.Is(err, strconv.ErrRange) {
		if _, err := strconv.ParseUint(n, 10, 64); err != nil && !errors.Is(err, strconv.ErrRange) {
			return fieldError{}, false // not an integer literal: 1.5, 1e3
		}
	}
	bits := t.Bits()
	switch {
	case strings.HasPrefix(n, "-") && t.Kind() >= reflect.Uint && t.Kind() <= reflect.Uint64:
		return fieldError{Field: field, Rule: "min", Param: "0"}, true
	case strings.HasPrefix(n, "-"):
		return fieldError{Field: field, Rule: "min", Param: strconv.FormatInt(-1<<(bits-1), 10)}, true
	case t.Kind() >= reflect.Uint && t.Kind() <= reflect.Uint64:
		return fieldError{Field: field, Rule: "max", Param: strconv.FormatUint(1<<bits-1, 10)}, true
	}
	return fieldError{Field: field, Rule: "max", Param: strconv.FormatInt(1<<(bits-1)-1, 10)}, true
}

// jsonKind names t as JSON does: integer, number, string, boolean,
// object or array.
func jsonKind(t reflect.Type) string {
	if t == nil {
		return "value"
	}
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "integer"
	case reflect.Float32, reflect.Float64:
		return "number"
	case reflect.String:
		return "string"
	case reflect.Bool:
		return "boolean"
	case reflect.Slice, reflect.Array:
		return "array"
	}
	return "object"
}

// tagged is a field of a request struct as the client names it.
type tagged struct {
	name string
	typ  reflect.Type
}

// onlyField returns the one field of req bound from the path ("uri" tag)
// or the query ("form" tag), when there is exactly one: a parse error from
// gin's binding does not say which field it was.
func onlyField(req any, from string) (tagged, bool) {
	tag := map[string]string{fromPath: "uri", fromQuery: "form"}[from]
	t := reflect.TypeOf(req)
	if t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	var found []tagged
	for i := range t.NumField() {
		f := t.Field(i)
		if name, _, _ := strings.Cut(f.Tag.Get(tag), ","); name != "" && name != "-" {
			found = append(found, tagged{name: name, typ: f.Type})
		}
	}
	if len(found) != 1 {
		return tagged{}, false
	}
	return found[0], true
}

// fieldName is the name the client used for req's Go field: its json, uri
// or form tag.
func fieldName(req any, goName string) string {
	t := reflect.TypeOf(req)
	if t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if f, ok := t.FieldByName(goName); ok {
		for _, tag := range []string{"json", "uri", "form"} {
			if name, _, _ := strings.Cut(f.Tag.Get(tag), ","); name != "" && name != "-" {
				return name
			}
		}
	}
	return goName
}
