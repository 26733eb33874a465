package httplock

import (
	"encoding/json"
	"net/http"
	"strconv"
	"time"
)

// ProblemContentType is the media type of problem responses (RFC 9457).
const ProblemContentType = "application/problem+json"

// Problem is an RFC 9457 problem detail: what Lock, the Gin
// middleware.Lock and the idempotency middlewares answer instead of running the
// handler. A Responder may change it before writing it with WriteProblem,
// or write something else entirely.
type Problem struct {
	// Type is a URI naming the kind of problem. Default: "about:blank",
	// meaning the status code says it all.
	Type string `json:"type"`
	// Title is the status text, as RFC 9457 asks for "about:blank".
	Title string `json:"title"`
	// Status is the HTTP status code: 400, 409, 413, 422 (Idempotency),
	// 423, 500 or 503.
	Status int `json:"status"`
	// Detail explains this occurrence, for a human.
	Detail string `json:"detail,omitempty"`
	// Instance is the request path.
	Instance string `json:"instance,omitempty"`
	// Namespace is the namespace of the lock key (the escaped route
	// template, or WithNamespace's), on busy responses only.
	Namespace string `json:"namespace,omitempty"`
	// Key is the full lock key, on busy responses only, and only with
	// WithEchoKey: a key is built from request data that may be secret.
	Key string `json:"key,omitempty"`

	// RetryAfter is the holder's remaining lease on busy responses, 0 when
	// unknown. WriteProblem turns it into a Retry-After header; a negative
	// value means none, for a 409 that retrying will not resolve.
	RetryAfter time.Duration `json:"-"`
	// Err is the error behind the problem, for logs; it is not sent.
	// Without WithEchoKey, the error of a refused lock or permit shows the
	// key's namespace and "…" where the key was.
	Err error `json:"-"`

	// beforeHandler marks the refusal of a lock or permit that was not
	// acquired: the handler did not run (see Guard.Refuse).
	beforeHandler bool
}

// Responder writes the response for a request the middleware refuses.
// Default: WriteProblem.
type Responder func(w http.ResponseWriter, r *http.Request, p *Problem)

// WriteProblem writes p as an application/problem+json response, with a
// Retry-After header when p.RetryAfter is set (whole seconds, rounded up,
// at least 1) and for 409 and 423 unless p.RetryAfter is negative. An
// empty Type is sent as "about:blank" and an empty Title as the status
// text (http.StatusText), as RFC 9457 asks; p itself is left as it is.
func WriteProblem(w http.ResponseWriter, _ *http.Request, p *Problem) {
	sent := *p
	if sent.Type == "" {
		sent.Type = "about:blank"
	}
	if sent.Title == "" {
		sent.Title = http.StatusText(sent.Status)
	}
	h := w.Header()
	h.Set("Content-Type", ProblemContentType)
	h.Set("Cache-Control", "no-store")
	if p.RetryAfter > 0 || (p.RetryAfter == 0 && (p.Status == http.StatusConflict || p.Status == http.StatusLocked)) {
		h.Set("Retry-After", strconv.FormatInt(retryAfterSeconds(p.RetryAfter), 10))
	}
	body, err := json.Marshal(&sent)
	if err != nil { // only strings and an int: cannot happen
		body = []byte(`{"type":"about:blank","status":500}`)
	}
	w.WriteHeader(p.Status)
	_, _ = w.Write(body)
}

// retryAfterSeconds rounds d up to whole seconds, at least 1.
func retryAfterSeconds(d time.Duration) int64 {
	s := int64((d + time.Second - 1) / time.Second)
	return max(s, 1)
}

func newProblem(status int, detail string, err error) *Problem {
	return &Problem{Type: "about:blank", Title: http.StatusText(status), Status: status, Detail: detail, Err: err}
}
