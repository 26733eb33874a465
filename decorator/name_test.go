package decorator_test

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"

	"github.com/padlockgo/padlock"
	"github.com/padlockgo/padlock/decorator"
	"github.com/padlockgo/padlock/lockkey"
)

// payments is a service whose method a test decorates.
type payments struct {
	holder string // what the lock's holder said, seen from another Locker
	other  *padlock.Locker
}

func (p *payments) Pay(ctx context.Context, order int) (int, error) {
	p.holder = holderOf(p.other, padlock.FromContext(ctx).Key())
	return order, nil
}

// holderOf returns the Holder that an Acquire of key on l is refused with.
func holderOf(l *padlock.Locker, key string) string {
	_, err := l.Acquire(context.Background(), key, padlock.Options{})
	var na *padlock.NotAcquiredError
	if !errors.As(err, &na) {
		return "not refused: " + err.Error()
	}
	return na.Holder
}

// TestLockNamesFunction checks that a decorated function's locks and
// permits name it after the Locker's Owner: by its own name, or
// WithName's; the app's Options.Caller wins.
func TestLockNamesFunction(t *testing.T) {
	_, rdb := newLocker(t)
	l, err := padlock.New(rdb, padlock.WithDefaults(padlock.Options{Owner: "host=web-1 pid=7"}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	other := lockerOn(t, rdb)
	sem, err := l.Semaphore(1)
	if err != nil {
		t.Fatal(err)
	}
	osem, err := other.Semaphore(1)
	if err != nil {
		t.Fatal(err)
	}
	p := &payments{other: other}
	key := lockkey.Arg("order", strconv.Itoa)
	ctx := context.Background()
	const owner = "host=web-1 pid=7 "

	for _, tc := range []struct {
		name string
		pay  func(context.Context, int) (int, error)
		want string
	}{
		{"method", decorator.WithLock(l, key, padlock.Options{}, p.Pay), owner + "func=decorator_test.payments.Pay"},
		{"WithName", decorator.WithLock(l, key, padlock.Options{}, p.Pay, decorator.WithName("billing.Settle")), owner + "func=billing.Settle"},
		{"Options.Caller", decorator.WithLock(l, key, padlock.Options{Caller: "batch=7"}, p.Pay, decorator.WithName("billing.Settle")), owner + "batch=7"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p.holder = ""
			if _, err := tc.pay(ctx, 42); err != nil {
				t.Fatal(err)
			}
			if p.holder != tc.want {
				t.Errorf("holder: got %q, want %q", p.holder, tc.want)
			}
		})
	}

	t.Run("Do", func(t *testing.T) {
		var got string
		err := decorator.Do(ctx, l, "order:43", padlock.Options{}, func(ctx context.Context) error {
			got = holderOf(other, "order:43")
			return nil
		})
		if err != nil || got != owner+"func=decorator_test.TestLockNamesFunction" {
			t.Errorf("Do: got %v, holder %q; want the test's name", err, got)
		}
	})
	t.Run("WithPermit", func(t *testing.T) {
		var got string
		run := decorator.WithPermit(sem, key, padlock.Options{}, func(ctx context.Context, id int) (int, error) {
			_, err := osem.Acquire(context.Background(), padlock.FromContext(ctx).Key(), padlock.Options{})
			if na := (*padlock.NotAcquiredError)(nil); errors.As(err, &na) {
				got = na.Holder
			}
			return id, nil
		}, decorator.WithName("limits.Charge"))
		if _, err := run(ctx, 44); err != nil || got != owner+"func=limits.Charge" {
			t.Errorf("WithPermit: got %v, holder %q; want func=limits.Charge", err, got)
		}
	})
	if err := decorator.Do(ctx, l, "order:45", padlock.Options{}, func(context.Context) error { return nil }, decorator.WithName("")); !errors.Is(err, padlock.ErrInvalid) || !strings.Contains(err.Error(), "WithName") {
		t.Errorf("WithName(\"\"): got %v, want ErrInvalid naming WithName", err)
	}
}
