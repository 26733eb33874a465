package keyattr

import "testing"

func TestNamespace(t *testing.T) {
	for _, tc := range []struct{ key, want string }{
		{"order:42", "order"},
		{"idempotency:/orders:alice:k1", "idempotency"},
		{"plain-secret-token", NoNamespace},
		{":x", NoNamespace},
		{string(make([]byte, 65)) + ":x", NoNamespace},
	} {
		if got := Namespace(tc.key); got != tc.want {
			t.Errorf("Namespace(%q): got %q, want %q", tc.key, got, tc.want)
		}
	}
}

func TestScrub(t *testing.T) {
	const key = `POST /reports:tok_"live"`
	for _, tc := range []struct{ msg, want string }{
		{`padlock: not acquired: key "POST /reports:tok_\"live\"" is held`, `padlock: not acquired: key "POST /reports:…" is held`},
		{"lost " + key + " twice: " + key, "lost POST /reports:… twice: POST /reports:…"},
		{"nothing of it", "nothing of it"},
	} {
		if got := Scrub(tc.msg, key, "POST /reports:…"); got != tc.want {
			t.Errorf("Scrub(%q): got %q, want %q", tc.msg, got, tc.want)
		}
	}
	if got := Scrub("a b", "", "x"); got != "a b" {
		t.Errorf("Scrub with an empty key: got %q, want the text as it is", got)
	}
}
