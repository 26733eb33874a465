package lockkey

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/google/uuid"
	"golang.org/x/text/unicode/norm"
)

// A Canon says what a key part is, so that the key holds the value the
// handler reads, not the spelling the client sent. The handler of
// /orders/:id binds "13", "013", "+13" and " 13" as the same order 13;
// with Int(64) all four give the part "13", and one lock.
//
// Each Canon has two modes. By default it canonicalizes: every spelling of
// a value gives the value's canonical text. Strict refuses instead every
// spelling but the canonical one, with an error matching ErrInvalidPart
// (HTTP 400) that names the part. Either way, two spellings of one value
// never get two locks. A value that is not of the kind at all ("abc" for
// Int) is refused in both modes.
//
// The zero Canon is Text: any text, normalized to Unicode NFC.
//
// A Canon is a value; its methods return new ones and it is safe for
// concurrent use.
type Canon struct {
	kind   *kind // nil: text
	strict bool
	checks []check
}

// kind is what a Canon converts values to.
type kind struct {
	name string // said in errors: "want an int64"
	// text returns the canonical text of raw, or errNotKind (or the app's
	// error, for Func) when raw is not of the kind.
	text func(raw string) (canon string, err error)
	// json does the same for a JSON value, given as its literal (a string
	// still quoted), or is nil to take strings only, decoded, through text.
	json func(lit []byte) (canon string, err error)
	// value returns the typed value a validation tag sees for a canonical
	// text, or is nil for the text itself. Only validations need it, so
	// parts without any do not pay for boxing it.
	value func(canon string) any
}

// errNotKind is what a kind's func returns for a value of another kind.
var errNotKind = errors.New("lockkey: not of the kind")

type check struct {
	v   Validator
	tag string
}

// Validator validates a value against a tag. *validator.Validate of
// github.com/go-playground/validator/v10 is one (its Var method), and gin's
// binding validator engine is such a *validator.Validate.
type Validator interface {
	// Var validates field against tag, returning nil or an error
	// that says which rule failed.
	Var(field any, tag string) error
}

// Text is the Canon of a text part, and the zero Canon: the value is used
// as the handler reads it, normalized to Unicode NFC, so that "é" sent as
// U+00E9 and as "e" followed by U+0301 (NFD) give one key. Normalizing can
// only merge keys of values the handler might tell apart (if it compares
// bytes), never split one value in two, so it can only lock more than
// needed, never less. With Strict, text that is not in NFC is refused
// instead. In a JSON body, a number is written exactly in a canonical
// decimal form (see JSONPath) and true and false as such.
func Text() Canon { return Canon{} }

// Int is the Canon of a part the handler binds into a signed integer of
// bitSize bits (0 for int, 8, 16, 32 or 64), as gin's binding and
// strconv.ParseInt read it: surrounding spaces are ignored, a sign and
// leading zeros are allowed, so "013", "+13", " 13" and "13\n" are all
// "13", and "-0" is "0". A value out of range, or not an integer, is
// refused. In a JSON body the value must be a JSON number written as an
// integer (as encoding/json binds an integer field: 1e3, 13.0 and "13" are
// refused), read exactly, never through float64, so 9007199254740992
// (2^53) and 9007199254740993 are two keys. It panics on another bitSize.
func Int(bitSize int) Canon {
	name := intName("int", bitSize)
	parse := func(s string) (string, error) {
		n, err := strconv.ParseInt(s, 10, bitSize)
		if err != nil {
			return "", errNotKind
		}
		return strconv.FormatInt(n, 10), nil
	}
	return Canon{kind: &kind{
		name:  "an " + name,
		text:  func(raw string) (string, error) { return parse(strings.TrimSpace(raw)) },
		json:  func(lit []byte) (string, error) { return parse(string(lit)) },
		value: func(canon string) any { n, _ := strconv.ParseInt(canon, 10, 64); return n },
	}}
}

// Uint is Int for an unsigned integer of bitSize bits (0 for uint, 8, 16,
// 32 or 64), as strconv.ParseUint and so gin's binding read it: "013" and
// " 13" are "13", and any sign is refused ("+13", "-0"). It panics on
// another bitSize.
func Uint(bitSize int) Canon {
	name := intName("uint", bitSize)
	parse := func(s string) (string, error) {
		n, err := strconv.ParseUint(s, 10, bitSize)
		if err != nil {
			return "", errNotKind
		}
		return strconv.FormatUint(n, 10), nil
	}
	return Canon{kind: &kind{
		name:  "a " + name,
		text:  func(raw string) (string, error) { return parse(strings.TrimSpace(raw)) },
		json:  func(lit []byte) (string, error) { return parse(string(lit)) },
		value: func(canon string) any { n, _ := strconv.ParseUint(canon, 10, 64); return n },
	}}
}

