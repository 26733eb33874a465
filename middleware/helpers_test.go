package middleware_test

import (
	"sync/atomic"

	"github.com/padlockgo/padlock/internal/handlertest"
)

// What the tests of both HTTP middlewares share (internal/handlertest).
var (
	newLocker    = handlertest.NewLocker
	lockerOn     = handlertest.LockerOn
	serve        = handlertest.Serve
	checkProblem = handlertest.CheckProblem
)

// exclusive counts handler runs and the most that ran at once.
type exclusive struct {
	active, runs, maxActive atomic.Int64
}

func (e *exclusive) enter() {
	e.runs.Add(1)
	n := e.active.Add(1)
	for {
		m := e.maxActive.Load()
		if n <= m || e.maxActive.CompareAndSwap(m, n) {
			return
		}
	}
}

func (e *exclusive) leave() { e.active.Add(-1) }
