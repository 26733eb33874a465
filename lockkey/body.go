package lockkey

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
)

// DefaultMaxBodyBytes is the largest request body a JSON or form key part
// reads unless WithMaxBodyBytes says otherwise: 1 MiB.
const DefaultMaxBodyBytes = 1 << 20

// BodyOption configures how a key part reads the request body.
type BodyOption func(*bodyConfig)

type bodyConfig struct{ limit int64 }

// WithMaxBodyBytes sets the largest request body, in bytes, that a JSON or Form
// part reads; a larger one is an error matching ErrBodyTooLarge.
// Default: DefaultMaxBodyBytes. The constructor taking the option panics if
// n is not positive.
func WithMaxBodyBytes(n int64) BodyOption {
	return func(c *bodyConfig) { c.limit = n }
}

// BodyLimit returns the body limit opts set: DefaultMaxBodyBytes unless
// WithMaxBodyBytes says otherwise. A nil option or a limit that is not
// positive is an error; constructors taking options panic with it.
func BodyLimit(opts ...BodyOption) (int64, error) {
	cfg := bodyConfig{limit: DefaultMaxBodyBytes}
	for i, o := range opts {
		if o == nil {
			return 0, fmt.Errorf("BodyOption %d is nil", i+1)
		}
		o(&cfg)
	}
	if cfg.limit <= 0 {
		return 0, fmt.Errorf("WithMaxBodyBytes: %d, want > 0", cfg.limit)
	}
	return cfg.limit, nil
}

// ReadBody reads r.Body, at most limit bytes (limit <= 0 means
// DefaultMaxBodyBytes), and puts a fresh reader over the same bytes back in
// r.Body for whoever reads it next, the handler included; a body read here
// before is not read again. A body that is too large is put back whole as
// well (what was read, then the rest) and is an error matching
// ErrBodyTooLarge; one that cannot be read, ErrMalformedBody. A request
// without a body gives nil.
func ReadBody(r *http.Request, limit int64) ([]byte, error) {
	if limit <= 0 {
		limit = DefaultMaxBodyBytes
	}
	if rb, ok := r.Body.(*replayBody); ok {
		// Read by an earlier part of this key: reuse, do not copy.
		r.Body = &replayBody{Reader: bytes.NewReader(rb.data), data: rb.data, orig: rb.orig}
		if int64(len(rb.data)) > limit {
			return nil, tooLarge(limit)
		}
		return rb.data, nil
	}
	if r.Body == nil || r.Body == http.NoBody {
		return nil, nil
	}
	if r.ContentLength > limit {
		return nil, tooLarge(limit)
	}
	size := int64(512)
	if r.ContentLength >= 0 {
		size = r.ContentLength + 1 // +1 to see EOF without growing
	}
	buf := make([]byte, 0, min(size, limit+1))
	var err error
	for int64(len(buf)) <= limit {
		if len(buf) == cap(buf) {
			buf = append(buf, 0)[:len(buf)]
		}
		end := min(int64(cap(buf)), limit+1)
		var n int
		n, err = r.Body.Read(buf[len(buf):end])
		buf = buf[:len(buf)+n]
		if err != nil {
			break
		}
	}
	orig := r.Body
	switch {
	case err != nil && err != io.EOF:
		r.Body = &replayBody{Reader: io.MultiReader(bytes.NewReader(buf), orig), orig: orig}
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return nil, tooLarge(min(limit, mbe.Limit))
		}
		return nil, malformed("reading body: %v", err)
	case int64(len(buf)) > limit:
		r.Body = &replayBody{Reader: io.MultiReader(bytes.NewReader(buf), orig), orig: orig}
		return nil, tooLarge(limit)
	}
	r.Body = &replayBody{Reader: bytes.NewReader(buf), data: buf, orig: orig}
	return buf, nil
}

// replayBody is a request body that was read into data (nil when it was
// not read whole) and is served again from memory; Close closes the
// original body.
type replayBody struct {
	io.Reader
	data []byte
	orig io.ReadCloser
}

func (b *replayBody) Close() error { return b.orig.Close() }

// ParseForm parses a URL-encoded or multipart body once per request, at
// most limit bytes, and returns r.PostForm (the body only, not the query).
// The form stays in r.PostForm for the handler, but r.Body is consumed. A
// larger body is an error matching ErrBodyTooLarge; one that does not
// parse, ErrMalformedBody.
func ParseForm(r *http.Request, limit int64) (url.Values, error) {
	if r.PostForm != nil {
		return r.PostForm, nil
	}
	if r.Body != nil && r.Body != http.NoBody {
		if r.ContentLength > limit {
			return nil, tooLarge(limit)
		}
		r.Body = http.MaxBytesReader(nil, r.Body, limit)
	}
	var err error
	if ct, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type")); ct == "multipart/form-data" {
		err = r.ParseMultipartForm(limit)
	} else {
		err = r.ParseForm()
	}
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return nil, tooLarge(limit)
		}
		return nil, malformed("parsing form: %v", err)
	}
	return r.PostForm, nil
}
