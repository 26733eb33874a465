package lockkey

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"
)

// JSONField reads one field of a JSON body as a key part. Its path is
// dotted: "id", "order.id", and an array index is a number,
// "items.0.sku". Field names match case-insensitively, as encoding/json
// binds them to struct fields; an object holding two fields that both match
// ("id" and "ID") is an error matching ErrAmbiguousPart, because the handler
// might bind the other one.
//
// The value goes through the field's Canon. With Text (the zero Canon),
// strings are used as encoding/json decodes them (so as the handler sees
// them: invalid UTF-8 becomes U+FFFD), normalized to NFC; true and false
// as such; and numbers exactly, never through float64, in one canonical
// form so that equal numbers give equal keys: 12345678901234567891 stays
// so, 1e3 and 1000.0 become 1000, 0.50 becomes 0.5, and a number beyond
// 100 digits is written with an exponent. Int, Uint and Float read numbers
// as the bound Go type does (see each). A missing field, null or "" is
// missing; an object or array is an error matching ErrMalformedBody.
type JSONField struct {
	part  string
	segs  [][]byte
	canon Canon
}

// NewJSONField returns the JSONField at path, read with c. The part is
// named "json field <path>" in errors. An empty path, or one with an empty
// segment, is an error.
func NewJSONField(path string, c Canon) (JSONField, error) {
	if path == "" {
		return JSONField{}, errors.New("empty path")
	}
	p := JSONField{part: "json field " + path, canon: c}
	for _, s := range strings.Split(path, ".") {
		if s == "" {
			return JSONField{}, fmt.Errorf("path %q has an empty segment", path)
		}
		p.segs = append(p.segs, []byte(s))
	}
	return p, nil
}

// Part returns the key part the field holds in body, canonical and
// escaped. A missing field is an error matching ErrMissingPart, two
// fields that both match ErrAmbiguousPart, a value its Canon refuses
// ErrInvalidPart, and a body that is not JSON, or an object or array at
// the path, ErrMalformedBody.
func (p JSONField) Part(body []byte) (string, error) { return p.lookup(body) }

// lookup finds the value at p in body and returns it escaped.
func (p JSONField) lookup(body []byte) (string, error) {
	if len(bytes.TrimSpace(body)) == 0 {
		return "", missing(p.part)
	}
	if !json.Valid(body) {
		// Let the decoder say where it went wrong.
		var v any
		err := json.Unmarshal(body, &v)
		return "", malformed("%v", err)
	}
	i := skipSpace(body, 0)
	for n, seg := range p.segs {
		var ok bool
		var err error
		switch body[i] {
		case '{':
			i, ok, err = field(body, i, seg)
		case '[':
			i, ok = element(body, i, seg)
		}
		if err != nil {
			return "", fmt.Errorf("%w %q (field %q given twice)", ErrAmbiguousPart, p.part, p.segs[n])
		}
		if !ok {
			return "", missing(p.part)
		}
	}
	end := skipValue(body, i)
	v := body[i:end]
	switch v[0] {
	case 'n':
		return "", missing(p.part)
	case '{', '[':
		return "", malformed("%s is an object or array, want a string, number or boolean", p.part)
	}
	return p.canon.jsonPart(p.part, v)
}

var errDuplicate = errors.New("duplicate field")

// field scans the object starting at body[i] for a member named like seg,
// case-insensitively, and returns the start of its value. Two matching
// members are errDuplicate.
func field(body []byte, i int, seg []byte) (int, bool, error) {
	found, at := false, 0
	i = skipSpace(body, i+1)
	for body[i] != '}' {
		end := skipValue(body, i) // the member name
		name := body[i+1 : end-1]
		if bytes.IndexByte(name, '\\') >= 0 {
			s, _ := unquote(body[i:end])
			name = []byte(s)
		}
		i = skipSpace(body, skipSpace(body, end)+1) // past ':'
		if bytes.EqualFold(name, seg) {
			if found {
				return 0, false, errDuplicate
			}
			found, at = true, i
		}
		i = skipSpace(body, skipValue(body, i))
		if body[i] == ',' {
			i = skipSpace(body, i+1)
		}
	}
	return at, found, nil
}

// element returns the start of the array element at the decimal index seg.
func element(body []byte, i int, seg []byte) (int, bool) {
	idx, err := strconv.Atoi(string(seg))
	if err != nil || idx < 0 || seg[0] == '+' {
		return 0, false
	}
	i = skipSpace(body, i+1)
	for n := 0; body[i] != ']'; n++ {
		if n == idx {
			return i, true
		}
		i = skipSpace(body, skipValue(body, i))
		if body[i] == ',' {
			i = skipSpace(body, i+1)
		}
	}
	return 0, false
}

