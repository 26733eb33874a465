package who

import (
	"strings"
	"testing"

	"github.com/padlockgo/padlock"
	"github.com/padlockgo/padlock/lockkey"
)

func TestField(t *testing.T) {
	for _, tc := range []struct{ name, value, want string }{
		{"route", "POST /orders/<id>/pay", "route=POST /orders/<id>/pay"},
		{"route", "/orders/$id/pay", "route=/orders/$id/pay"},
		{"route", "/files/*path", "route=/files/%2Apath"},
		{"route", "/café", "route=/caf%C3%A9"},
		{"func", "a~b|c\"d", "func=a%7Eb%7Cc%22d"},
	} {
		if got := Field(tc.name, tc.value); got != tc.want {
			t.Errorf("Field(%q, %q): got %q, want %q", tc.name, tc.value, got, tc.want)
		}
	}
}

// A joined Caller always fits in an owner, whatever the first field's
// length, and keeps both ends of it.
func TestJoin(t *testing.T) {
	r, err := lockkey.NewRedactor(lockkey.WithRedactSecret([]byte("0123456789abcdef")))
	if err != nil {
		t.Fatal(err)
	}
	caller := Hashed("caller", "alice@example.com", r)
	if caller != "caller=#"+r.Hash("alice@example.com") || len(caller) != 20 {
		t.Fatalf("Hashed: got %q, want caller=# and 12 hex digits", caller)
	}
	for _, tc := range []struct {
		first string
		rest  []string
		want  string
	}{
		{"route=POST /orders/<id>/pay", []string{caller}, "route=POST /orders/<id>/pay " + caller},
		{"", []string{caller}, caller},
		{"route=/x", []string{"", caller}, "route=/x " + caller},
		{"route=POST /merchants/<merchant>/orders/<id>/refunds/<refund>", []string{caller},
			"route=POST /merchant..<id>/refunds/<refund> " + caller},
		{"func=" + strings.Repeat("a", 100) + ".Pay", nil, "func=" + strings.Repeat("a", 26) + ".." + strings.Repeat("a", 27) + ".Pay"},
	} {
		got := Join(tc.first, tc.rest...)
		if got != tc.want {
			t.Errorf("Join(%q, %q): got %q, want %q", tc.first, tc.rest, got, tc.want)
		}
		if len(got) > padlock.MaxOwnerLen {
			t.Errorf("Join(%q, %q) = %q: %d bytes, want at most %d", tc.first, tc.rest, got, len(got), padlock.MaxOwnerLen)
		}
		if err := (padlock.Options{Caller: got}).Validate(); err != nil {
			t.Errorf("Join(%q, %q) = %q: not a valid Caller: %v", tc.first, tc.rest, got, err)
		}
	}
}

func TestCut(t *testing.T) {
	for _, tc := range []struct {
		s    string
		n    int
		want string
	}{
		{"abcdef", 6, "abcdef"},
		{"abcdefgh", 6, "ab..gh"},
		{"abcdefgh", 7, "ab..fgh"},
		{"abcdefgh", 2, "ab"},
		{"abcdefgh", -1, ""},
	} {
		if got := Cut(tc.s, tc.n); got != tc.want {
			t.Errorf("Cut(%q, %d): got %q, want %q", tc.s, tc.n, got, tc.want)
		}
	}
}

func TestKey(t *testing.T) {
	r, err := lockkey.NewRedactor(lockkey.WithReadableNamespaces("job"))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		key  string
		r    *lockkey.Redactor
		want string
	}{
		{"job:nightly-report", r, "job=job:nightly-report"},
		{"report:hourly", r, "job=#" + r.Hash("report:hourly")},
		{"job:nightly-report", nil, "job=#" + (*lockkey.Redactor)(nil).Hash("job:nightly-report")},
	} {
		if got := Key("job", tc.key, tc.r); got != tc.want {
			t.Errorf("Key(%q): got %q, want %q", tc.key, got, tc.want)
		}
	}
}

func TestRequest(t *testing.T) {
	var r *lockkey.Redactor
	h := r.Hash("alice")
	for _, tc := range []struct{ route, caller, want string }{
		{"POST /orders/{id}/pay", "alice", "route=POST /orders/<id>/pay caller=#" + h},
		{"/orders/:id/pay", "", "route=/orders/$id/pay"},
		{"", "alice", "caller=#" + h},
		{"", "", ""},
	} {
		if got := Request(tc.route, tc.caller, r); got != tc.want {
			t.Errorf("Request(%q, %q): got %q, want %q", tc.route, tc.caller, got, tc.want)
		}
	}
}
