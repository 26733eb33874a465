package httplock

import (
	"net/http"
	"net/http/httptest"
	"testing"
	"time"
)

func TestRetryAfter(t *testing.T) {
	tests := []struct {
		status int
		d      time.Duration
		want   string
	}{
		{http.StatusConflict, 0, "1"},
		{http.StatusConflict, time.Millisecond, "1"},
		{http.StatusConflict, time.Second, "1"},
		{http.StatusConflict, time.Second + time.Nanosecond, "2"},
		{http.StatusLocked, 29500 * time.Millisecond, "30"},
		{http.StatusConflict, -1, ""}, // a 409 that retrying will not resolve
		{http.StatusServiceUnavailable, 0, ""},
		{http.StatusServiceUnavailable, 3 * time.Second, "3"},
	}
	for _, tt := range tests {
		t.Run(http.StatusText(tt.status)+" "+tt.d.String(), func(t *testing.T) {
			w := httptest.NewRecorder()
			p := newProblem(tt.status, "x", nil)
			p.RetryAfter = tt.d
			WriteProblem(w, nil, p)
			if got := w.Header().Get("Retry-After"); got != tt.want {
				t.Fatalf("got Retry-After %q, want %q", got, tt.want)
			}
		})
	}
}
