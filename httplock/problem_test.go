package httplock

import (
	"encoding/json"
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

// A Problem built by hand with only a status gets what the docs promise:
// type "about:blank" and the status text as its title; what it sets is
// sent as it is.
func TestWriteProblemDefaults(t *testing.T) {
	tests := []struct {
		name       string
		p          Problem
		typ, title string
	}{
		{"empty", Problem{Status: http.StatusConflict}, "about:blank", "Conflict"},
		{"teapot", Problem{Status: http.StatusTeapot, Detail: "short and stout"}, "about:blank", "I'm a teapot"},
		{"set", Problem{Type: "https://example.com/probs/busy", Title: "Busy", Status: http.StatusConflict}, "https://example.com/probs/busy", "Busy"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := httptest.NewRecorder()
			p := tt.p
			WriteProblem(w, nil, &p)
			var got map[string]any
			if err := json.Unmarshal(w.Body.Bytes(), &got); err != nil {
				t.Fatalf("body %q: %v", w.Body, err)
			}
			if got["type"] != tt.typ || got["title"] != tt.title {
				t.Errorf("got type %q title %q, want %q and %q", got["type"], got["title"], tt.typ, tt.title)
			}
			if got["status"] != float64(tt.p.Status) || w.Code != tt.p.Status {
				t.Errorf("got status %v (code %d), want %d", got["status"], w.Code, tt.p.Status)
			}
			if p != tt.p {
				t.Errorf("WriteProblem changed its Problem: got %+v, want %+v", p, tt.p)
			}
		})
	}
}
