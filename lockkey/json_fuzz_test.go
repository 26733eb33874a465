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

// FuzzJSON checks the JSON field reader against encoding/json: it never
// panics, it fails only with the package's errors, and a string it finds is
// the one encoding/json finds at the same path.
func FuzzJSON(f *testing.F) {
	f.Add(`{"id":"1"}`, "id")
	f.Add(`{"order":{"items":[{"sku":"a\"}"},{"sku":"b"}]}}`, "order.items.1.sku")
	f.Add(`{"ID":2,"x":[[],{}],"id":3}`, "id")
	f.Add(`[1,"2",{"a":null}]`, "2.a")
	f.Add(`{"n":-1.50e+2}`, "n")
	f.Fuzz(func(t *testing.T, body, path string) {
		if path == "" || strings.HasPrefix(path, ".") || strings.HasSuffix(path, ".") || strings.Contains(path, "..") {
			return
		}
		field, err := lockkey.NewJSONField(path, lockkey.Text())
		if err != nil {
			t.Fatalf("NewJSONField(%q): %v", path, err)
		}
		got, err := field.Part([]byte(body))
		if err != nil {
			if !errors.Is(err, lockkey.ErrMissingPart) && !errors.Is(err, lockkey.ErrAmbiguousPart) &&
				!errors.Is(err, lockkey.ErrMalformedBody) {
				t.Fatalf("got error %v, want a lockkey error", err)
			}
			return
		}
		if !json.Valid([]byte(body)) {
			t.Fatalf("got key %q from invalid JSON", got)
		}
		dec := json.NewDecoder(strings.NewReader(body))
		dec.UseNumber()
		var v any
		if dec.Decode(&v) != nil {
			return
		}
		for _, seg := range strings.Split(path, ".") {
			switch x := v.(type) {
			case map[string]any:
				var found any
				for k, val := range x {
					if strings.EqualFold(k, seg) {
						found = val
					}
				}
				v = found
			case []any:
				i, err := strconv.Atoi(seg)
				if err != nil || i < 0 || i >= len(x) {
					t.Fatalf("got key %q, want missing: no element %q", got, seg)
				}
				v = x[i]
			default:
				t.Fatalf("got key %q, want missing: %q is not in a container", got, seg)
			}
		}
		if s, ok := v.(string); ok && lockkey.Escape(norm.NFC.String(s)) != got {
			t.Fatalf("got key %q, want %q", got, lockkey.Escape(norm.NFC.String(s)))
		}
	})
}
