package middleware_test

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/gin-gonic/gin"

	"github.com/padlockgo/padlock/keyfunc"
	"github.com/padlockgo/padlock/lockkey"
	"github.com/padlockgo/padlock/middleware"
)

// FuzzLockBody sends arbitrary bodies, with and without a known length,
// under any of a few content types, to Lock with key parts that read the
// body (keyfunc.JSON and keyfunc.Form). Lock never panics and answers 200,
// 400 or 413 only, 413 only for a body over the limit; a refusal is a
// problem response and never runs the handler; and a handler behind a JSON
// key reads the very body the client sent, both from c.Request.Body and
// from the bytes gin keeps for ShouldBindBodyWith.
func FuzzLockBody(f *testing.F) {
	l, _, _ := newLocker(f)
	const limit = 256
	var (
		ran     bool
		gotBody []byte
		kept    []byte
		form    string
	)
	r := gin.New()
	r.POST("/json", middleware.Lock(l, keyfunc.JSON("order.id", lockkey.Text(), lockkey.WithMaxBodyBytes(limit))), func(c *gin.Context) {
		ran = true
		gotBody, _ = io.ReadAll(c.Request.Body)
		if v, ok := c.Get(gin.BodyBytesKey); ok {
			kept, _ = v.([]byte)
		}
		c.Status(http.StatusOK)
	})
	r.POST("/form", middleware.Lock(l, keyfunc.Form("id", lockkey.Text(), lockkey.WithMaxBodyBytes(limit))), func(c *gin.Context) {
		ran = true
		form = c.PostForm("id")
		c.Status(http.StatusOK)
	})
	contentTypes := []string{
		"application/json", "application/x-www-form-urlencoded",
		"multipart/form-data; boundary=xYz", "text/plain; charset=utf-8", "",
	}

	f.Add(uint8(0), uint8(0), []byte(`{"order":{"id":"42"}}`), false)
	f.Add(uint8(0), uint8(0), []byte(`{"order":{"id":42,"ID":43}}`), true)
	f.Add(uint8(0), uint8(3), []byte(`{"order":{"id":"x"}} trailing`), false)
	f.Add(uint8(1), uint8(1), []byte("id=7&id=8"), false)
	f.Add(uint8(1), uint8(1), []byte("id=%zz"), true)
	f.Add(uint8(1), uint8(2), []byte("--xYz\r\nContent-Disposition: form-data; name=\"id\"\r\n\r\n9\r\n--xYz--\r\n"), false)
	f.Add(uint8(1), uint8(2), []byte("--xYz\r\nContent-Disposition: form-data; name=\"id\"; filename=\"a\"\r\n\r\nzz\r\n--xYz--\r\n"), true)
	f.Add(uint8(0), uint8(0), bytes.Repeat([]byte("a"), limit+1), true)

	f.Fuzz(func(t *testing.T, route, ct uint8, body []byte, unknownLength bool) {
		path := []string{"/json", "/form"}[int(route)%2]
		var rd io.Reader = bytes.NewReader(body)
		if unknownLength {
			rd = struct{ io.Reader }{rd} // hides the length, as a chunked body does
		}
		req := httptest.NewRequest(http.MethodPost, path, rd)
		if unknownLength {
			req.ContentLength = -1
		}
		if c := contentTypes[int(ct)%len(contentTypes)]; c != "" {
			req.Header.Set("Content-Type", c)
		}
		ran, gotBody, kept, form = false, nil, nil, ""
		w := httptest.NewRecorder()
		r.ServeHTTP(w, req)

		switch w.Code {
		case http.StatusOK:
			if !ran {
				t.Fatalf("%s: got 200 without the handler running", path)
			}
		case http.StatusBadRequest, http.StatusRequestEntityTooLarge:
			if ran {
				t.Fatalf("%s: got %d after the handler ran", path, w.Code)
			}
			if got := w.Header().Get("Content-Type"); got != "application/problem+json" {
				t.Fatalf("%s: got %d with Content-Type %q, want application/problem+json", path, w.Code, got)
			}
			if w.Code == http.StatusRequestEntityTooLarge && len(body) <= limit {
				t.Fatalf("%s: got 413 for a body of %d bytes, limit %d", path, len(body), limit)
			}
			return
		default:
			t.Fatalf("%s: got status %d (body %s), want 200, 400 or 413", path, w.Code, w.Body)
		}
		switch path {
		case "/json":
			if !bytes.Equal(gotBody, body) {
				t.Fatalf("handler read body %q, want %q", gotBody, body)
			}
			if !bytes.Equal(kept, body) {
				t.Fatalf("gin.BodyBytesKey holds %q, want %q", kept, body)
			}
		case "/form":
			if form == "" {
				t.Fatalf("handler sees no form field id, yet the key was built from it")
			}
		}
	})
}
