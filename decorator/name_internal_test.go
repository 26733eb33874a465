package decorator

import (
	"context"
	"testing"
)

type service struct{}

func (*service) Pay(context.Context, int) (int, error) { return 0, nil }
func (service) Refund(context.Context, int) error      { return nil }

func settle(context.Context, int) (int, error) { return 0, nil }

func generic[T any](context.Context, T) (T, error) {
	var zero T
	return zero, nil
}

// closureIn returns a closure written in it. (Inlined, its closure would
// be named for the function it was inlined in too.)
//
//go:noinline
func closureIn() func(context.Context) error {
	return func(context.Context) error { return nil }
}

func TestFuncName(t *testing.T) {
	s := &service{}
	for _, tc := range []struct {
		name string
		fn   any
		want string
	}{
		{"func", settle, "decorator.settle"},
		{"method value, pointer receiver", s.Pay, "decorator.service.Pay"},
		{"method value", service{}.Refund, "decorator.service.Refund"},
		{"method expression", (*service).Pay, "decorator.service.Pay"},
		{"generic", generic[int], "decorator.generic"},
		{"closure", closureIn(), "decorator.closureIn"},
		{"not a func", 42, ""},
		{"nil func", (func())(nil), ""},
	} {
		if got := funcName(tc.fn); got != tc.want {
			t.Errorf("%s: got %q, want %q", tc.name, got, tc.want)
		}
	}
}
