package keyfunc

import (
	"fmt"
	"strings"

	"github.com/gin-gonic/gin"

	"github.com/padlockgo/padlock/lockkey"
)

// Template parses a readable key template once and returns the Func it
// describes. Text between "{" and "}" names a request part; everything else
// is kept as it is:
//
//	"order:{param.id}"                 path parameter id (Param)
//	"tenant:{header.X-Tenant}"         request header (Header)
//	"{query.page}", "{form.email}"     query value (Query), form field (Form)
//	"pay:{json.order.id}"              JSON body field, dotted path (JSON)
//	"user:{ctx.userID}"                value set with c.Set("userID", ...) (Value)
//	"{route}", "{ip}"                  route template (Route), client IP (ClientIP)
//
// A placeholder can say what its part is after '|', as a lockkey.Canon
// would: "order:{param.id|int64}" is Join(Const("order"), Param("id",
// lockkey.Int(64))). The kinds are text (the default), int, int8 to int64,
// uint, uint8 to uint64, float32, float64 and uuid; "|strict" after the
// kind refuses non-canonical spellings ("{param.id|int64|strict}").
//
// The template is a list of segments separated by lockkey.Sep, and a segment holds at
// most one placeholder, with fixed text around it if wanted ("v1-{param.id}");
// that keeps keys one-to-one, since two placeholders in a row could split
// their text either way. Fixed text may not contain '%', '#', '{', '}' or
// control bytes. opts apply to json and form placeholders.
//
// Template("order:{param.id}") builds the same keys as
// Join(Const("order"), Param("id", lockkey.Text())).
//
// A template that breaks these rules (an unknown placeholder or kind, two
// placeholders in one segment, a forbidden byte) is an error naming the
// template and the fault; MustTemplate panics with it instead.
func Template(tmpl string, opts ...lockkey.BodyOption) (Func, error) {
	fail := func(format string, args ...any) (Func, error) {
		return nil, fmt.Errorf("keyfunc: template %q: %s", tmpl, fmt.Sprintf(format, args...))
	}
	if tmpl == "" {
		return fail("empty")
	}
	bodyLimit("Template", opts) // validate options here, not per placeholder
	var pieces []piece
	var lit strings.Builder
	placeholderInSegment := false
	for i := 0; i < len(tmpl); i++ {
		switch ch := tmpl[i]; {
		case ch == ':':
			placeholderInSegment = false
			lit.WriteByte(ch)
		case ch == '{':
			end := strings.IndexByte(tmpl[i:], '}')
			if end < 0 {
				return fail("unclosed '{' at offset %d", i)
			}
			name := tmpl[i+1 : i+end]
			if placeholderInSegment {
				return fail("two placeholders in one segment at offset %d; separate them with %q", i, lockkey.Sep)
			}
			f, err := placeholder(name, opts)
			if err != nil {
				return fail("offset %d: %v", i, err)
			}
			if lit.Len() > 0 {
				pieces = append(pieces, piece{lit: lit.String()})
				lit.Reset()
			}
			pieces = append(pieces, piece{part: f})
			placeholderInSegment = true
			i += end
		case ch == '}':
			return fail("'}' without '{' at offset %d", i)
		case lockkey.Escape(tmpl[i:i+1]) != tmpl[i:i+1]:
			return fail("fixed text may not contain %q (offset %d)", ch, i)
		default:
			lit.WriteByte(ch)
		}
	}
	if lit.Len() > 0 {
		pieces = append(pieces, piece{lit: lit.String()})
	}
	if len(pieces) == 1 && pieces[0].part == nil {
		v := pieces[0].lit
		return func(*gin.Context) (string, error) { return v, nil }, nil
	}
	return func(c *gin.Context) (string, error) {
		var buf [8]string
		vals := buf[:0]
		size := 0
		for _, p := range pieces {
			v := p.lit
			if p.part != nil {
				var err error
				if v, err = p.part(c); err != nil {
					return "", err
				}
			}
			vals = append(vals, v)
			size += len(v)
		}
		var b strings.Builder
		b.Grow(size)
		for _, v := range vals {
			b.WriteString(v)
		}
		return b.String(), nil
	}, nil
}

// MustTemplate is like Template but panics if the template is invalid.
// It is meant for package-level and route setup code.
func MustTemplate(tmpl string, opts ...lockkey.BodyOption) Func {
	f, err := Template(tmpl, opts...)
	if err != nil {
		panic(err.Error())
	}
	return f
}

// piece is fixed text or a request part.
type piece struct {
	lit  string
	part Func
}

func placeholder(name string, opts []lockkey.BodyOption) (Func, error) {
	name, kindSpec, typed := strings.Cut(name, "|")
	c, err := templateCanon(kindSpec)
	if err != nil {
		return nil, err
	}
	src, arg, hasArg := strings.Cut(name, ".")
	if typed && (src == "route" || src == "ip" || src == "ctx") {
		return nil, fmt.Errorf("{%s} takes no kind", src)
	}
	switch src {
	case "route", "ip":
		if hasArg {
			return nil, fmt.Errorf("{%s} takes no name", src)
		}
		if src == "route" {
			return Route(), nil
		}
		return ClientIP(), nil
	case "param", "query", "header", "form", "json", "ctx":
	default:
		return nil, fmt.Errorf("unknown part %q, want param, query, header, form, json, ctx, route or ip", src)
	}
	if arg == "" {
		return nil, fmt.Errorf("{%s} needs a name, as in {%s.id}", src, src)
	}
	switch src {
	case "param":
		return Param(arg, c), nil
	case "query":
		return Query(arg, c), nil
	case "header":
		return Header(arg, c), nil
	case "form":
		return Form(arg, c, opts...), nil
	case "ctx":
		return Value(arg), nil
	}
	if strings.Contains(arg, "..") || strings.HasSuffix(arg, ".") {
		return nil, fmt.Errorf("json path %q has an empty segment", arg)
	}
	return JSON(arg, c, opts...), nil
}

// templateCanon reads the kind after '|' in a placeholder: "int64",
// "uuid|strict", or "" for text.
func templateCanon(spec string) (lockkey.Canon, error) {
	kind, mode, hasMode := strings.Cut(spec, "|")
	if hasMode && mode != "strict" {
		return lockkey.Canon{}, fmt.Errorf("unknown mode %q after the kind, want strict", mode)
	}
	var c lockkey.Canon
	switch kind {
	case "", "text":
		c = lockkey.Text()
	case "int", "int8", "int16", "int32", "int64":
		c = lockkey.Int(bits(kind, "int"))
	case "uint", "uint8", "uint16", "uint32", "uint64":
		c = lockkey.Uint(bits(kind, "uint"))
	case "float32":
		c = lockkey.Float(32)
	case "float64":
		c = lockkey.Float(64)
	case "uuid":
		c = lockkey.UUID()
	default:
		return c, fmt.Errorf("unknown kind %q, want text, int, int8 to int64, uint, uint8 to uint64, float32, float64 or uuid", kind)
	}
	if hasMode {
		c = c.Strict()
	}
	return c, nil
}

func bits(kind, prefix string) int {
	switch strings.TrimPrefix(kind, prefix) {
	case "8":
		return 8
	case "16":
		return 16
	case "32":
		return 32
	case "64":
		return 64
	}
	return 0
}
