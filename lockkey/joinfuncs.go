package lockkey

import (
	"fmt"
	"strings"
)

// JoinFuncs returns a func that runs parts on its input in order and joins
// their results with Sep: the one loop behind keyfunc.Join (gin) and
// httplock.Join (net/http), for an adapter to another router. The first
// error stops it and is returned; a part that returns an empty string is
// an error matching ErrMissingPart that names the part. The parts are
// used as given: the caller checks them (none nil) and copies the slice.
func JoinFuncs[R any](parts []func(R) (string, error)) func(R) (string, error) {
	return func(r R) (string, error) {
		var buf [8]string
		vals := buf[:0]
		size := len(parts) - 1
		for i, part := range parts {
			v, err := part(r)
			if err != nil {
				return "", err
			}
			if v == "" {
				return "", Missing(fmt.Sprintf("part %d", i+1))
			}
			vals = append(vals, v)
			size += len(v)
		}
		var b strings.Builder
		b.Grow(size)
		for i, v := range vals {
			if i > 0 {
				b.WriteString(Sep)
			}
			b.WriteString(v)
		}
		return b.String(), nil
	}
}
