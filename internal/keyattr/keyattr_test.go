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

func TestHash(t *testing.T) {
	a, b := Hash("order:1"), Hash("order:2")
	if len(a) != 12 || a == b || a != Hash("order:1") {
		t.Errorf("got %q and %q, want 12 hex digits, stable, distinct", a, b)
	}
}
