package middleware

import (
	"github.com/gin-gonic/gin"

	"github.com/padlockgo/padlock/httplock"
)

// holdWriter is the Gin response writer of a hold with a bound
// (httplock.WithMaxHold): it drops what the handler writes after the
// bound. A status set before anything is written is not yet the response
// (gin writes it later), so it does not stop the 503 the bound answers.
type holdWriter struct {
	gin.ResponseWriter
	h *httplock.Hold
}

func (w *holdWriter) WriteHeader(code int) {
	if !w.h.Exceeded() {
		w.ResponseWriter.WriteHeader(code)
	}
}

func (w *holdWriter) WriteHeaderNow() {
	if w.h.Begin() {
		w.ResponseWriter.WriteHeaderNow()
	}
}

func (w *holdWriter) Write(b []byte) (int, error) {
	if !w.h.Begin() {
		return 0, httplock.ErrHoldExceeded
	}
	return w.ResponseWriter.Write(b)
}

func (w *holdWriter) WriteString(s string) (int, error) {
	if !w.h.Begin() {
		return 0, httplock.ErrHoldExceeded
	}
	return w.ResponseWriter.WriteString(s)
}

func (w *holdWriter) Flush() {
	if w.h.Begin() {
		w.ResponseWriter.Flush()
	}
}
