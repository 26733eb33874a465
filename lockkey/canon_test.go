package lockkey_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/go-playground/validator/v10"

	"github.com/padlockgo/padlock/lockkey"
)

// spell is one raw spelling of a part and what it must give.
type spell struct {
	raw     string
	want    string // the escaped part; "" when an error is wanted
	wantErr error
}

func checkSpellings(t *testing.T, c lockkey.Canon, tests []spell) {
	t.Helper()
	for _, tt := range tests {
		got, err := c.Part("path param id", tt.raw)
		if tt.wantErr != nil {
			if !errors.Is(err, tt.wantErr) || !strings.Contains(err.Error(), `"path param id"`) {
				t.Errorf("%v: Part(%q): got %q, %v; want an error matching %v naming the part", c, tt.raw, got, err, tt.wantErr)
			}
			continue
		}
		if err != nil || got != tt.want {
			t.Errorf("%v: Part(%q): got %q, %v; want %q", c, tt.raw, got, err, tt.want)
		}
	}
}

func TestCanonText(t *testing.T) {
	nfc, nfd := "caf\u00e9", "cafe\u0301"
	checkSpellings(t, lockkey.Text(), []spell{
		{raw: "13", want: "13"},
		{raw: "013", want: "013"}, // text is text: the handler reads "013"
		{raw: nfc, want: nfc},
		{raw: nfd, want: nfc},
		{raw: "a:b", want: "a%3Ab"},
		{raw: "", wantErr: lockkey.ErrMissingPart},
	})
	checkSpellings(t, lockkey.Text().Strict(), []spell{
		{raw: nfc, want: nfc},
		{raw: nfd, wantErr: lockkey.ErrInvalidPart},
	})
}

func TestCanonInt(t *testing.T) {
	same := []string{"13", "013", "+13", " 13", "13\n", "0000013"}
	var tests []spell
	for _, s := range same {
		tests = append(tests, spell{raw: s, want: "13"})
	}
	tests = append(tests,
		spell{raw: "-0", want: "0"},
		spell{raw: "-13", want: "-13"},
		spell{raw: "9007199254740992", want: "9007199254740992"},
		spell{raw: "9007199254740993", want: "9007199254740993"},
		spell{raw: "9223372036854775807", want: "9223372036854775807"},
		spell{raw: "9223372036854775808", wantErr: lockkey.ErrInvalidPart},
		spell{raw: "1e3", wantErr: lockkey.ErrInvalidPart},
		spell{raw: "13.0", wantErr: lockkey.ErrInvalidPart},
		spell{raw: "abc", wantErr: lockkey.ErrInvalidPart},
		spell{raw: "1 3", wantErr: lockkey.ErrInvalidPart},
		spell{raw: "", wantErr: lockkey.ErrMissingPart},
	)
	checkSpellings(t, lockkey.Int(64), tests)
	checkSpellings(t, lockkey.Int(8), []spell{{raw: "127", want: "127"}, {raw: "128", wantErr: lockkey.ErrInvalidPart}})

	strict := []spell{{raw: "13", want: "13"}, {raw: "-13", want: "-13"}}
	for _, s := range same[1:] {
		strict = append(strict, spell{raw: s, wantErr: lockkey.ErrInvalidPart})
	}
	strict = append(strict, spell{raw: "-0", wantErr: lockkey.ErrInvalidPart})
	checkSpellings(t, lockkey.Int(64).Strict(), strict)

	checkSpellings(t, lockkey.Uint(64), []spell{
		{raw: "013", want: "13"},
		{raw: "+13", wantErr: lockkey.ErrInvalidPart}, // strconv.ParseUint, so gin's binding, refuses it
		{raw: "18446744073709551615", want: "18446744073709551615"},
		{raw: "-1", wantErr: lockkey.ErrInvalidPart},
		{raw: "-0", wantErr: lockkey.ErrInvalidPart},
	})
}

func TestCanonFloat(t *testing.T) {
	checkSpellings(t, lockkey.Float(64), []spell{
		{raw: "0.1", want: "0.1"},
		{raw: "0.1000000000000000055511151231257827", want: "0.1"},
		{raw: "1e-1", want: "0.1"},
		{raw: "9007199254740993", want: "9.007199254740992e+15"},
		{raw: "9007199254740992", want: "9.007199254740992e+15"},
		{raw: "-0", want: "0"},
		{raw: "13.0", want: "13"},
		{raw: "NaN", wantErr: lockkey.ErrInvalidPart},
		{raw: "Inf", wantErr: lockkey.ErrInvalidPart},
		{raw: "1e400", wantErr: lockkey.ErrInvalidPart},
	})
	checkSpellings(t, lockkey.Float(32), []spell{
		{raw: "0.1", want: "0.1"},
		{raw: "0.10000000149011612", want: "0.1"},
		{raw: "0.1000000000000000055511151231257827", want: "0.1"},
	})
	checkSpellings(t, lockkey.Float(64).Strict(), []spell{
		{raw: "0.1", want: "0.1"},
		{raw: "0.1000000000000000055511151231257827", wantErr: lockkey.ErrInvalidPart},
	})
}

