package lockkey_test

import (
	"bytes"
	"encoding/hex"
	"errors"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/padlockgo/padlock/lockkey"
)

func TestEscape(t *testing.T) {
	tests := []struct{ in, want string }{
		{"", ""},
		{"plain-42_é", "plain-42_é"},
		{"1:pay", "1%3Apay"},
		{"{tag}", "%7Btag%7D"},
		{"100%", "100%25"},
		{"#1", "%231"},
		{"a\nb\x00\x7f", "a%0Ab%00%7F"},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			if got := lockkey.Escape(tt.in); got != tt.want {
				t.Fatalf("got %q, want %q", got, tt.want)
			}
			if got := unescape(t, lockkey.Escape(tt.in)); got != tt.in {
				t.Fatalf("round trip: got %q, want %q", got, tt.in)
			}
		})
	}
}

func TestEscapeRoute(t *testing.T) {
	tests := []struct{ in, want string }{
		{"/orders/:id/pay", "/orders/$id/pay"},
		{"/files/*path", "/files/*path"},
		{"POST /orders/{id}/pay", "POST /orders/<id>/pay"},
		{"/a/$x/<y>", "/a/%24x/%3Cy%3E"},
		{"100%#\n", "100%25%23%0A"},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			if got := lockkey.EscapeRoute(tt.in); got != tt.want {
				t.Fatalf("got %q, want %q", got, tt.want)
			}
		})
	}
}

// FuzzEscapeRoute checks EscapeRoute is one-to-one and never yields Sep,
// braces or '#', by decoding its result back.
func FuzzEscapeRoute(f *testing.F) {
	for _, s := range []string{"/orders/:id/pay", "POST /o/{id}", "/$x<y>", "%3A", "a:b{c}d#"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, route string) {
		got := lockkey.EscapeRoute(route)
		if strings.ContainsAny(got, ":{}#") {
			t.Fatalf("EscapeRoute(%q) = %q, want no ':', '{', '}' or '#'", route, got)
		}
		r := strings.NewReplacer("$", ":", "<", "{", ">", "}").Replace(got)
		if back := unescape(t, r); back != route {
			t.Fatalf("EscapeRoute(%q) = %q decodes to %q", route, got, back)
		}
	})
}

// The injection the package exists to stop: an id with the separator in it
// must not reach the key of another resource.
func TestKeyInjection(t *testing.T) {
	tests := []struct{ a, b []string }{
		{[]string{"order", "1:pay"}, []string{"order", "1", "pay"}},
		{[]string{"a:b", "c"}, []string{"a", "b:c"}},
		{[]string{"{x}"}, []string{"%7Bx%7D"}},
		{[]string{"a%3Ab"}, []string{"a:b"}},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.a, "|"), func(t *testing.T) {
			ka, _ := lockkey.Join(tt.a...)
			kb, _ := lockkey.Join(tt.b...)
			if ka == kb {
				t.Fatalf("got equal keys %q for %q and %q, want different", ka, tt.a, tt.b)
			}
		})
	}
}

func TestKey(t *testing.T) {
	tests := []struct {
		parts   []string
		want    string
		wantErr string
	}{
		{[]string{"order", "42"}, "order:42", ""},
		{[]string{"order", "1:pay"}, "order:1%3Apay", ""},
		{nil, "", `lockkey: missing key part "part 1"`},
		{[]string{"order", ""}, "", `lockkey: missing key part "part 2"`},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.parts, "|"), func(t *testing.T) {
			got, err := lockkey.Join(tt.parts...)
			if tt.wantErr != "" {
				if err == nil || err.Error() != tt.wantErr || !errors.Is(err, lockkey.ErrMissingPart) {
					t.Fatalf("got error %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("got %q, %v, want %q", got, err, tt.want)
			}
		})
	}
}

