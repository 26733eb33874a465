package ginidem_test

import (
	"net/http"

	"github.com/gin-gonic/gin"

	"github.com/padlockgo/padlock/internal/handlertest"
)

// What the tests of the HTTP middlewares share (internal/handlertest).
var (
	newLocker    = handlertest.NewLocker
	lockerOn     = handlertest.LockerOn
	checkProblem = handlertest.CheckProblem
)

// tester is the caller of tests that have one caller.
func tester(*gin.Context) (string, error) { return "tester", nil }

// discard is a ResponseWriter that keeps nothing, so the benchmark measures
// the router and the middleware, not a recorder.
type discard struct{ h http.Header }

func (d *discard) Header() http.Header         { return d.h }
func (d *discard) Write(b []byte) (int, error) { return len(b), nil }
func (d *discard) WriteHeader(int)             {}
