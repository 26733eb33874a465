package lockkey

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"
	"sync"

	"github.com/padlockgo/padlock/internal/keyattr"
)

// Lock keys carry request data (order ids, job names, idempotency keys), so
// whatever shows them to people (a log, the lock page, an admin endpoint)
// shows a redacted form instead: the key's namespace and a short hash that
// tells keys apart. A plain hash of a key is no redaction: "order:1" or
// "job:nightly-report" falls to anyone who hashes a list of likely keys and
// compares. So the hash is keyed (HMAC-SHA-256) with a secret the reader
// does not have.

// MinRedactSecret is the shortest secret WithRedactSecret accepts, in
// bytes.
const MinRedactSecret = 16

// Redactor shows lock keys without revealing them: each key as its
// namespace (the part before its first ':', see Redacted) and RedactedHash,
// an HMAC-SHA-256 of the key under a secret, so that whoever reads a
// redacted key cannot find the key by hashing guesses. Keys in the
// namespaces the operator allowlisted (WithReadableNamespaces) are shown
// as they are too.
//
// The zero Redactor, and a nil *Redactor, use the process's secret: random,
// made when first needed, the same for every Redactor without a secret of
// its own in this process, so a key has one hash in its logs and its pages;
// but hashes then differ between processes and across restarts. Give every
// instance of a service the same secret (WithRedactSecret) to compare
// hashes across them.
//
// A Redactor is safe for concurrent use. padlockslog and lockview take one
// as an option.
type Redactor struct {
	secret   []byte          // nil: the process's
	readable map[string]bool // namespaces shown as they are
}

// A RedactOption configures NewRedactor.
type RedactOption func(*Redactor) error

// WithRedactSecret sets the HMAC secret: at least MinRedactSecret bytes,
// from crypto/rand or a secret store, kept as secret as the keys it hides
// (whoever has it can test guesses again). Default: the process's random
// secret (see Redactor).
func WithRedactSecret(secret []byte) RedactOption {
	return func(r *Redactor) error {
		if len(secret) < MinRedactSecret {
			return fmt.Errorf("lockkey: NewRedactor: WithRedactSecret: %d bytes, want at least %d", len(secret), MinRedactSecret)
		}
		r.secret = append([]byte(nil), secret...)
		return nil
	}
}

// WithReadableNamespaces shows the keys of the namespaces ns as they are
// (Redacted.Key), for namespaces whose keys hold nothing secret ("job" for
// job names chosen by the operator). A namespace is matched exactly as
// Redacted.Namespace reads it (a route namespace "/orders/$id/pay" as
// lockkey.EscapeRoute writes it): non-empty, at most 64 bytes, with no ':'.
// Default: none, every key is redacted.
func WithReadableNamespaces(ns ...string) RedactOption {
	return func(r *Redactor) error {
		for _, n := range ns {
			if n == "" || len(n) > 64 || strings.Contains(n, Sep) {
				return fmt.Errorf("lockkey: NewRedactor: WithReadableNamespaces: %q, want 1 to 64 bytes without %q", n, Sep)
			}
			if r.readable == nil {
				r.readable = make(map[string]bool)
			}
			r.readable[n] = true
		}
		return nil
	}
}

// NewRedactor returns a Redactor configured by opts, or an error naming the
// option at fault.
func NewRedactor(opts ...RedactOption) (*Redactor, error) {
	r := &Redactor{}
	for i, o := range opts {
		if o == nil {
			return nil, fmt.Errorf("lockkey: NewRedactor: option %d is nil", i+1)
		}
		if err := o(r); err != nil {
			return nil, err
		}
	}
	return r, nil
}

// Redacted is a lock key as a Redactor shows it.
type Redacted struct {
	// Key is the key itself, only when its namespace is readable
	// (WithReadableNamespaces); "" otherwise.
	Key string
	// Namespace is the part of the key before its first ':' ("order" for
	// "order:42"), or "(none)" when the key has no ':' (or the part is
	// empty or longer than 64 bytes): such a key may be request data as a
	// whole.
	Namespace string
	// Hash is the first 12 hex digits of the key's HMAC-SHA-256 under the
	// Redactor's secret: one key, one hash, for one secret.
	Hash string
}

// Redact returns key as r shows it.
func (r *Redactor) Redact(key string) Redacted {
	v := Redacted{Namespace: keyattr.Namespace(key), Hash: r.Hash(key)}
	if r != nil && r.readable[v.Namespace] {
		v.Key = key
	}
	return v
}

// Hash returns Redacted.Hash of key.
func (r *Redactor) Hash(key string) string {
	secret := processSecret()
	if r != nil && r.secret != nil {
		secret = r.secret
	}
	m := hmac.New(sha256.New, secret)
	m.Write([]byte(key))
	return hex.EncodeToString(m.Sum(nil)[:6])
}

// processSecret is the secret of Redactors without one: made once per
// process, never changed.
var processSecret = sync.OnceValue(func() []byte {
	b := make([]byte, 32)
	_, _ = rand.Read(b) // crypto/rand.Read does not fail (it crashes the program instead)
	return b
})
