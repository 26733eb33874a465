package idempotency

import (
	"errors"
	"net/http"
	"reflect"
	"strings"
	"testing"
)

func TestRecordRoundTrip(t *testing.T) {
	tests := []struct {
		name string
		rec  record
		body string
	}{
		{"response", record{kind: recordResponse, fingerprint: strings.Repeat("\xff", 32), status: 201, header: http.Header{
			"Content-Type": {"application/json; charset=utf-8"},
			"Location":     {"/orders/7"},
			"Vary":         {"Accept", "Origin"},
		}}, `{"id":7}`},
		{"no header, no body", record{kind: recordResponse, fingerprint: "fp", status: 204, header: http.Header{}}, ""},
		{"empty value", record{kind: recordResponse, fingerprint: "fp", status: 200, header: http.Header{"X-Empty": {""}}}, "x"},
		{"not replayable", record{kind: recordNotReplayable, fingerprint: "fp", status: 200}, ""},
		{"large", record{kind: recordResponse, fingerprint: "", status: 200, header: http.Header{"X-Big": {strings.Repeat("v", 300)}}}, strings.Repeat("b", 70000)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			enc := tt.rec.encode([]byte(tt.body))
			if len(enc) != cap(enc) {
				t.Fatalf("got len %d, cap %d, want one exact allocation", len(enc), cap(enc))
			}
			got, err := decodeRecord(string(enc))
			if err != nil {
				t.Fatalf("got error %v, want nil", err)
			}
			if got.kind != tt.rec.kind || got.fingerprint != tt.rec.fingerprint || got.status != tt.rec.status || got.body != tt.body {
				t.Fatalf("got kind %d, fp %q, status %d, body %q, want %d, %q, %d, %q",
					got.kind, got.fingerprint, got.status, got.body, tt.rec.kind, tt.rec.fingerprint, tt.rec.status, tt.body)
			}
			h := http.Header{"X-Other": {"kept"}, "Location": {"replaced"}}
			got.writeHeader(h)
			want := http.Header{"X-Other": {"kept"}}
			if len(tt.rec.header) > 0 {
				want = http.Header{"X-Other": {"kept"}, "Location": {"replaced"}}
				for k, v := range tt.rec.header {
					want[k] = v
				}
			} else {
				want["Location"] = []string{"replaced"}
			}
			if !reflect.DeepEqual(h, want) {
				t.Fatalf("got header %v, want %v", h, want)
			}
		})
	}
}

func TestDecodeRecordMalformed(t *testing.T) {
	good := string((&record{kind: recordResponse, fingerprint: "fp", status: 201, header: http.Header{"A": {"b"}}}).encode([]byte("body")))
	tests := []struct{ name, s string }{
		{"empty", ""},
		{"one byte", "\x01"},
		{"version", "\x02" + good[1:]},
		{"kind", "\x01\x07" + good[2:]},
		{"status 0", "\x01\x00\x00\x00\x00"},
		{"truncated fingerprint", good[:4]},
		{"truncated header", good[:10]},
		{"huge length", "\x01\x00\xff\xff\xff\xff\x0f"},
		{"endless varint", "\x01\x00\x80\x80\x80\x80\x80\x80\x80\x80\x80\x80"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := decodeRecord(tt.s); !errors.Is(err, errBadRecord) {
				t.Fatalf("got error %v, want %v", err, errBadRecord)
			}
		})
	}
}

// Whatever Redis holds, decoding never panics, and what decodes writes its
// header without panicking either.
func FuzzDecodeRecord(f *testing.F) {
	f.Add(string((&record{kind: recordResponse, fingerprint: "fp", status: 201, header: http.Header{"A": {"b", "c"}}}).encode([]byte("body"))))
	f.Add(string((&record{kind: recordNotReplayable, fingerprint: "fp", status: 200}).encode(nil)))
	f.Add("\x01\x00\xff\xff\xff\xff\x0f")
	f.Fuzz(func(t *testing.T, s string) {
		r, err := decodeRecord(s)
		if err != nil {
			return
		}
		r.writeHeader(http.Header{})
	})
}
