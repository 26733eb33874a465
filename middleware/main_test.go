package middleware_test

import (
	"context"
	"testing"

	"github.com/gin-gonic/gin"
	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"

	"github.com/padlockgo/padlock/internal/redistest"
)

func TestMain(m *testing.M) {
	gin.SetMode(gin.TestMode)
	// Tests kill servers on purpose; go-redis would log every failed dial
	// that follows, burying the test output.
	redis.SetLogger(quiet{})
	goleak.VerifyTestMain(m, redistest.DialProbe)
}

type quiet struct{}

func (quiet) Printf(context.Context, string, ...any) {}
