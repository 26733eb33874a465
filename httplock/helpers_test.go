package httplock_test

import "github.com/padlockgo/padlock/internal/handlertest"

// What the tests of both HTTP middlewares share (internal/handlertest).
var (
	newLocker    = handlertest.NewLocker
	serve        = handlertest.Serve
	newRequest   = handlertest.NewRequest
	serveRequest = handlertest.ServeRequest
	checkProblem = handlertest.CheckProblem
)
