package ginidem

import (
	"net/http"

	"github.com/gin-gonic/gin"
)

// recorder is what the writer idempotency.Core hands the chain offers: the
// gin.ResponseWriter methods that need no gin.
type recorder interface {
	http.ResponseWriter
	http.Flusher
	http.Hijacker
	WriteString(s string) (int, error)
	WriteHeaderNow()
	Status() int
	Size() int
	Written() bool
}

// writer is the gin.ResponseWriter the handler writes to: the core's
// recorder, which holds the response back until it is stored, plus what
// only gin's own writer has.
type writer struct {
	recorder
	orig gin.ResponseWriter
}

var _ gin.ResponseWriter = (*writer)(nil)

// CloseNotify is the underlying writer's.
//
// Deprecated: use the request context, as http.CloseNotifier says.
func (w *writer) CloseNotify() <-chan bool { return w.orig.CloseNotify() }

// Pusher is the underlying writer's.
func (w *writer) Pusher() http.Pusher { return w.orig.Pusher() }

// Unwrap lets http.ResponseController reach the recorder, and through it
// the underlying writer, for what neither implements here (deadlines).
func (w *writer) Unwrap() http.ResponseWriter { return w.recorder }