func TestCanonUUID(t *testing.T) {
	const want = "6ba7b810-9dad-11d1-80b4-00c04fd430c8"
	checkSpellings(t, lockkey.UUID(), []spell{
		{raw: want, want: want},
		{raw: strings.ToUpper(want), want: want},
		{raw: "{" + want + "}", want: want},
		{raw: "urn:uuid:" + want, want: want},
		{raw: strings.ReplaceAll(want, "-", ""), want: want},
		{raw: "URN:UUID:" + strings.ToUpper(want), want: want},
		{raw: " " + want, wantErr: lockkey.ErrInvalidPart},
		{raw: "{" + want + ")", wantErr: lockkey.ErrInvalidPart},
		{raw: "urn:uuid:{" + want + "}", wantErr: lockkey.ErrInvalidPart},
		{raw: want[:35], wantErr: lockkey.ErrInvalidPart},
		{raw: strings.Replace(want, "-", "_", 1), wantErr: lockkey.ErrInvalidPart},
		{raw: strings.Replace(want, "6", "g", 1), wantErr: lockkey.ErrInvalidPart},
	})
	checkSpellings(t, lockkey.UUID().Strict(), []spell{
		{raw: want, want: want},
		{raw: strings.ToUpper(want), wantErr: lockkey.ErrInvalidPart},
	})
}

func TestCanonValidate(t *testing.T) {
	v := validator.New()
	checkSpellings(t, lockkey.Text().Validate(v, "required,uuid4"), []spell{
		{raw: "0b8e8a5c-54a4-4e0a-9f43-3b0e2a8c1d2f", want: "0b8e8a5c-54a4-4e0a-9f43-3b0e2a8c1d2f"},
		{raw: "0B8E8A5C-54A4-4E0A-9F43-3B0E2A8C1D2F", wantErr: lockkey.ErrInvalidPart},
		{raw: "13", wantErr: lockkey.ErrInvalidPart},
	})
	checkSpellings(t, lockkey.Text().Validate(v, "numeric,max=20"), []spell{
		{raw: "13", want: "13"},
		{raw: "13a", wantErr: lockkey.ErrInvalidPart},
		{raw: strings.Repeat("1", 21), wantErr: lockkey.ErrInvalidPart},
	})
	// On a typed Canon the tag sees the number: max=20 bounds the value.
	checkSpellings(t, lockkey.Int(64).Validate(v, "gt=0,max=20"), []spell{
		{raw: "013", want: "13"},
		{raw: "21", wantErr: lockkey.ErrInvalidPart},
		{raw: "0", wantErr: lockkey.ErrInvalidPart},
	})
}

func TestCanonFunc(t *testing.T) {
	sku := lockkey.Func("a SKU", func(raw string) (string, error) {
		s := strings.ToUpper(strings.TrimSpace(raw))
		if !strings.HasPrefix(s, "SKU-") {
			return "", errors.New("want SKU-...")
		}
		return s, nil
	})
	checkSpellings(t, sku, []spell{
		{raw: "sku-7", want: "SKU-7"},
		{raw: " SKU-7 ", want: "SKU-7"},
		{raw: "7", wantErr: lockkey.ErrInvalidPart},
	})
	checkSpellings(t, sku.Strict(), []spell{
		{raw: "SKU-7", want: "SKU-7"},
		{raw: "sku-7", wantErr: lockkey.ErrInvalidPart},
	})
}

