package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"mime"
	"net/http"
	"reflect"
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
// value, name no field obj does not have, name no member twice in one
// object, and spell field names exactly as obj's json tags do. Then obj's
// binding tags are validated, and its check, if it has one, runs. Lax
// decoding would let a client's typo ("ammount_cents") or a second object
// pass unnoticed, and two readers of one body (a proxy, the lock key, the
// handler, an audit log) disagree about what it says: encoding/json takes
// the last of two "currency" members where another reader takes the first,
// and binds "AMOUNT_CENTS" to amount_cents where another reader sees no
// amount at all.
func bindJSON(c *gin.Context, obj any) error {
	if err := checkJSONMediaType(c.GetHeader("Content-Type")); err != nil {
		return err
	}
	c.Request.Body = http.MaxBytesReader(c.Writer, c.Request.Body, maxBodyBytes)
	body, err := io.ReadAll(c.Request.Body)
	if err != nil {
		return err
	}
	dec := json.NewDecoder(bytes.NewReader(body))
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
		return errTrailingData
	}
	if errs := checkMembers(body, reflect.TypeOf(obj)); len(errs) > 0 {
		return &invalidRequest{errs: errs}
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

// checkMembers lists the members of body, one valid JSON value decoded
// into a value of type t, that encoding/json accepts but a strict reader
// refuses: a name given twice in one object ("duplicate"), and a name
// that matches a field of the struct it is decoded into only when case is
// ignored ("case", Param naming the field as spelled in its tag). Field
// names are dotted paths from the top ("order.id").
func checkMembers(body []byte, t reflect.Type) []fieldError {
	type frame struct {
		object  bool
		path    string          // of the object or array
		typ     reflect.Type    // what it is decoded into; nil: anything
		seen    map[string]bool // object: the names given so far
		wantKey bool            // object: a name comes next
		next    reflect.Type    // object: the type of the value after the name
		name    string          // object: the name of that value
	}
	var errs []fieldError
	var stack []*frame
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	for {
		tok, err := dec.Token()
		if err != nil {
			return errs // body decoded already: only its end comes here
		}
		var top *frame
		if len(stack) > 0 {
			top = stack[len(stack)-1]
		}
		if top != nil && top.object && top.wantKey {
			if tok == json.Delim('}') {
				stack = stack[:len(stack)-1]
			} else {
				name, _ := tok.(string)
				path := joinPath(top.path, name)
				if top.seen[name] {
					errs = append(errs, fieldError{Field: path, Rule: "duplicate"})
				}
				top.seen[name] = true
				field, exact := structField(top.typ, name)
				if field != "" && !exact {
					errs = append(errs, fieldError{Field: path, Rule: "case", Param: field})
				}
				top.next, top.name, top.wantKey = memberType(top.typ, field), name, false
				continue
			}
		} else {
			// A value: of the top level, an array element or a member.
			typ, path := t, ""
			if top != nil {
				typ, path = elemType(top.typ), top.path
				if top.object {
					typ, path = top.next, joinPath(top.path, top.name)
				}
			}
			typ = deref(typ)
			switch tok {
			case json.Delim('{'):
				stack = append(stack, &frame{object: true, path: path, typ: typ, seen: map[string]bool{}, wantKey: true})
				continue
			case json.Delim('['):
				stack = append(stack, &frame{path: path, typ: typ})
				continue
			case json.Delim(']'):
				stack = stack[:len(stack)-1]
			}
		}
		// A value ended: its object wants a name next.
		if len(stack) == 0 {
			return errs
		}
		if up := stack[len(stack)-1]; up.object {
			up.wantKey = true
		}
	}
}

func joinPath(path, name string) string {
	if path == "" {
		return name
	}
	return path + "." + name
}

func deref(t reflect.Type) reflect.Type {
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	return t
}

// elemType is the type of t's elements (a slice, array or map), or nil.
func elemType(t reflect.Type) reflect.Type {
	if t == nil {
		return nil
	}
	switch t.Kind() {
	case reflect.Slice, reflect.Array, reflect.Map:
		return t.Elem()
	}
	return nil
}

// structField returns the JSON name of the field of struct type t that
// encoding/json binds a member called name to, and whether name spells it
// exactly; "" when t is no struct or has no such field.
func structField(t reflect.Type, name string) (string, bool) {
	if t == nil || t.Kind() != reflect.Struct {
		return "", false
	}
	folded := ""
	for _, f := range reflect.VisibleFields(t) {
		if !f.IsExported() || f.Anonymous {
			continue
		}
		tag, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		switch {
		case tag == "-":
			continue
		case tag == "":
			tag = f.Name
		}
		if tag == name {
			return tag, true
		}
		if folded == "" && strings.EqualFold(tag, name) {
			folded = tag
		}
	}
	return folded, false
}

// memberType is the type of the field of struct type t named field in
// JSON, the element type of a map t, or nil.
func memberType(t reflect.Type, field string) reflect.Type {
	if t == nil {
		return nil
	}
	if t.Kind() == reflect.Map {
		return t.Elem()
	}
	if t.Kind() != reflect.Struct || field == "" {
		return nil
	}
	for _, f := range reflect.VisibleFields(t) {
		tag, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if tag == field || (tag == "" && f.Name == field) {
			return f.Type
		}
	}
	return nil
}
