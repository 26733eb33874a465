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