func TestShorten(t *testing.T) {
	short := strings.Repeat("k", lockkey.MaxKeyLen)
	if got := lockkey.Shorten(short); got != short {
		t.Fatalf("got %q, want the key unchanged", got)
	}
	tests := []struct {
		name string
		key  string
	}{
		{"ascii", "order:" + strings.Repeat("x", 300)},
		{"cut inside escape", strings.Repeat("x", 133) + "%3A" + strings.Repeat("y", 100)},
		{"cut inside rune", strings.Repeat("x", 133) + strings.Repeat("é", 100)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := lockkey.Shorten(tt.key)
			if len(got) > lockkey.MaxKeyLen {
				t.Fatalf("got %d bytes, want at most %d", len(got), lockkey.MaxKeyLen)
			}
			prefix, sum, ok := strings.Cut(got, ":#")
			if !ok || len(sum) != 64 {
				t.Fatalf("got %q, want prefix:#<sha256 hex>", got)
			}
			if _, err := hex.DecodeString(sum); err != nil {
				t.Fatalf("got hash %q: %v", sum, err)
			}
			if !strings.HasPrefix(tt.key, prefix) || len(prefix) < 120 {
				t.Fatalf("got prefix %q, want a long prefix of the key", prefix)
			}
			if !utf8.ValidString(prefix) || strings.HasSuffix(prefix, "%") || strings.HasSuffix(prefix, "%3") {
				t.Fatalf("got prefix ending %q, want it cut at a rune and escape boundary", prefix[len(prefix)-4:])
			}
			if again := lockkey.Shorten(tt.key); again != got {
				t.Fatalf("got %q then %q, want the same key twice", got, again)
			}
		})
	}
}

// unescape inverts Escape; it fails the test on input Escape cannot produce.
func unescape(t testing.TB, s string) string {
	t.Helper()
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '%' {
			b.WriteByte(s[i])
			continue
		}
		v, err := hex.DecodeString(s[i+1 : i+3])
		if err != nil || strings.ToUpper(s[i+1:i+3]) != s[i+1:i+3] {
			t.Fatalf("bad escape in %q", s)
		}
		b.Write(v)
		i += 2
	}
	return b.String()
}

// parts decodes fuzz input into a list of non-empty parts: each part is a
// length byte followed by up to that many bytes.
func parts(data []byte) []string {
	var out []string
	for len(data) > 0 {
		n := int(data[0])%40 + 1
		data = data[1:]
		n = min(n, len(data))
		if n == 0 {
			break
		}
		out = append(out, string(data[:n]))
		data = data[n:]
	}
	return out
}

// joinKey builds the key for list with Join and shortens it.
func joinKey(t testing.TB, list []string) string {
	t.Helper()
	key, err := lockkey.Join(list...)
	if err != nil {
		t.Fatalf("Join(%q): %v", list, err)
	}
	return lockkey.Shorten(key)
}

// FuzzJoin checks that keys are one-to-one: different lists of parts give
// different keys (unless SHA-256 collides), keys are never longer than
// MaxKeyLen, never hold hash tag braces or control bytes, and a key that
// was not hashed splits back into its parts.
func FuzzJoin(f *testing.F) {
	seeds := [][2][]byte{
		{[]byte("\x05order\x051:pay"), []byte("\x05order\x011\x03pay")},
		{[]byte("\x03a:b\x01c"), []byte("\x01a\x03b:c")},
		{[]byte("\x03{x}"), []byte("\x09%7Bx%7D")},
		{[]byte("\x05a%3Ab"), []byte("\x03a:b")},
		{[]byte("\x02#1"), []byte("\x03%231")},
		{bytes.Repeat([]byte("\x27"+strings.Repeat("z", 40)), 8), bytes.Repeat([]byte("\x27"+strings.Repeat("z", 40)), 9)},
		{bytes.Repeat([]byte("\x27:::::::::::::::::::::::::::::::::::::::::"), 6), bytes.Repeat([]byte("\x27::::::::::::::::::::::::::::::::::::::::y"), 6)},
	}
	for _, s := range seeds {
		f.Add(s[0], s[1])
	}
	f.Fuzz(func(t *testing.T, a, b []byte) {
		la, lb := parts(a), parts(b)
		if len(la) == 0 || len(lb) == 0 {
			return
		}
		ka, kb := joinKey(t, la), joinKey(t, lb)
		for _, k := range []string{ka, kb} {
			if len(k) > lockkey.MaxKeyLen {
				t.Fatalf("got %d-byte key, want at most %d", len(k), lockkey.MaxKeyLen)
			}
			if strings.ContainsAny(k, "{}") || strings.IndexFunc(k, func(r rune) bool { return r < 0x20 || r == 0x7f }) >= 0 {
				t.Fatalf("got key %q with braces or control bytes", k)
			}
		}
		if !strings.Contains(ka, "#") {
			var back []string
			for _, p := range strings.Split(ka, lockkey.Sep) {
				back = append(back, unescape(t, p))
			}
			if !slices.Equal(back, la) {
				t.Fatalf("key %q splits into %q, want %q", ka, back, la)
			}
		}
		if !slices.Equal(la, lb) && ka == kb {
			t.Fatalf("got key %q for both %q and %q, want different keys", ka, la, lb)
		}
		if slices.Equal(la, lb) && ka != kb {
			t.Fatalf("got keys %q and %q for %q, want one key", ka, kb, la)
		}
	})
}
