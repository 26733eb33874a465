// Package keyattr turns lock keys into values that are safe to put in
// logs, metrics and pages: a key's namespace, and a short hash of it.
// Lock keys are built from request data (ids, idempotency keys), so a raw
// key must not become a metric attribute (unbounded cardinality) and must
// not be shown to whoever reads a log or a page without the operator's
// consent.
package keyattr

import (
	"crypto/sha256"
	"encoding/hex"
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

// Hash returns the first 12 hex digits of key's SHA-256: enough to tell
// keys apart in a log or a page, not enough to list them.
func Hash(key string) string {
	h := sha256.Sum256([]byte(key))
	return hex.EncodeToString(h[:6])
}
