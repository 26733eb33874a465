package padlock

import (
	"context"
	"testing"

	"github.com/padlockgo/padlock/internal/redistest"
)

// TestHoldNoticeBeforeJoiningIsKept: a notice that names a queued waiter
// before it has taken its place in its Locker's line (right after the first
// attempt that queued it in Redis) is not lost: the waiter finds it when it
// joins, and tries again at once.
// Regression: a notice that came before the waiter joined its line was lost.
func TestHoldNoticeBeforeJoiningIsKept(t *testing.T) {
	srv := redistest.Start(t)
	n := newNotifier(srv.Client(t), "self")
	defer n.close()
	ctx := context.Background()
	const channel = "padlock:{k}:sem"
	newWaiter := func(token string) *waiter {
		return &waiter{h: &holdAcquisition{named: token}, wake: make(chan struct{}, 1)}
	}
	first := n.enter(ctx, channel, newWaiter("first"), wakeOne)
	n.notify(channel, "late") // names a waiter not in line yet
	late := n.enter(ctx, channel, newWaiter("late"), wakeOne)
	other := n.enter(ctx, channel, newWaiter("other"), wakeOne)
	sleep, open := n.parkHold(late)
	if sleep || !open {
		t.Errorf("the named waiter, joining after its notice: parkHold = %v, %v; want to try at once", sleep, open)
	}
	if sleep, _ := n.parkHold(other); !sleep {
		t.Errorf("a waiter the notice did not name: parkHold = %v, want asleep", sleep)
	}
	for _, w := range []*waiter{first, late, other} {
		n.leave(channel, w, false)
	}
}
