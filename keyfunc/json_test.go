package keyfunc_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/gin-gonic/gin"
	"github.com/gin-gonic/gin/binding"

	"github.com/padlockgo/padlock/httplock"
	"github.com/padlockgo/padlock/keyfunc"
	"github.com/padlockgo/padlock/lockkey"
)

func TestJSON(t *testing.T) {
	tests := []struct {
		name    string
		path    string
		body    string
		want    string
		wantErr error
		wantMsg string
	}{
		{name: "string", path: "id", body: `{"id":"A-1"}`, want: "A-1"},
		{name: "string escapes", path: "id", body: `{"id":"a:b\u007b"}`, want: "a%3Ab%7B"},
		// As encoding/json decodes it for the handler: U+FFFD, escaped.
		{name: "invalid UTF-8", path: "id", body: "{\"id\":\"a\xa8\"}", want: lockkey.Escape("a\ufffd")},
		{name: "nested", path: "order.id", body: `{"x":[1,{"id":9}],"order":{"note":"}\"{","id":"o7"}}`, want: "o7"},
		{name: "array index", path: "items.1.sku", body: `{"items":[{"sku":"a"},{"sku":"b"}]}`, want: "b"},
		{name: "array index out of range", path: "items.2.sku", body: `{"items":[{"sku":"a"}]}`, wantErr: lockkey.ErrMissingPart},
		{name: "array with non-index", path: "items.x", body: `{"items":[1]}`, wantErr: lockkey.ErrMissingPart},
		{name: "big integer exact", path: "id", body: `{"id": 12345678901234567891234}`, want: "12345678901234567891234"},
		{name: "negative integer", path: "id", body: `{"id":-17}`, want: "-17"},
		{name: "exponent is canonical", path: "id", body: `{"id":1e3}`, want: "1000"},
		{name: "fraction zero is canonical", path: "id", body: `{"id":1000.000}`, want: "1000"},
		{name: "fraction", path: "id", body: `{"id":0.50}`, want: "0.5"},
		{name: "small fraction", path: "id", body: `{"id":25E-4}`, want: "0.0025"},
		{name: "mixed fraction", path: "id", body: `{"id":-12.5e1}`, want: "-125"},
		{name: "negative zero", path: "id", body: `{"id":-0.0}`, want: "0"},
		{name: "huge exponent", path: "id", body: `{"id":5e200}`, want: "5e200"},
		{name: "absurd exponent", path: "id", body: `{"id":1e9999999}`, wantErr: lockkey.ErrMalformedBody},
		{name: "bool", path: "ok", body: `{"ok":true}`, want: "true"},
		{name: "case-insensitive", path: "id", body: `{"ID":"x"}`, want: "x"},
		{name: "escaped field name", path: "id", body: `{"\u0069d":"x"}`, want: "x"},
		{name: "duplicate field", path: "id", body: `{"id":"1","id":"2"}`, wantErr: lockkey.ErrAmbiguousPart, wantMsg: `"json field id"`},
		{name: "duplicate by case", path: "order.id", body: `{"order":{"id":"1","Id":"2"}}`, wantErr: lockkey.ErrAmbiguousPart},
		{name: "missing", path: "id", body: `{"x":1}`, wantErr: lockkey.ErrMissingPart, wantMsg: `"json field id"`},
		{name: "null", path: "id", body: `{"id":null}`, wantErr: lockkey.ErrMissingPart},
		{name: "empty string", path: "id", body: `{"id":""}`, wantErr: lockkey.ErrMissingPart},
		{name: "empty body", path: "id", body: ``, wantErr: lockkey.ErrMissingPart},
		{name: "path through scalar", path: "id.x", body: `{"id":1}`, wantErr: lockkey.ErrMissingPart},
		{name: "object", path: "order", body: `{"order":{"id":1}}`, wantErr: lockkey.ErrMalformedBody},
		{name: "malformed", path: "id", body: `{"id":1,}`, wantErr: lockkey.ErrMalformedBody},
		{name: "not json", path: "id", body: `id=1`, wantErr: lockkey.ErrMalformedBody},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := run(t, keyfunc.JSON(tt.path, lockkey.Text()), "/", newRequest("POST", "/", "application/json", tt.body))
			checkResult(t, got, tt.want, tt.wantErr, tt.wantMsg)

			// The net/http flavour reads the same way.
			req := newRequest("POST", "/", "application/json", tt.body)
			key, err := httplock.JSON(tt.path, lockkey.Text())(req)
			checkResult(t, result{key, err}, tt.want, tt.wantErr, tt.wantMsg)
		})
	}
}

