// Package keyattr reads a lock key's namespace, which is safe to put in
// logs, metrics and pages. Lock keys are built from request data (ids,
// idempotency keys), so a raw key must not become a metric attribute
// (unbounded cardinality) and must not be shown to whoever reads a log or
// a page without the operator's consent; lockkey.Redactor is how keys are
// shown instead.
package keyattr

import (
	"strconv"
	"strings"
)

// NoNamespace is the namespace of a key that has no ':' to end one: such
// a key may be request data as a whole, so none of it is shown.
const NoNamespace = "(none)"

// Namespace returns the part of key before its first ':' ("order" for
// "order:42"), or NoNamespace when key has no ':' or the part is empty or
// longer than 64 bytes.
func Namespace(key string) string {
	i := strings.IndexByte(key, ':')
	if i <= 0 || i > 64 {
		return NoNamespace
	}
	return key[:i]
}

// Scrub returns msg, an error's text, with every occurrence of key (quoted
// as strconv.Quote writes it, or bare) replaced by shown: what a log or an
// answer may carry instead of a key built from request data. An empty key
// leaves msg as it is.
func Scrub(msg, key, shown string) string {
	if key == "" {
		return msg
	}
	msg = strings.ReplaceAll(msg, strconv.Quote(key), strconv.Quote(shown))
	return strings.ReplaceAll(msg, key, shown)
}
