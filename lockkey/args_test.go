package lockkey_test

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/padlockgo/padlock/lockkey"
)

type transfer struct{ From, To string }

func TestArg(t *testing.T) {
	byID := lockkey.Arg("order", func(id string) string { return id })
	tests := []struct {
		id      string
		want    string
		wantErr string
	}{
		{"42", "order:42", ""},
		{"1:pay", "order:1%3Apay", ""},
		{"{x}#", "order:%7Bx%7D%23", ""},
		{"", "", `lockkey: missing key part "order"`},
	}
	for _, tt := range tests {
		t.Run(tt.id, func(t *testing.T) {
			got, err := byID(tt.id)
			if tt.wantErr != "" {
				if err == nil || err.Error() != tt.wantErr || !errors.Is(err, lockkey.ErrMissingPart) {
					t.Fatalf("got %q, %v; want error %q", got, err, tt.wantErr)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("got %q, %v; want %q", got, err, tt.want)
			}
			if viaKey, _ := lockkey.Join("order", tt.id); viaKey != got {
				t.Fatalf("got %q, want what Key gives: %q", got, viaKey)
			}
		})
	}
	if got, _ := lockkey.Arg("a:b", func(s string) string { return s })("c"); got != "a%3Ab:c" {
		t.Fatalf("got %q for ns a:b, want the ns escaped too: a%%3Ab:c", got)
	}
}

func TestArgs(t *testing.T) {
	key := lockkey.Args(func(tr transfer) []string { return []string{"transfer", tr.From, tr.To} })
	tests := []struct {
		in      transfer
		want    string
		wantErr string
	}{
		{transfer{"alice", "bob"}, "transfer:alice:bob", ""},
		{transfer{"a:b", "c"}, "transfer:a%3Ab:c", ""},
		{transfer{"a", "b:c"}, "transfer:a:b%3Ac", ""},
		{transfer{"alice", ""}, "", `lockkey: missing key part "part 3"`},
	}
	for _, tt := range tests {
		t.Run(tt.in.From+"|"+tt.in.To, func(t *testing.T) {
			got, err := key(tt.in)
			if tt.wantErr != "" {
				if err == nil || err.Error() != tt.wantErr || !errors.Is(err, lockkey.ErrMissingPart) {
					t.Fatalf("got %q, %v; want error %q", got, err, tt.wantErr)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("got %q, %v; want %q", got, err, tt.want)
			}
		})
	}
	empty := lockkey.Args(func(transfer) []string { return nil })
	if _, err := empty(transfer{}); !errors.Is(err, lockkey.ErrMissingPart) {
		t.Fatalf("got %v for no parts, want ErrMissingPart", err)
	}
}

// Arguments crafted to collide, by putting the separator or an escape in a
// value, still get different keys.
func TestArgInjection(t *testing.T) {
	key := lockkey.Args(func(tr transfer) []string { return []string{"transfer", tr.From, tr.To} })
	tests := []struct{ a, b transfer }{
		{transfer{"a:b", "c"}, transfer{"a", "b:c"}},
		{transfer{"a%3Ab", "c"}, transfer{"a:b", "c"}},
		{transfer{"{a}", "b"}, transfer{"%7Ba%7D", "b"}},
	}
	for _, tt := range tests {
		t.Run(tt.a.From+"|"+tt.b.From, func(t *testing.T) {
			ka, _ := key(tt.a)
			kb, _ := key(tt.b)
			if ka == kb {
				t.Fatalf("got key %q for both %+v and %+v, want different keys", ka, tt.a, tt.b)
			}
		})
	}
}

func TestArgPanics(t *testing.T) {
	tests := []struct {
		name string
		make func()
		want string
	}{
		{"Arg empty ns", func() { lockkey.Arg("", func(s string) string { return s }) }, "lockkey: Arg: empty ns"},
		{"Arg nil get", func() { lockkey.Arg[string]("order", nil) }, "lockkey: Arg: nil get"},
		{"Args nil", func() { lockkey.Args[string](nil) }, "lockkey: Args: nil parts"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			defer func() {
				if got := fmt.Sprint(recover()); got != tt.want {
					t.Fatalf("got panic %q, want %q", got, tt.want)
				}
			}()
			tt.make()
		})
	}
}

// FuzzArgs checks that argument keys are one-to-one: Args gives exactly
// Key's encoding, which splits back into the raw parts, so two different
// arguments never share a key; Arg agrees with Args for two parts.
func FuzzArgs(f *testing.F) {
	f.Add("order", "1:pay", "x")
	f.Add("a:b", "c", "%3A")
	f.Add("{t}", "#", "\x00")
	f.Fuzz(func(t *testing.T, ns, x, y string) {
		if ns == "" || x == "" || y == "" {
			return
		}
		list := []string{ns, x, y}
		k, err := lockkey.Args(func(l []string) []string { return l })(list)
		if err != nil {
			t.Fatal(err)
		}
		var back []string
		for _, p := range strings.Split(k, lockkey.Sep) {
			back = append(back, unescape(t, p))
		}
		if !slices.Equal(back, list) {
			t.Fatalf("key %q splits into %q, want %q", k, back, list)
		}
		k2, err := lockkey.Arg(ns, func(s string) string { return s })(x)
		if want, _ := lockkey.Join(ns, x); err != nil || k2 != want {
			t.Fatalf("Arg gave %q, %v; want %q", k2, err, want)
		}
	})
}

// A key from a field of a function's argument, for decorator.WithLock.
func ExampleArg() {
	type PayRequest struct{ OrderID string }
	key := lockkey.Arg("order", func(r PayRequest) string { return r.OrderID })

	fmt.Println(key(PayRequest{OrderID: "42"}))
	fmt.Println(key(PayRequest{OrderID: "1:pay"}))
	fmt.Println(key(PayRequest{}))
	// Output:
	// order:42 <nil>
	// order:1%3Apay <nil>
	//  lockkey: missing key part "order"
}

// A key of several fields.
func ExampleArgs() {
	type Transfer struct{ From, To string }
	key := lockkey.Args(func(t Transfer) []string { return []string{"transfer", t.From, t.To} })

	fmt.Println(key(Transfer{From: "alice", To: "bob"}))
	// Output:
	// transfer:alice:bob <nil>
}
