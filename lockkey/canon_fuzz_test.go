package lockkey_test

import (
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/text/unicode/norm"

	"github.com/padlockgo/padlock/lockkey"
)

// FuzzCanon checks the canonical kinds against the readers a handler binds
// with: a text value gives the key of what strconv (gin's binding) reads
// from it, a JSON number the key of what encoding/json binds into the Go
// type, or both refuse; Strict takes exactly the canonical spellings; and
// Text is NFC and idempotent.
func FuzzCanon(f *testing.F) {
	for _, s := range []string{"13", "013", "+13", " 13", "13\n", "-0", "0.1", "0.1000000000000000055511151231257827",
		"9007199254740993", "1e3", "13.0", "NaN", "Inf", "0x1p-2", "1_000", "caf\u00e9", "cafe\u0301", "18446744073709551616"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		const part = "p"
		wantInvalid := func(err error, what string) {
			t.Helper()
			if !errors.Is(err, lockkey.ErrInvalidPart) && !(raw == "" && errors.Is(err, lockkey.ErrMissingPart)) {
				t.Fatalf("%s(%q): got %v, want ErrInvalidPart", what, raw, err)
			}
		}

		// Text: as strconv.ParseInt (gin's binding) reads it.
		got, err := lockkey.Int(64).Part(part, raw)
		if n, perr := strconv.ParseInt(strings.TrimSpace(raw), 10, 64); perr == nil {
			if err != nil || got != strconv.FormatInt(n, 10) {
				t.Fatalf("Int(64)(%q): got %q, %v; want %d", raw, got, err, n)
			}
			strict, serr := lockkey.Int(64).Strict().Part(part, raw)
			if (serr == nil) != (raw == got) || (serr == nil && strict != got) {
				t.Fatalf("Int(64).Strict()(%q): got %q, %v; canonical is %q", raw, strict, serr, got)
			}
		} else {
			wantInvalid(err, "Int(64)")
		}
		got, err = lockkey.Float(64).Part(part, raw)
		if fv, perr := strconv.ParseFloat(strings.TrimSpace(raw), 64); perr == nil && fv-fv == 0 {
			back, berr := strconv.ParseFloat(got, 64)
			if err != nil || berr != nil || back != fv {
				t.Fatalf("Float(64)(%q): got %q, %v; want a key that reads back as %v", raw, got, err, fv)
			}
		} else {
			wantInvalid(err, "Float(64)")
		}
		if got, err := lockkey.Text().Part(part, raw); raw != "" {
			again, _ := lockkey.Text().Part(part, norm.NFC.String(raw))
			if err != nil || got != lockkey.Escape(norm.NFC.String(raw)) || again != got {
				t.Fatalf("Text(%q): got %q, %v; want the escaped NFC form", raw, got, err)
			}
		}

		// JSON: as encoding/json binds the number into the Go type.
		body := []byte(`{"id":` + raw + `}`)
		if !json.Valid(body) {
			return
		}
		field := func(c lockkey.Canon) (string, error) {
			f, err := lockkey.NewJSONField("id", c)
			if err != nil {
				t.Fatal(err)
			}
			return f.Part(body)
		}
		var v struct {
			ID *int64 `json:"id"`
		}
		got, err = field(lockkey.Int(64))
		if json.Unmarshal(body, &v) == nil && v.ID != nil {
			if err != nil || got != strconv.FormatInt(*v.ID, 10) {
				t.Fatalf("JSON Int(64) %s: got %q, %v; want %d", body, got, err, *v.ID)
			}
		} else if err == nil {
			t.Fatalf("JSON Int(64) %s: got %q; want a refusal, as encoding/json refuses it", body, got)
		}
		var u struct {
			ID *uint64 `json:"id"`
		}
		got, err = field(lockkey.Uint(64))
		if json.Unmarshal(body, &u) == nil && u.ID != nil {
			if err != nil || got != strconv.FormatUint(*u.ID, 10) {
				t.Fatalf("JSON Uint(64) %s: got %q, %v; want %d", body, got, err, *u.ID)
			}
		} else if err == nil {
			t.Fatalf("JSON Uint(64) %s: got %q; want a refusal, as encoding/json refuses it", body, got)
		}
		var fl struct {
			ID *float64 `json:"id"`
		}
		got, err = field(lockkey.Float(64))
		if json.Unmarshal(body, &fl) == nil && fl.ID != nil {
			want := *fl.ID
			if want == 0 {
				want = 0
			}
			if err != nil || got != strconv.FormatFloat(want, 'g', -1, 64) {
				t.Fatalf("JSON Float(64) %s: got %q, %v; want %v", body, got, err, want)
			}
		} else if err == nil {
			t.Fatalf("JSON Float(64) %s: got %q; want a refusal, as encoding/json refuses it", body, got)
		}
	})
}
