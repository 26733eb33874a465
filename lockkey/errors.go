package lockkey

import (
	"errors"
	"fmt"
)

var (
	// ErrMissingPart reports that a key part is absent or empty. The
	// returned error names the part, for example
	// `lockkey: missing key part "path param id"`. From a request it means
	// a bad request (HTTP 400).
	ErrMissingPart = errors.New("lockkey: missing key part")

	// ErrAmbiguousPart reports that a key part has more than one value in
	// the request (a repeated query value or header, two JSON fields whose
	// names differ only in case). Taking either one could lock a different
	// resource than the handler works on, so the request is refused (HTTP
	// 400). The returned error names the part.
	ErrAmbiguousPart = errors.New("lockkey: ambiguous key part")

	// ErrInvalidPart reports that a key part's value is not what its Canon
	// says it is (not an integer, not a UUID, failing a validation tag), or,
	// with Strict, is not written in its canonical form. The returned error
	// names the part and the rule, never the value. It means a bad request
	// (HTTP 400).
	ErrInvalidPart = errors.New("lockkey: invalid key part")

	// ErrBodyTooLarge reports that the request body exceeds the limit set by
	// WithMaxBodyBytes (default DefaultMaxBodyBytes). It means HTTP 413.
	ErrBodyTooLarge = errors.New("lockkey: request body too large")

	// ErrMalformedBody reports that the request body could not be read or
	// parsed, or that a JSON field holds an object or array where a key part
	// needs a string, number or boolean. It means a bad request (HTTP 400).
	ErrMalformedBody = errors.New("lockkey: malformed request body")
)

func missing(part string) error {
	return fmt.Errorf("%w %q", ErrMissingPart, part)
}

// Missing returns an error matching ErrMissingPart that names part, for
// key funcs written outside this package.
func Missing(part string) error { return missing(part) }

func ambiguous(part string, n int) error {
	return fmt.Errorf("%w %q (%d values)", ErrAmbiguousPart, part, n)
}

func invalid(part, want string) error {
	return fmt.Errorf("%w %q (want %s)", ErrInvalidPart, part, want)
}

func tooLarge(limit int64) error {
	return fmt.Errorf("%w (limit %d bytes)", ErrBodyTooLarge, limit)
}

func malformed(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrMalformedBody, fmt.Sprintf(format, args...))
}