// JSON numbers are read as the bound Go type reads them: exactly for
// integers, as the float for floats.
func TestCanonJSON(t *testing.T) {
	tests := []struct {
		canon   lockkey.Canon
		body    string
		want    string
		wantErr error
	}{
		{lockkey.Int(64), `{"id":13}`, "13", nil},
		{lockkey.Int(64), `{"id":-0}`, "0", nil},
		{lockkey.Int(64), `{"id":9007199254740992}`, "9007199254740992", nil},
		{lockkey.Int(64), `{"id":9007199254740993}`, "9007199254740993", nil},
		{lockkey.Uint(64), `{"id":18446744073709551615}`, "18446744073709551615", nil},
		{lockkey.Int(64), `{"id":13.0}`, "", lockkey.ErrInvalidPart},
		{lockkey.Int(64), `{"id":1.3e1}`, "", lockkey.ErrInvalidPart},
		{lockkey.Int(64), `{"id":"13"}`, "", lockkey.ErrInvalidPart},
		{lockkey.Int(64), `{"id":true}`, "", lockkey.ErrInvalidPart},
		{lockkey.Int(64), `{"id":9223372036854775808}`, "", lockkey.ErrInvalidPart},
		{lockkey.Int(64).Strict(), `{"id":-0}`, "", lockkey.ErrInvalidPart},
		{lockkey.Float(64), `{"id":0.1}`, "0.1", nil},
		{lockkey.Float(64), `{"id":0.1000000000000000055511151231257827}`, "0.1", nil},
		{lockkey.Float(64), `{"id":1e-1}`, "0.1", nil},
		{lockkey.Float(64), `{"id":9007199254740993}`, "9.007199254740992e+15", nil},
		{lockkey.Float(64), `{"id":1e400}`, "", lockkey.ErrInvalidPart},
		{lockkey.Float(64), `{"id":"0.1"}`, "", lockkey.ErrInvalidPart},
		{lockkey.Text(), `{"id":"caf\u00e9"}`, "caf\u00e9", nil},
		{lockkey.Text(), `{"id":"cafe\u0301"}`, "caf\u00e9", nil},
		{lockkey.Text(), "{\"id\":\"cafe\u0301\"}", "caf\u00e9", nil}, // NFD as bytes
		{lockkey.Text(), "{\"id\":\"caf\u00e9\"}", "caf\u00e9", nil},
		{lockkey.Text().Strict(), `{"id":"cafe\u0301"}`, "", lockkey.ErrInvalidPart},
		{lockkey.Text().Strict(), `{"id":"caf\u00e9"}`, "caf\u00e9", nil},
		{lockkey.Text(), `{"id":9007199254740993}`, "9007199254740993", nil},
		{lockkey.Text(), `{"id":1e3}`, "1000", nil},
		{lockkey.Text().Strict(), `{"id":1e3}`, "", lockkey.ErrInvalidPart},
		{lockkey.UUID(), `{"id":"6BA7B810-9DAD-11D1-80B4-00C04FD430C8"}`, "6ba7b810-9dad-11d1-80b4-00c04fd430c8", nil},
		{lockkey.UUID(), `{"id":13}`, "", lockkey.ErrInvalidPart},
		{lockkey.Int(64), `{"id":null}`, "", lockkey.ErrMissingPart},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%v %s", tt.canon, tt.body), func(t *testing.T) {
			f, err := lockkey.NewJSONField("id", tt.canon)
			if err != nil {
				t.Fatal(err)
			}
			got, err := f.Part([]byte(tt.body))
			if tt.wantErr != nil {
				if !errors.Is(err, tt.wantErr) || !strings.Contains(err.Error(), `"json field id"`) {
					t.Fatalf("got %q, %v; want an error matching %v naming the part", got, err, tt.wantErr)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("got %q, %v; want %q", got, err, tt.want)
			}
		})
	}
}

// The error says what the part should be, never the value the client sent.
func TestCanonErrorText(t *testing.T) {
	_, err := lockkey.Int(64).Strict().Part("path param id", "0013")
	if got, want := err.Error(), `lockkey: invalid key part "path param id" (want an int64 in canonical form)`; got != want {
		t.Fatalf("got %q, want %q", got, want)
	}
	_, err = lockkey.Int(64).Validate(validator.New(), "max=20").Part("query n", "99")
	if got, want := err.Error(), `lockkey: invalid key part "query n" (want an int64 passing "max=20")`; got != want {
		t.Fatalf("got %q, want %q", got, want)
	}
}

func TestCanonPanics(t *testing.T) {
	tests := []struct {
		name string
		fn   func()
	}{
		{"Int 7", func() { lockkey.Int(7) }},
		{"Uint 128", func() { lockkey.Uint(128) }},
		{"Float 16", func() { lockkey.Float(16) }},
		{"Func empty name", func() { lockkey.Func("", func(s string) (string, error) { return s, nil }) }},
		{"Func nil", func() { lockkey.Func("x", nil) }},
		{"Validate nil", func() { lockkey.Text().Validate(nil, "max=1") }},
		{"Validate empty tag", func() { lockkey.Text().Validate(validator.New(), "") }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			defer func() {
				if recover() == nil {
					t.Fatal("got no panic, want one")
				}
			}()
			tt.fn()
		})
	}
}

// One key for every spelling of order 13, or a refusal, as the app picks.
func ExampleInt() {
	for _, raw := range []string{"13", "013", "+13", " 13", "13\n", "abc"} {
		canonical, err1 := lockkey.Int(64).Part("path param id", raw)
		strict, err2 := lockkey.Int(64).Strict().Part("path param id", raw)
		fmt.Printf("%q: %q %v | %q %v\n", raw, canonical, err1 != nil, strict, err2 != nil)
	}
	// Output:
	// "13": "13" false | "13" false
	// "013": "13" false | "" true
	// "+13": "13" false | "" true
	// " 13": "13" false | "" true
	// "13\n": "13" false | "" true
	// "abc": "" true | "" true
}
