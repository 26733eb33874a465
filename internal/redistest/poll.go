package redistest

import (
	"context"
	"errors"
	"time"
)

// poll calls done every 20 ms until it returns true, or returns an error
// with why's explanation once ctx ends.
func poll(ctx context.Context, done func() bool, why func() string) error {
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for !done() {
		select {
		case <-ctx.Done():
			return errors.New(why())
		case <-tick.C:
		}
	}
	return nil
}
