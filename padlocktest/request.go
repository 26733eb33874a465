package padlocktest

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"github.com/padlockgo/padlock"
	"github.com/padlockgo/padlock/httplock"
)

// BusyFor makes busy the lock that r would take on its way through h, the
// app's router with its middlewares, as Busy does for a key: the key is
// the one the first httplock.Lock or Gin middleware.Lock on r's route
// would lock (see httplock.KeyFor), so the test need not spell it. r is
// not served: only the middlewares before the lock see it (r must carry
// what they need, credentials for an authentication step), and its body
// is put back, so the test can send r next and get the busy answer.
//
// It returns an ErrControl error wrapping KeyFor's when r takes no lock
// (httplock.ErrNoLock) or its key cannot be built, and Busy's errors.
func (e *Env) BusyFor(ctx context.Context, h http.Handler, r *http.Request, lease time.Duration) (*padlock.Lock, error) {
	key, err := httplock.KeyFor(h, r)
	if err != nil {
		return nil, fmt.Errorf("%w: BusyFor: %w", ErrControl, err)
	}
	return e.Busy(ctx, key, lease)
}

// LoseFor loses the lock a request like r holds on its way through h,
// as Lose does for a key, and reports whether there was one: the key is
// the one httplock.KeyFor gives for r, so a test can make a request in
// flight lose its lock by sending KeyFor a request for the same resource
// (a new one, or r if the test has not served it: KeyFor puts its body
// back). Its holder hears of it at its next renewal (see Lose).
//
// It returns an ErrControl error wrapping KeyFor's when r takes no lock
// (httplock.ErrNoLock) or its key cannot be built. A key a
// httplock.Limit gives names a semaphore, whose permits Lose does not
// reach: LoseFor then reports false.
func (e *Env) LoseFor(h http.Handler, r *http.Request) (bool, error) {
	key, err := httplock.KeyFor(h, r)
	if err != nil {
		return false, fmt.Errorf("%w: LoseFor: %w", ErrControl, err)
	}
	return e.Lose(key), nil
}