func intName(prefix string, bitSize int) string {
	switch bitSize {
	case 0:
		return prefix
	case 8, 16, 32, 64:
		return prefix + strconv.Itoa(bitSize)
	}
	panic(fmt.Sprintf("lockkey: %s bit size %d, want 0, 8, 16, 32 or 64", prefix, bitSize))
}

// Float is the Canon of a part the handler binds into a float32 (bitSize
// 32) or float64 (bitSize 64), as strconv.ParseFloat reads it: every
// spelling of one floating-point value is one key, written as the shortest
// decimal that reads back as that value. So for Float(64), "0.1" and
// "0.1000000000000000055511151231257827" are one key (they are the same
// float64), as are 9007199254740992 and 9007199254740993; for Float(32),
// "0.1" and "0.10000000149011612" are. -0 is 0 (they compare equal). NaN
// and infinities are refused: they name no resource. In a JSON body the
// value must be a JSON number. It panics on another bitSize.
func Float(bitSize int) Canon {
	if bitSize != 32 && bitSize != 64 {
		panic(fmt.Sprintf("lockkey: float bit size %d, want 32 or 64", bitSize))
	}
	parse := func(s string) (string, error) {
		f, err := strconv.ParseFloat(s, bitSize)
		if err != nil || math.IsNaN(f) || math.IsInf(f, 0) {
			return "", errNotKind
		}
		if f == 0 {
			f = 0 // -0 is 0
		}
		return strconv.FormatFloat(f, 'g', -1, bitSize), nil
	}
	return Canon{kind: &kind{
		name:  "a float" + strconv.Itoa(bitSize),
		text:  func(raw string) (string, error) { return parse(strings.TrimSpace(raw)) },
		json:  func(lit []byte) (string, error) { return parse(string(lit)) },
		value: func(canon string) any { f, _ := strconv.ParseFloat(canon, bitSize); return f },
	}}
}

// UUID is the Canon of a UUID, in the forms github.com/google/uuid.Parse
// reads: 8-4-4-4-12 hex digits in either case, the same in braces or after
// "urn:uuid:", or 32 hex digits. The key holds the lower-case 8-4-4-4-12
// form. In a JSON body the value must be a string.
func UUID() Canon {
	return Canon{kind: &kind{name: "a UUID", text: parseUUID}}
}

// parseUUID reads raw with uuid.Parse, whose forms UUID documents, and
// returns the lower-case 8-4-4-4-12 form. uuid.Parse takes any first and
// last character for the braces: "(…)" is no UUID here.
func parseUUID(raw string) (string, error) {
	if len(raw) == 36+2 && (raw[0] != '{' || raw[37] != '}') {
		return "", errNotKind
	}
	u, err := uuid.Parse(raw)
	if err != nil {
		return "", errNotKind
	}
	return u.String(), nil
}

// Func is the Canon of a kind of the app's own: fn returns the canonical
// text of a raw value (an order number "A-013" read as "A-13"), or an
// error for a value that is not of the kind. name says what the kind is in
// errors ("want an order number"). Such an error is refused as
// ErrInvalidPart, with fn's error wrapped too: its message reaches the
// client in the 400, so it should not echo secrets. In a JSON body fn gets
// a string decoded, and a number or boolean as its JSON text. An empty
// result is a missing part. It panics if name is empty or fn is nil.
func Func(name string, fn func(raw string) (string, error)) Canon {
	if name == "" {
		panic("lockkey: Func: empty name")
	}
	if fn == nil {
		panic("lockkey: Func: nil fn")
	}
	return Canon{kind: &kind{
		name: name,
		text: fn,
		json: func(lit []byte) (string, error) {
			if lit[0] == '"' {
				s, err := unquote(lit)
				if err != nil {
					return "", err
				}
				return fn(s)
			}
			return fn(string(lit))
		},
	}}
}