func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

// skipValue returns the index just past the value starting at b[i].
// b must be valid JSON.
func skipValue(b []byte, i int) int {
	switch b[i] {
	case '"':
		for i++; b[i] != '"'; i++ {
			if b[i] == '\\' {
				i++
			}
		}
		return i + 1
	case '{', '[':
		depth := 0
		for ; i < len(b); i++ {
			switch b[i] {
			case '"':
				i = skipValue(b, i) - 1
			case '{', '[':
				depth++
			case '}', ']':
				if depth--; depth == 0 {
					return i + 1
				}
			}
		}
		return i
	}
	for i < len(b) {
		switch b[i] {
		case ',', '}', ']', ' ', '\t', '\n', '\r':
			return i
		}
		i++
	}
	return i
}

// unquote decodes a JSON string as encoding/json does, and so as the
// handler will see it: escapes resolved, invalid UTF-8 replaced with U+FFFD.
func unquote(v []byte) (string, error) {
	if bytes.IndexByte(v, '\\') < 0 && utf8.Valid(v) {
		return string(v[1 : len(v)-1]), nil
	}
	var s string
	err := json.Unmarshal(v, &s)
	return s, err
}

// maxPlainDigits bounds how many digits canonicalNumber writes out without
// an exponent, so "1e999999" cannot become a megabyte of zeros.
const maxPlainDigits = 100

// canonicalNumber rewrites a JSON number so that equal values give equal
// strings: an integer in decimal ("1000" for 1e3 and 1000.0), a fraction as
// a decimal without trailing zeros ("0.5"), and a value that would need more
// than maxPlainDigits digits as digits, "e" and an exponent ("5e200"). The
// three forms differ in whether they hold '.' or 'e', and within each form
// the digits determine the value, so different values never meet.
func canonicalNumber(v []byte) (string, error) {
	neg := v[0] == '-'
	if neg {
		v = v[1:]
	}
	if isDigits(v) && (v[0] != '0' || len(v) == 1) && len(v) <= maxPlainDigits {
		// Plain integer: the common case, kept as it is.
		if len(v) == 1 && v[0] == '0' {
			return "0", nil
		}
		if neg {
			return "-" + string(v), nil
		}
		return string(v), nil
	}
	mant, exp := v, []byte(nil)
	if k := bytes.IndexAny(v, "eE"); k >= 0 {
		mant, exp = v[:k], v[k+1:]
	}
	intPart, frac := mant, []byte(nil)
	if k := bytes.IndexByte(mant, '.'); k >= 0 {
		intPart, frac = mant[:k], mant[k+1:]
	}
	e := 0
	if len(exp) > 0 {
		expNeg := exp[0] == '-'
		if exp[0] == '-' || exp[0] == '+' {
			exp = exp[1:]
		}
		exp = bytes.TrimLeft(exp, "0")
		if len(exp) > 6 {
			return "", malformed("number %q out of range", v)
		}
		if len(exp) > 0 {
			e, _ = strconv.Atoi(string(exp))
		}
		if expNeg {
			e = -e
		}
	}
	digits := make([]byte, 0, len(intPart)+len(frac))
	digits = append(append(digits, intPart...), frac...)
	e -= len(frac)
	digits = bytes.TrimLeft(digits, "0")
	if len(digits) == 0 {
		return "0", nil
	}
	for len(digits) > 0 && digits[len(digits)-1] == '0' {
		digits = digits[:len(digits)-1]
		e++
	}
	var b []byte
	if neg {
		b = append(b, '-')
	}
	n := len(digits)
	switch {
	case e >= 0 && n+e <= maxPlainDigits:
		b = append(b, digits...)
		b = append(b, bytes.Repeat([]byte{'0'}, e)...)
	case e < 0 && -e < n:
		b = append(b, digits[:n+e]...)
		b = append(b, '.')
		b = append(b, digits[n+e:]...)
	case e < 0 && -e <= maxPlainDigits:
		b = append(b, '0', '.')
		b = append(b, bytes.Repeat([]byte{'0'}, -e-n)...)
		b = append(b, digits...)
	default:
		b = append(b, digits...)
		b = append(b, 'e')
		b = strconv.AppendInt(b, int64(e), 10)
	}
	return string(b), nil
}

func isDigits(b []byte) bool {
	if len(b) == 0 {
		return false
	}
	for _, c := range b {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}
