package keyfunc

import (
	"errors"
	"fmt"
)

var (
	// ErrMissingPart reports that a key part is absent from the request or
	// empty. The returned error names the part, for example
	// `keyfunc: missing key part "path param id"`. It means a bad request
	// (HTTP 400).
	ErrMissingPart = errors.New("keyfunc: missing key part")

	// ErrAmbiguousPart reports that a key part has more than one value in
	// the request (a repeated query value or header, two JSON fields whose
	// names differ only in case). Taking either one could lock a different
	// resource than the handler works on, so the request is refused (HTTP
	// 400). The returned error names the part.
	ErrAmbiguousPart = errors.New("keyfunc: ambiguous key part")

	// ErrBodyTooLarge reports that the request body exceeds the limit set by
	// MaxBodyBytes (default DefaultMaxBodyBytes). It means HTTP 413.
	ErrBodyTooLarge = errors.New("keyfunc: request body too large")

	// ErrMalformedBody reports that the request body could not be read or
	// parsed, or that a JSON field holds an object or array where a key part
	// needs a string, number or boolean. It means a bad request (HTTP 400).
	ErrMalformedBody = errors.New("keyfunc: malformed request body")
)

func missing(part string) error {
	return fmt.Errorf("%w %q", ErrMissingPart, part)
}

func ambiguous(part string, n int) error {
	return fmt.Errorf("%w %q (%d values)", ErrAmbiguousPart, part, n)
}

func tooLarge(limit int64) error {
	return fmt.Errorf("%w (limit %d bytes)", ErrBodyTooLarge, limit)
}

func malformed(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrMalformedBody, fmt.Sprintf(format, args...))
}

// one returns the single non-empty value of a part, escaped.
func one(part string, vals []string) (string, error) {
	switch {
	case len(vals) > 1:
		return "", ambiguous(part, len(vals))
	case len(vals) == 0 || vals[0] == "":
		return "", missing(part)
	}
	return Escape(vals[0]), nil
}