// Strict returns c refusing every spelling of a value but its canonical
// one: with Int(64), "13" is taken and "013", "+13" and " 13" are refused
// with ErrInvalidPart (HTTP 400) naming the part, where c alone would read
// them as 13. Use it when clients are expected to send canonical values
// and anything else is more likely an attack or a bug than a spelling.
func (c Canon) Strict() Canon {
	c.strict = true
	return c
}

// Validate returns c checking the value, after canonicalization, against
// a validator v10 tag such as "required,uuid4" or "gt=0,lte=1000000" with
// v: a value that fails is refused with ErrInvalidPart naming the part and
// the tag. Typed Canons validate the typed value (an int64 for Int(64), so
// "max=20" bounds the number); Text validates the string (so "max=20"
// bounds its length). Pass the validator the handler's binding uses (gin's
// is binding.Validator.Engine()), so custom validations apply alike. It
// panics if v is nil or tag is empty.
func (c Canon) Validate(v Validator, tag string) Canon {
	if v == nil {
		panic("lockkey: Canon.Validate: nil Validator")
	}
	if tag == "" {
		panic("lockkey: Canon.Validate: empty tag")
	}
	c.checks = append(c.checks[:len(c.checks):len(c.checks)], check{v, tag})
	return c
}

// String says what c takes, as errors do: "text", "an int64 in
// canonical form", and so on.
func (c Canon) String() string {
	s := "text"
	if c.kind != nil {
		s = c.kind.name
	} else if c.strict {
		s = "text in Unicode NFC"
	}
	if c.strict && c.kind != nil {
		s += " in canonical form"
	}
	return s
}

// Part returns the key part for the raw value of the part named part (as
// errors name it: "path param id"): canonical and escaped. An empty raw is
// an error matching ErrMissingPart; a raw value c refuses, one matching
// ErrInvalidPart.
func (c Canon) Part(part, raw string) (string, error) {
	if raw == "" {
		return "", missing(part)
	}
	canon := raw
	if c.kind == nil {
		if !norm.NFC.IsNormalString(raw) {
			canon = norm.NFC.String(raw)
		}
	} else {
		var err error
		if canon, err = c.kind.text(raw); err != nil {
			return "", c.refused(part, err)
		}
	}
	return c.finish(part, raw, canon)
}

// One returns the key part for the values a request holds for the part
// named part: exactly one non-empty value, given to Part. More than one is
// an error matching ErrAmbiguousPart, none or an empty one matching
// ErrMissingPart.
func (c Canon) One(part string, vals []string) (string, error) {
	switch {
	case len(vals) > 1:
		return "", ambiguous(part, len(vals))
	case len(vals) == 0:
		return "", missing(part)
	}
	return c.Part(part, vals[0])
}

// jsonPart is Part for a JSON value given as its literal.
func (c Canon) jsonPart(part string, lit []byte) (string, error) {
	isString := lit[0] == '"'
	var s string
	if isString {
		var err error
		if s, err = unquote(lit); err != nil {
			return "", malformed("%v", err)
		}
		if s == "" {
			return "", missing(part)
		}
	}
	switch {
	case c.kind == nil:
		if isString {
			return c.Part(part, s)
		}
		canon := string(lit)
		if lit[0] != 't' && lit[0] != 'f' {
			var err error
			if canon, err = canonicalNumber(lit); err != nil {
				return "", err
			}
		}
		return c.finish(part, string(lit), canon)
	case c.kind.json == nil:
		if !isString {
			return "", invalid(part, c.String()+" as a JSON string")
		}
		return c.Part(part, s)
	}
	canon, err := c.kind.json(lit)
	if err != nil {
		return "", c.refused(part, err)
	}
	return c.finish(part, string(lit), canon)
}

func (c Canon) refused(part string, err error) error {
	if err == errNotKind {
		return invalid(part, c.String())
	}
	return fmt.Errorf("%w: %w", invalid(part, c.String()), err)
}

// finish applies strictness and validations to a canonical value and
// escapes it.
func (c Canon) finish(part, raw, canon string) (string, error) {
	if canon == "" {
		return "", missing(part)
	}
	if c.strict && canon != raw {
		return "", invalid(part, c.String())
	}
	for _, ch := range c.checks {
		var v any = canon
		if c.kind != nil && c.kind.value != nil {
			v = c.kind.value(canon)
		}
		if ch.v.Var(v, ch.tag) != nil {
			return "", invalid(part, fmt.Sprintf("%s passing %q", c.String(), ch.tag))
		}
	}
	return Escape(canon), nil
}
