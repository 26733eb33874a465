package idempotency

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	_ "embed"
	"encoding/hex"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
)

// Defaults of the per-caller quota (see WithQuota).
const (
	// DefaultQuotaResponses is how many stored responses one caller may
	// have at once, across every route with the same WithRecordPrefix.
	DefaultQuotaResponses = 10000

	// DefaultQuotaBytes is how many bytes of stored responses (records and
	// their keys) one caller may have at once: 64 MiB.
	DefaultQuotaBytes = 64 << 20
)

var (
	//go:embed lua/quota_reserve.lua
	quotaReserveLua    string
	quotaReserveScript = redis.NewScript(quotaReserveLua)

	//go:embed lua/quota_add.lua
	quotaAddLua    string
	quotaAddScript = redis.NewScript(quotaAddLua)
)

// quota bounds what one caller keeps stored; 0 turns a bound off.
type quota struct {
	responses int
	bytes     int64
}

func (q quota) on() bool { return q.responses > 0 || q.bytes > 0 }

// A slot is a place in a caller's quota that a request reserves before its
// handler runs, so that requests running at once cannot each pass a check
// and together go over the bound: the record its response is stored in
// takes the slot over, and a request that stores nothing frees it.
type slot struct {
	keys   []string // quotaKeys; nil when the quota is off
	member string   // the reservation's member in keys[0]: "0|<id>"
}

// newSlot returns the slot a request of caller (its escaped key part)
// reserves, not reserved yet.
func newSlot(prefix, caller string) slot {
	return slot{keys: quotaKeys(prefix, caller), member: "0|" + rand.Text()}
}

// quotaKeys returns the Redis keys of the quota of caller (its escaped key
// part): the caller's records and reservations, and the records' bytes.
// Both carry a hash tag made of a digest of the caller, so one script
// reaches both on Cluster whatever the caller holds, and the keys stay
// short.
func quotaKeys(prefix, caller string) []string {
	sum := sha256.Sum256([]byte(caller))
	k := prefix + "quota:{" + hex.EncodeToString(sum[:8]) + "}"
	return []string{k, k + ":bytes"}
}

// rerun returns cmd, a script queued on a pipeline by its SHA (a pipeline
// cannot fall back to EVAL on its own), or when the server did not know
// the script (after a restart), the script run again alone, which loads it.
func rerun(ctx context.Context, rdb redis.UniversalClient, cmd *redis.Cmd, s *redis.Script, keys []string, args ...any) *redis.Cmd {
	if redis.HasErrorPrefix(cmd.Err(), "NOSCRIPT") {
		return s.Run(ctx, rdb, keys, args...)
	}
	return cmd
}

// getReserved is get plus, when q is on, the reservation of sl in its
// caller's quota when there is room, in the same round trip. over is how
// long until the caller has room, 0 when it has. reserved says whether sl
// was reserved, also when a record was found or err is not nil (the two
// commands run at once); the caller frees it then with unreserve. A
// reservation whose reply was lost stays until the retention ends, keeping
// the bound.
func (s recordStore) getReserved(ctx context.Context, key string, q quota, sl slot) (r record, ok bool, over time.Duration, reserved bool, err error) {
	if !q.on() {
		r, ok, err = s.get(ctx, key)
		return r, ok, 0, false, err
	}
	pipe := s.rdb.Pipeline()
	get := pipe.Get(ctx, key)
	args := []any{q.responses, q.bytes, sl.member, s.retention.Milliseconds()}
	res := quotaReserveScript.EvalSha(ctx, pipe, sl.keys, args...)
	_, _ = pipe.Exec(ctx) // each command's error is read below
	r, ok, err = s.decode(get)
	if err != nil || ok {
		ms, rerr := res.Int64()
		return r, ok, 0, rerr == nil && ms == 0, err
	}
	ms, err := rerun(ctx, s.rdb, res, quotaReserveScript, sl.keys, args...).Int64()
	if err != nil {
		return r, false, 0, false, fmt.Errorf("idempotency: reserving a place in the caller's quota: %w", err)
	}
	return r, false, time.Duration(ms) * time.Millisecond, ms == 0, nil
}

// unreserve frees sl, a reservation no record took over.
func (s recordStore) unreserve(ctx context.Context, sl slot) error {
	if err := s.rdb.ZRem(ctx, sl.keys[0], sl.member).Err(); err != nil {
		return fmt.Errorf("idempotency: freeing a place in the caller's quota: %w", err)
	}
	return nil
}

// putCounted is put plus, when q is on, counting the record against its
// caller's quota in place of sl, in the same round trip.
func (s recordStore) putCounted(ctx context.Context, key string, r *record, body []byte, q quota, sl slot) (stored bool, err error) {
	if !q.on() {
		return s.put(ctx, key, r, body)
	}
	enc := r.encode(body)
	pipe := s.rdb.Pipeline()
	set := pipe.SetNX(ctx, key, enc, s.retention)
	args := []any{len(enc) + len(key), key, s.retention.Milliseconds(), sl.member}
	add := quotaAddScript.EvalSha(ctx, pipe, sl.keys, args...)
	_, _ = pipe.Exec(ctx)
	if stored, err = set.Result(); err != nil {
		return false, fmt.Errorf("idempotency: storing the record: %w", err)
	}
	if stored {
		if err := rerun(ctx, s.rdb, add, quotaAddScript, sl.keys, args...).Err(); err != nil {
			// Stored, not counted: the reservation stays in its place
			// until the retention ends, as the record does, without its
			// bytes. The bound on the count holds.
			return true, fmt.Errorf("idempotency: counting the record against the caller's quota: %w", err)
		}
	}
	return stored, nil
}
