// Package who builds padlock.Options.Caller for every face: the part of a
// lock's owner that says who in the process took it. A Caller is fields,
// "name=value", joined by spaces, at most padlock.MaxOwnerLen bytes of the
// characters an owner may hold. A caller's identity goes in as a keyed
// hash (Hashed), and a lock key (a job's name) as a Redactor shows keys
// (Key), as the lock page and the logs do; what the code names (a route
// template, a function) goes in as it is (Field).
package who

import (
	"strings"

	"github.com/padlockgo/padlock"
	"github.com/padlockgo/padlock/lockkey"
)

// cutMark marks where Cut took bytes out.
const cutMark = ".."

// Field returns "name=value", with every byte of value that an owner may
// not hold percent-escaped ("%C3%A9" for "é"). name must be letters.
func Field(name, value string) string {
	clean := true
	for i := 0; i < len(value) && clean; i++ {
		clean = ownerByte(value[i])
	}
	if clean {
		return name + "=" + value
	}
	var b strings.Builder
	b.Grow(len(name) + 1 + len(value))
	b.WriteString(name)
	b.WriteByte('=')
	const hex = "0123456789ABCDEF"
	for i := 0; i < len(value); i++ {
		c := value[i]
		if ownerByte(c) {
			b.WriteByte(c)
			continue
		}
		b.WriteByte('%')
		b.WriteByte(hex[c>>4])
		b.WriteByte(hex[c&15])
	}
	return b.String()
}

// Hashed returns "name=#<hash>", the hash r.Hash(value): what a
// lockkey.Redactor shows of value, twelve hex digits that tell values
// apart without revealing them. A nil r uses the process's secret.
func Hashed(name, value string, r *lockkey.Redactor) string {
	return name + "=#" + r.Hash(value)
}

// Key returns "name=<key>" for a lock key (a job's name), as r shows
// keys: the key itself when its namespace is one r makes readable
// (lockkey.WithReadableNamespaces), else "name=#<hash>", the hash the
// lock page shows for the key when it redacts with r too.
func Key(name, key string, r *lockkey.Redactor) string {
	if k := r.Redact(key).Key; k != "" {
		return Field(name, k)
	}
	return Hashed(name, key, r)
}

// Request returns the Caller of a lock taken for an HTTP request:
// "route=<route> caller=#<hash>", route (a route template) as
// lockkey.EscapeRoute writes it, cut to fit, and caller (the caller's
// identity) hashed with r. An empty route or caller is left out.
func Request(route, caller string, r *lockkey.Redactor) string {
	rf, cf := "", ""
	if route != "" {
		rf = Field("route", lockkey.EscapeRoute(route))
	}
	if caller != "" {
		cf = Hashed("caller", caller, r)
	}
	return Join(rf, cf)
}

// Join returns the non-empty fields joined by spaces, the first cut in its
// middle (Cut) so that the whole fits in padlock.MaxOwnerLen. The fields
// after the first must fit with room to spare: they are never cut.
func Join(first string, rest ...string) string {
	room := padlock.MaxOwnerLen
	for _, f := range rest {
		if f != "" {
			room -= 1 + len(f)
		}
	}
	if room == padlock.MaxOwnerLen {
		return Cut(first, room) // one field: nothing to join
	}
	var b strings.Builder
	if first != "" {
		b.WriteString(Cut(first, room))
	}
	for _, f := range rest {
		if f == "" {
			continue
		}
		if b.Len() > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(f)
	}
	return b.String()
}

// Cut returns s when it has at most n bytes, or else its first and last
// bytes with ".." between them, n bytes in all: both ends of a route
// ("POST /merch..orders/<id>/refunds") or a function's name tell more
// than either alone.
func Cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	if n <= len(cutMark) {
		return s[:max(n, 0)]
	}
	head := (n - len(cutMark)) / 2
	tail := n - len(cutMark) - head
	return s[:head] + cutMark + s[len(s)-tail:]
}

// ownerByte reports whether an owner may hold c (padlock.OwnerChars).
func ownerByte(c byte) bool {
	switch {
	case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		return true
	}
	return strings.IndexByte(padlock.OwnerChars, c) >= 0
}
