package idempotency_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/padlockgo/padlock/idempotency"
)

func TestParseKey(t *testing.T) {
	long := strings.Repeat("k", idempotency.MaxKeyLen)
	tests := []struct {
		field   string
		want    string
		wantErr string // "" for no error
	}{
		// The draft's form: an sf-string.
		{`"8e03978e-40d5-43e8-bc93-6894a57f9324"`, "8e03978e-40d5-43e8-bc93-6894a57f9324", ""},
		{`"a b"`, "a b", ""},
		{`"say \"hi\" \\o/"`, `say "hi" \o/`, ""},
		{`  "k1"	`, "k1", ""},
		{`"k1";ttl=30;x;y="a;b";z=?1;w=:AQID:`, "k1", ""},
		{`"k1"; a=1`, "k1", ""},
		{`"` + long + `"`, long, ""},
		// Bare tokens, as many clients send them.
		{"8e03978e-40d5-43e8-bc93-6894a57f9324", "8e03978e-40d5-43e8-bc93-6894a57f9324", ""},
		{"01HZX3Q2Y8W4M5N6P7R8S9T0VA", "01HZX3Q2Y8W4M5N6P7R8S9T0VA", ""},
		{"aGVsbG8rd29ybGQ/Pw==", "aGVsbG8rd29ybGQ/Pw==", ""},
		{"order:42/pay", "order:42/pay", ""},
		{"k1;a=1", "k1", ""},
		{long, long, ""},

		{"", "", "empty"},
		{"   ", "", "empty"},
		{`""`, "", "empty"},
		{`"` + long + `k"`, "", "longer than 255 bytes"},
		{long + "k", "", "longer than 255 bytes"},
		{`"k1`, "", "missing closing quote"},
		{`"k\1"`, "", `bad escape at offset 2`},
		{`"k\`, "", `bad escape at offset 2`},
		{"\"caf\xc3\xa9\"", "", "byte 0xC3 at offset 4; a key is printable ASCII"},
		{"\"k\x01\"", "", "byte 0x01 at offset 2"},
		{"k 1", "", `unexpected ' ' at offset 1 after the key`},
		{`"k1" "k2"`, "", `unexpected ' ' at offset 4 after the key`},
		{`"k1", "k2"`, "", `unexpected ',' at offset 4 after the key`},
		{"k1,k2", "", `unexpected ',' at offset 2 after the key`},
		{`"k1";`, "", "bad parameter name at offset 5"},
		{`"k1";A=1`, "", "bad parameter name at offset 5"},
		{`"k1";a=`, "", "bad parameter value at offset 7"},
		{`"k1";a="x`, "", "bad parameter value at offset 7"},
		{`(k1)`, "", "unexpected '(' at offset 0; quote the key"},
		{"caf\xc3\xa9", "", "unexpected byte 0xC3 at offset 3 after the key"},
	}
	for _, tt := range tests {
		t.Run(tt.field, func(t *testing.T) {
			got, err := idempotency.ParseKey(tt.field)
			if tt.wantErr == "" {
				if err != nil || got != tt.want {
					t.Fatalf("got %q, %v, want %q, nil", got, err, tt.want)
				}
				return
			}
			if !errors.Is(err, idempotency.ErrInvalidKey) || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("got %q, %v, want an ErrInvalidKey error saying %q", got, err, tt.wantErr)
			}
		})
	}
}

// The parser never panics, accepts only keys of 1 to 255 printable ASCII
// bytes, and a key it accepts, written back as an sf-string, parses to
// itself.
func FuzzParseKey(f *testing.F) {
	for _, s := range []string{
		`"8e03978e-40d5-43e8-bc93-6894a57f9324"`, "8e03978e-40d5-43e8-bc93-6894a57f9324",
		`"say \"hi\" \\o/"`, `"k1";a=1;b="x";c`, "k1;a=?1", `""`, `"k1`, `"\`, "k 1",
		`"k1", "k2"`, "\"caf\xc3\xa9\"", strings.Repeat("k", 256), "\t\"k\" ",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, field string) {
		key, err := idempotency.ParseKey(field)
		if err != nil {
			if !errors.Is(err, idempotency.ErrInvalidKey) || key != "" {
				t.Fatalf("got %q, %v, want an ErrInvalidKey error and no key", key, err)
			}
			return
		}
		if len(key) < 1 || len(key) > idempotency.MaxKeyLen {
			t.Fatalf("got a key of %d bytes from %q, want 1..%d", len(key), field, idempotency.MaxKeyLen)
		}
		for i := 0; i < len(key); i++ {
			if key[i] < 0x20 || key[i] > 0x7e {
				t.Fatalf("got byte 0x%02X in key %q from %q, want printable ASCII", key[i], key, field)
			}
		}
		quoted := `"` + strings.NewReplacer(`\`, `\\`, `"`, `\"`).Replace(key) + `"`
		if again, err := idempotency.ParseKey(quoted); err != nil || again != key {
			t.Fatalf("got %q, %v from %s (re-quoted %q), want %q", again, err, quoted, field, key)
		}
	})
}
