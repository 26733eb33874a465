package idempotency

import (
	"errors"
	"fmt"
	"strings"
)

// Header fields of the middleware.
const (
	// KeyHeader is the request header that carries the key
	// (IETF draft-ietf-httpapi-idempotency-key-header).
	KeyHeader = "Idempotency-Key"

	// ReplayedHeader is set to "true" on a response replayed from
	// the stored record of an earlier request with the same key. The draft
	// names no such header; this is the one Stripe uses.
	ReplayedHeader = "Idempotent-Replayed"

	// ReplayableHeader is set to "false" on a response the
	// handler produced but that a retry with the same key will not get back:
	// a 5xx (a retry runs the handler again), a response larger than
	// WithMaxResponseBytes or flushed early (a retry gets 409), or one whose
	// record could not be written to Redis.
	ReplayableHeader = "Idempotent-Replayable"
)

// MaxKeyLen is the longest Idempotency-Key, in bytes after unquoting, that
// ParseKey accepts.
const MaxKeyLen = 255

// ErrInvalidKey reports an Idempotency-Key field that ParseKey rejects; the
// error says why. It means HTTP 400.
var ErrInvalidKey = errors.New("idempotency: invalid Idempotency-Key")

// ParseKey returns the key an Idempotency-Key field value
// carries. The draft makes the field a Structured Field (RFC 9651) Item whose
// value is a String, as in
//
//	Idempotency-Key: "8e03978e-40d5-43e8-bc93-6894a57f9324"
//
// Since many clients send the key unquoted, a bare token of the characters
// of an HTTP token plus ':', '/' and '=' (a UUID, a ULID, base64) is accepted
// too and means the same key. Parameters after the item (";a=1") are parsed
// and ignored, as RFC 9651 asks; leading and trailing spaces and tabs are
// ignored. The key must be 1 to MaxKeyLen bytes of printable
// ASCII (space included, within quotes). Any other field value is an error
// matching ErrInvalidKey that says what is wrong.
//
// The key is the client's opaque identifier of an operation: it is
// compared byte for byte, case included, and never normalized; being
// ASCII, it has no Unicode spellings to merge.
func ParseKey(field string) (string, error) {
	s := strings.Trim(field, " \t")
	if s == "" {
		return "", invalidKey("empty")
	}
	var key string
	var i int
	if s[0] == '"' {
		var err error
		if key, i, err = sfString(s); err != nil {
			return "", err
		}
	} else {
		for i < len(s) && isBareKeyChar(s[i]) {
			i++
		}
		if i == 0 {
			return "", invalidKey(fmt.Sprintf("unexpected %s at offset 0; quote the key", quoteByte(s[0])))
		}
		key = s[:i]
	}
	if err := skipParams(s, i); err != nil {
		return "", err
	}
	switch {
	case key == "":
		return "", invalidKey("empty")
	case len(key) > MaxKeyLen:
		return "", tooLong()
	}
	return key, nil
}

// sfString parses the sf-string at the start of s (RFC 9651, section
// 4.2.5) and returns its value and the offset after its closing quote.
func sfString(s string) (string, int, error) {
	var b strings.Builder
	start := 1 // the value so far is s[start:i] plus what b holds
	for i := 1; i < len(s); i++ {
		switch c := s[i]; {
		case c == '\\':
			if i+1 == len(s) || (s[i+1] != '"' && s[i+1] != '\\') {
				return "", 0, invalidKey(fmt.Sprintf("bad escape at offset %d; only \\\" and \\\\ are allowed", i))
			}
			b.WriteString(s[start:i])
			i++
			start = i
		case c == '"':
			if b.Len() == 0 {
				return s[start:i], i + 1, nil
			}
			b.WriteString(s[start:i])
			return b.String(), i + 1, nil
		case c < 0x20 || c > 0x7e:
			return "", 0, invalidKey(fmt.Sprintf("%s at offset %d; a key is printable ASCII", quoteByte(c), i))
		}
		if b.Len()+i+1-start > MaxKeyLen {
			// Stop early: the key is too long whatever follows.
			return "", 0, tooLong()
		}
	}
	return "", 0, invalidKey("missing closing quote")
}

// skipParams checks that s[i:] is a list of Structured Field parameters
// followed by nothing, and ignores them.
func skipParams(s string, i int) error {
	for i < len(s) {
		if s[i] != ';' {
			return invalidKey(fmt.Sprintf("unexpected %s at offset %d after the key", quoteByte(s[i]), i))
		}
		i++
		for i < len(s) && s[i] == ' ' {
			i++
		}
		start := i
		for i < len(s) && isParamKeyChar(s[i], i == start) {
			i++
		}
		if i == start {
			return invalidKey(fmt.Sprintf("bad parameter name at offset %d", start))
		}
		if i < len(s) && s[i] == '=' {
			i++
			switch {
			case i < len(s) && s[i] == '"':
				_, n, err := sfString(s[i:])
				if err != nil {
					return invalidKey(fmt.Sprintf("bad parameter value at offset %d", i))
				}
				i += n
			default:
				// A token, number, boolean (?1) or byte sequence (:...:),
				// checked only for its characters: it is ignored anyway.
				start := i
				for i < len(s) && (isBareKeyChar(s[i]) || s[i] == '?') {
					i++
				}
				if i == start {
					return invalidKey(fmt.Sprintf("bad parameter value at offset %d", start))
				}
			}
		}
	}
	return nil
}

// isBareKeyChar reports whether c may appear in an unquoted key: an HTTP
// tchar (RFC 9110), or ':', '/' or '=' (sf-token and base64 characters).
func isBareKeyChar(c byte) bool {
	switch {
	case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		return true
	}
	return strings.IndexByte("!#$%&'*+-.^_`|~:/=", c) >= 0
}

// isParamKeyChar reports whether c may appear in a parameter name, at its
// start when first.
func isParamKeyChar(c byte, first bool) bool {
	if ('a' <= c && c <= 'z') || c == '*' {
		return true
	}
	return !first && (('0' <= c && c <= '9') || c == '_' || c == '-' || c == '.')
}

func quoteByte(c byte) string {
	if c < 0x20 || c > 0x7e {
		return fmt.Sprintf("byte 0x%02X", c)
	}
	return fmt.Sprintf("%q", c)
}

func tooLong() error {
	return invalidKey(fmt.Sprintf("longer than %d bytes", MaxKeyLen))
}

func invalidKey(why string) error {
	return fmt.Errorf("%w: %s", ErrInvalidKey, why)
}
