package padlocktest_test

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	// go-redis's one process-wide logger, recorded: an Env keeps it quiet
	// by itself (TestDownIsQuiet), and nothing here silences it.
	redis.SetLogger(redisLog)
	goleak.VerifyTestMain(m)
}

// redisLog records what go-redis logs. The package's tests do not run in
// parallel, so a test reads what it caused.
var redisLog = &logRecorder{}

type logRecorder struct {
	mu    sync.Mutex
	lines []string
}

func (r *logRecorder) Printf(_ context.Context, format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.lines = append(r.lines, fmt.Sprintf(format, args...))
}

// since returns the lines logged after the first n.
func (r *logRecorder) since(n int) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.lines[n:]...)
}

func (r *logRecorder) len() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.lines)
}
