package main

import (
	"encoding/json"
	"errors"
	"net/http"
	"reflect"
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
// rule it broke (a validator v10 tag: required, gt, iso4217, ...).
type fieldError struct {
	Field string `json:"field"`
	Rule  string `json:"rule"`
	Param string `json:"param,omitempty"`
}

func newProblem(status int, detail string) *problem {
	return &problem{Problem: httplock.Problem{
		Type: "about:blank", Title: http.StatusText(status), Status: status, Detail: detail,
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

// bindProblem turns a gin binding error for req (the struct bound) into a
// 400 (or 413) problem that lists the fields at fault.
func bindProblem(err error, req any) *problem {
	var mbe *http.MaxBytesError
	if errors.As(err, &mbe) {
		return newProblem(http.StatusRequestEntityTooLarge, "the request body is too large")
	}
	var verrs validator.ValidationErrors
	if errors.As(err, &verrs) {
		p := newProblem(http.StatusBadRequest, "the request is invalid")
		for _, fe := range verrs {
			p.Errors = append(p.Errors, fieldError{Field: fieldName(req, fe.StructField()), Rule: fe.Tag(), Param: fe.Param()})
		}
		return p
	}
	return newProblem(http.StatusBadRequest, "the request body is not valid JSON: "+err.Error())
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
