package lockkey_test

import (
	"crypto/sha256"
	"encoding/hex"
	"strconv"
	"strings"
	"testing"

	"github.com/padlockgo/padlock/lockkey"
)

// plainHash is how keys used to be redacted: the first 12 hex digits of a
// plain SHA-256, which anyone can compute for a list of likely keys.
func plainHash(key string) string {
	h := sha256.Sum256([]byte(key))
	return hex.EncodeToString(h[:6])
}

// dictionary is an attacker's list of likely keys: every small order id,
// and the usual job names.
func dictionary() map[string]string {
	d := make(map[string]string)
	for i := range 10000 {
		k := "order:" + strconv.Itoa(i)
		d[plainHash(k)] = k
	}
	for _, j := range []string{"nightly-report", "reindex", "cleanup", "backup"} {
		d[plainHash("job:"+j)] = "job:" + j
	}
	return d
}

// A dictionary of plain SHA-256 hashes finds no redacted key, with the
// process's secret or a configured one; within one Redactor a key has one
// hash, and another secret gives another.
func TestRedactorResistsDictionary(t *testing.T) {
	withSecret, err := lockkey.NewRedactor(lockkey.WithRedactSecret([]byte("0123456789abcdef-deployment")))
	if err != nil {
		t.Fatal(err)
	}
	other, err := lockkey.NewRedactor(lockkey.WithRedactSecret([]byte("another deployment's secret")))
	if err != nil {
		t.Fatal(err)
	}
	dict := dictionary()
	for _, tc := range []struct {
		name string
		r    *lockkey.Redactor
	}{
		{"nil, the process's secret", nil},
		{"zero value", &lockkey.Redactor{}},
		{"configured secret", withSecret},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, k := range []string{"order:1", "order:42", "job:nightly-report"} {
				got := tc.r.Redact(k)
				if found, ok := dict[got.Hash]; ok {
					t.Errorf("%s: got hash %s, which the plain SHA-256 dictionary reverses to %q", k, got.Hash, found)
				}
				if again := tc.r.Redact(k); again != got {
					t.Errorf("%s: got %+v, then %+v, want one hash per key", k, got, again)
				}
				if got.Key != "" || len(got.Hash) != 12 {
					t.Errorf("%s: got %+v, want no key and a 12-digit hash", k, got)
				}
			}
		})
	}
	if (*lockkey.Redactor)(nil).Hash("order:1") != (&lockkey.Redactor{}).Hash("order:1") {
		t.Error("got different hashes from a nil and a zero Redactor, want the process's secret for both")
	}
	if withSecret.Hash("order:1") == other.Hash("order:1") || withSecret.Hash("order:1") == (*lockkey.Redactor)(nil).Hash("order:1") {
		t.Error("got one hash under two secrets, want the secret to key it")
	}
	if withSecret.Hash("order:1") == withSecret.Hash("order:2") {
		t.Error("got one hash for two keys, want them told apart")
	}
}

// Keys of an allowlisted namespace are shown as they are; others, and keys
// without a namespace, are not.
func TestRedactorReadableNamespaces(t *testing.T) {
	r, err := lockkey.NewRedactor(lockkey.WithReadableNamespaces("job"))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		key, wantKey, wantNS string
	}{
		{"job:nightly-report", "job:nightly-report", "job"},
		{"order:1", "", "order"},
		{"jobs:x", "", "jobs"},
		{"job", "", "(none)"},
	} {
		got := r.Redact(tc.key)
		if got.Key != tc.wantKey || got.Namespace != tc.wantNS || got.Hash != r.Hash(tc.key) {
			t.Errorf("Redact(%q): got %+v, want key %q, namespace %q and its hash", tc.key, got, tc.wantKey, tc.wantNS)
		}
	}
}

func TestNewRedactorInvalid(t *testing.T) {
	for _, tc := range []struct {
		name string
		opt  lockkey.RedactOption
		want string
	}{
		{"short secret", lockkey.WithRedactSecret([]byte("short")), "WithRedactSecret"},
		{"empty namespace", lockkey.WithReadableNamespaces(""), "WithReadableNamespaces"},
		{"namespace with colon", lockkey.WithReadableNamespaces("a:b"), "WithReadableNamespaces"},
		{"nil", nil, "option 1 is nil"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := lockkey.NewRedactor(tc.opt); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want an error naming %s", err, tc.want)
			}
		})
	}
}