func TestJSONBodyLimit(t *testing.T) {
	body := `{"id":"` + strings.Repeat("x", 100) + `"}`
	tests := []struct {
		name          string
		limit         int64
		contentLength bool
		wantErr       error
	}{
		{"under", int64(len(body)), true, nil},
		{"over, length known", int64(len(body)) - 1, true, lockkey.ErrBodyTooLarge},
		{"over, chunked", int64(len(body)) - 1, false, lockkey.ErrBodyTooLarge},
		{"under, chunked", int64(len(body)), false, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req := newRequest("POST", "/", "application/json", body)
			if !tt.contentLength {
				req.ContentLength = -1
				req.Body = io.NopCloser(strings.NewReader(body))
			}
			got := run(t, keyfunc.JSON("id", lockkey.Text(), lockkey.WithMaxBodyBytes(tt.limit)), "/", req)
			if tt.wantErr == nil {
				checkResult(t, got, strings.Repeat("x", 100), nil, "")
			} else {
				checkResult(t, got, "", tt.wantErr, "limit")
			}
		})
	}
}

func TestJSONDefaultLimit(t *testing.T) {
	body := `{"id":"` + strings.Repeat("x", lockkey.DefaultMaxBodyBytes) + `"}`
	got := run(t, keyfunc.JSON("id", lockkey.Text()), "/", newRequest("POST", "/", "application/json", body))
	checkResult(t, got, "", lockkey.ErrBodyTooLarge, "limit 1048576 bytes")
}

// After a JSON part, the handler still reads the whole body, through
// c.Request.Body, c.ShouldBindBodyWith and c.ShouldBindJSON alike.
func TestJSONBodyRestored(t *testing.T) {
	const body = `{"order":{"id":"o1"},"amount":5}`
	type payload struct {
		Order  struct{ ID string } `json:"order"`
		Amount int                 `json:"amount"`
	}
	tests := []struct {
		name string
		read func(c *gin.Context) (string, error)
	}{
		{"Request.Body", func(c *gin.Context) (string, error) {
			b, err := io.ReadAll(c.Request.Body)
			return string(b), err
		}},
		{"GetRawData", func(c *gin.Context) (string, error) {
			b, err := c.GetRawData()
			return string(b), err
		}},
		{"ShouldBindBodyWith twice", func(c *gin.Context) (string, error) {
			var p, q payload
			if err := c.ShouldBindBodyWith(&p, binding.JSON); err != nil {
				return "", err
			}
			if err := c.ShouldBindBodyWithJSON(&q); err != nil {
				return "", err
			}
			if p != q {
				return "", io.ErrUnexpectedEOF
			}
			return `{"order":{"id":"` + p.Order.ID + `"},"amount":5}`, nil
		}},
		{"ShouldBindJSON", func(c *gin.Context) (string, error) {
			var p payload
			err := c.ShouldBindJSON(&p)
			return `{"order":{"id":"` + p.Order.ID + `"},"amount":5}`, err
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var read string
			var readErr error
			f := keyfunc.Join(keyfunc.JSON("order.id", lockkey.Text()), keyfunc.JSON("amount", lockkey.Text()))
			got := run(t, f, "/", newRequest("POST", "/", "application/json", body), func(c *gin.Context) {
				read, readErr = tt.read(c)
			})
			checkResult(t, got, "o1:5", nil, "")
			if readErr != nil || read != body {
				t.Fatalf("handler got body %q, error %v, want %q", read, readErr, body)
			}
		})
	}
}

// A body the app already bound with ShouldBindBodyWith is not read again.
func TestJSONReusesBoundBody(t *testing.T) {
	const body = `{"id":"b1"}`
	var got result
	r := gin.New()
	r.POST("/", func(c *gin.Context) {
		var v struct{ ID string }
		if err := c.ShouldBindBodyWithJSON(&v); err != nil {
			t.Errorf("bind: %v", err)
		}
		c.Request.Body = http.NoBody // consumed; only the cache is left
		got.key, got.err = keyfunc.JSON("id", lockkey.Text())(c)
	})
	r.ServeHTTP(httptest.NewRecorder(), newRequest("POST", "/", "application/json", body))
	checkResult(t, got, "b1", nil, "")
}
