package lockkey

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"
	"unicode/utf8"
)

// Sep separates the parts of a key.
const Sep = ":"

// MaxKeyLen is the longest key, in bytes, that Shorten leaves as it is.
const MaxKeyLen = 200

// hashedPrefixLen is how much of a long key Shorten keeps readable:
// MaxKeyLen minus ":#" and 64 hex digits.
const hashedPrefixLen = MaxKeyLen - 2 - sha256.Size*2

const hexDigits = "0123456789ABCDEF"

// mustEscape reports whether Escape rewrites byte b: the escape byte itself,
// the separator, Cluster hash tag braces, the hashed-key marker and ASCII
// control bytes.
func mustEscape(b byte) bool {
	switch b {
	case '%', ':', '{', '}', '#', 0x7f:
		return true
	}
	return b < 0x20
}

// Escape encodes one key part: each of '%', ':', '{', '}', '#' and the ASCII
// control bytes becomes '%' and two upper-case hex digits; every other byte,
// including UTF-8 text, is kept. The encoding is one-to-one, and its result
// never contains Sep, so parts joined by Sep can always be told apart.
// Escape returns s itself when nothing needs escaping.
func Escape(s string) string {
	n := 0
	for i := 0; i < len(s); i++ {
		if mustEscape(s[i]) {
			n++
		}
	}
	if n == 0 {
		return s
	}
	b := make([]byte, 0, len(s)+2*n)
	for i := 0; i < len(s); i++ {
		if c := s[i]; mustEscape(c) {
			b = append(b, '%', hexDigits[c>>4], hexDigits[c&15])
		} else {
			b = append(b, c)
		}
	}
	return string(b)
}

// EscapeRoute encodes a route template as one key part, like Escape but
// keeping it readable: ':' (a gin parameter) becomes '$', and '{' and '}'
// (an http.ServeMux wildcard) become '<' and '>', so "/orders/:id/pay" is
// "/orders/$id/pay" and "POST /orders/{id}" is "POST /orders/<id>". Literal
// '$', '<' and '>' are percent-escaped, as is everything Escape escapes, so
// the encoding stays one-to-one and never contains Sep. Route parts and the
// middlewares' namespaces use it.
func EscapeRoute(route string) string {
	n := 0
	for i := 0; i < len(route); i++ {
		switch c := route[i]; {
		case c == ':' || c == '{' || c == '}':
			n++
		case c == '$' || c == '<' || c == '>' || mustEscape(c):
			n += 3
		}
	}
	if n == 0 {
		return route
	}
	b := make([]byte, 0, len(route)+2*n)
	for i := 0; i < len(route); i++ {
		switch c := route[i]; {
		case c == ':':
			b = append(b, '$')
		case c == '{':
			b = append(b, '<')
		case c == '}':
			b = append(b, '>')
		case c == '$' || c == '<' || c == '>' || mustEscape(c):
			b = append(b, '%', hexDigits[c>>4], hexDigits[c&15])
		default:
			b = append(b, c)
		}
	}
	return string(b)
}

// Join escapes each raw part and joins them with Sep, for code that builds
// keys outside a request (a worker, a decorated function):
//
//	lockkey.Join("order", id) // "order:42"
//
// The parts are taken exactly as given, byte for byte, so different lists
// of parts always give different keys; values that may come spelled in
// several ways (request text) belong through a Canon first. Every part must
// be non-empty; an empty one, or no part at all, is an error matching
// ErrMissingPart. Join does not shorten; see Shorten.
func Join(parts ...string) (string, error) {
	if len(parts) == 0 {
		return "", missing("part 1")
	}
	n := len(parts) - 1
	for i, p := range parts {
		if p == "" {
			return "", missing(fmt.Sprintf("part %d", i+1))
		}
		n += len(p)
	}
	var b strings.Builder
	b.Grow(n)
	for i, p := range parts {
		if i > 0 {
			b.WriteString(Sep)
		}
		b.WriteString(Escape(p))
	}
	return b.String(), nil
}

// Shorten returns key unchanged when it is at most MaxKeyLen bytes long.
// A longer key becomes a readable prefix of it, then ":#", then the hex
// SHA-256 of the whole key, at most MaxKeyLen bytes in all. The prefix is
// cut before an escape or a UTF-8 sequence it would split.
//
// Escaped parts never contain '#', so a hashed key can only equal another
// hashed key, and only if their SHA-256 sums collide.
func Shorten(key string) string {
	if len(key) <= MaxKeyLen {
		return key
	}
	cut := hashedPrefixLen
	for cut > 0 && !utf8.RuneStart(key[cut]) {
		cut--
	}
	switch {
	case cut >= 1 && key[cut-1] == '%':
		cut--
	case cut >= 2 && key[cut-2] == '%':
		cut -= 2
	}
	sum := sha256.Sum256([]byte(key))
	b := make([]byte, cut+2+hex.EncodedLen(len(sum)))
	copy(b, key[:cut])
	copy(b[cut:], ":#")
	hex.Encode(b[cut+2:], sum[:])
	return string(b)
}
