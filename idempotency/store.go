package idempotency

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/redis/go-redis/v9"
)

// A record is what Idempotency keeps in Redis for a key after its first
// request ran: the response to replay, or a marker saying it cannot be
// replayed. It is one string value, so the replay path is one GET:
//
//	version   1 byte, recordVersion
//	kind      1 byte, recordResponse or recordNotReplayable
//	fp        uvarint length, then the request fingerprint
//	status    uvarint
//	headers   uvarint count, then per field: uvarint length and name,
//	          uvarint count of values, then per value: uvarint length and value
//	body      the rest (empty for recordNotReplayable)
type record struct {
	kind        byte
	fingerprint string
	status      int
	header      http.Header // on decode: only with decodeHeader
	body        string      // on decode

	rawHeader string // the encoded headers, on decode
}

const (
	recordVersion = 1

	recordResponse      = 0 // a response to replay
	recordNotReplayable = 1 // the request ran; its response was not kept
)

var errBadRecord = errors.New("idempotency: malformed record in Redis")

// encode returns r with body (r.body is for decoding) in the record format,
// in one allocation.
func (r *record) encode(body []byte) []byte {
	n := 2 + uvarintLen(len(r.fingerprint)) + len(r.fingerprint) + uvarintLen(r.status) + uvarintLen(len(r.header))
	for name, vals := range r.header {
		n += uvarintLen(len(name)) + len(name) + uvarintLen(len(vals))
		for _, v := range vals {
			n += uvarintLen(len(v)) + len(v)
		}
	}
	n += len(body)
	b := make([]byte, 0, n)
	b = append(b, recordVersion, r.kind)
	b = appendString(b, r.fingerprint)
	b = binary.AppendUvarint(b, uint64(r.status))
	b = binary.AppendUvarint(b, uint64(len(r.header)))
	for name, vals := range r.header {
		b = appendString(b, name)
		b = binary.AppendUvarint(b, uint64(len(vals)))
		for _, v := range vals {
			b = appendString(b, v)
		}
	}
	return append(b, body...)
}

// decodeRecord parses s without copying: the fields are substrings of s.
// The headers stay encoded until writeHeader.
func decodeRecord(s string) (record, error) {
	var r record
	d := decoder{s: s}
	if len(s) < 2 || s[0] != recordVersion || (s[1] != recordResponse && s[1] != recordNotReplayable) {
		return r, errBadRecord
	}
	r.kind = s[1]
	d.i = 2
	r.fingerprint = d.string()
	r.status = d.int()
	start := d.i
	for n := d.count(); n > 0 && !d.bad; n-- {
		d.string()
		for m := d.count(); m > 0 && !d.bad; m-- {
			d.string()
		}
	}
	if d.bad || r.status < 100 || r.status > 999 {
		return r, errBadRecord
	}
	r.rawHeader = s[start:d.i]
	r.body = s[d.i:]
	return r, nil
}

// writeHeader sets the record's header fields in h, replacing the values
// h has for them.
func (r *record) writeHeader(h http.Header) {
	d := decoder{s: r.rawHeader}
	for range d.count() {
		name := d.string()
		vals := make([]string, d.count())
		for i := range vals {
			vals[i] = d.string()
		}
		h[name] = vals
	}
}

// decoder reads uvarints and length-prefixed strings from s; on malformed
// input it sets bad and returns zero values from then on.
type decoder struct {
	s   string
	i   int
	bad bool
}

func (d *decoder) int() int {
	var x uint64
	for shift := 0; !d.bad; shift += 7 {
		if d.i >= len(d.s) || shift > 28 {
			d.bad = true
			break
		}
		c := d.s[d.i]
		d.i++
		x |= uint64(c&0x7f) << shift
		if c < 0x80 {
			// No count or length here reaches 2^28; larger is corrupt.
			if x >= 1<<28 {
				d.bad = true
				break
			}
			return int(x)
		}
	}
	return 0
}

// count reads a count of items that take at least a byte each: more than
// the bytes left is corrupt.
func (d *decoder) count() int {
	n := d.int()
	if n > len(d.s)-d.i {
		d.bad = true
		return 0
	}
	return n
}

func (d *decoder) string() string {
	n := d.int()
	if d.bad || n > len(d.s)-d.i {
		d.bad = true
		return ""
	}
	s := d.s[d.i : d.i+n]
	d.i += n
	return s
}

func appendString(b []byte, s string) []byte {
	return append(binary.AppendUvarint(b, uint64(len(s))), s...)
}

func uvarintLen(n int) int {
	l := 1
	for ; n >= 0x80; n >>= 7 {
		l++
	}
	return l
}

// recordStore reads and writes records in Redis.
type recordStore struct {
	rdb       redis.UniversalClient
	retention time.Duration
}

// get returns the record at key: one GET. ok is false when there is none.
func (s recordStore) get(ctx context.Context, key string) (r record, ok bool, err error) {
	return s.decode(s.rdb.Get(ctx, key))
}

// decode returns the record cmd read.
func (s recordStore) decode(cmd *redis.StringCmd) (r record, ok bool, err error) {
	v, err := cmd.Result()
	switch {
	case errors.Is(err, redis.Nil):
		return r, false, nil
	case err != nil:
		return r, false, fmt.Errorf("idempotency: reading the record: %w", err)
	}
	r, err = decodeRecord(v)
	return r, err == nil, err
}

// put stores r at key for the retention, unless a record is there already
// (then stored is false): a record, once written, is never replaced, so
// every replay returns the same answer.
func (s recordStore) put(ctx context.Context, key string, r *record, body []byte) (stored bool, err error) {
	stored, err = s.rdb.SetNX(ctx, key, r.encode(body), s.retention).Result()
	if err != nil {
		return false, fmt.Errorf("idempotency: storing the record: %w", err)
	}
	return stored, nil
}
