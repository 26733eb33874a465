package keyfunc

import (
	"fmt"

	"github.com/gin-gonic/gin"

	"github.com/padlockgo/padlock/lockkey"
)

// ReadBody returns the body of c's request, at most limit bytes (limit <= 0
// means lockkey.DefaultMaxBodyBytes), reading it at most once per request:
// bytes a key part or c.ShouldBindBodyWith left under gin.BodyBytesKey are
// reused, and bytes read here are left there, so ShouldBindBodyWith in the
// handler reuses them too. c.Request.Body is restored either way, so the
// handler can still read or bind it. A larger body is an error matching
// lockkey.ErrBodyTooLarge; one that cannot be read,
// lockkey.ErrMalformedBody. Middlewares that need the body
// (ginidem.New fingerprints it) call it.
func ReadBody(c *gin.Context, limit int64) ([]byte, error) {
	if limit <= 0 {
		limit = lockkey.DefaultMaxBodyBytes
	}
	if v, ok := c.Get(gin.BodyBytesKey); ok {
		if b, ok := v.([]byte); ok {
			if int64(len(b)) > limit {
				return nil, fmt.Errorf("%w (limit %d bytes)", lockkey.ErrBodyTooLarge, limit)
			}
			return b, nil
		}
	}
	b, err := lockkey.ReadBody(c.Request, limit)
	if err != nil {
		return nil, err
	}
	c.Set(gin.BodyBytesKey, b)
	return b, nil
}

func bodyLimit(fn string, opts []lockkey.BodyOption) int64 {
	limit, err := lockkey.BodyLimit(opts...)
	if err != nil {
		panic(fmt.Sprintf("keyfunc: %s: %v", fn, err))
	}
	return limit
}
