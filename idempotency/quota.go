package idempotency

import (
	"context"
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
	//go:embed lua/quota_check.lua
	quotaCheckLua    string
	quotaCheckScript = redis.NewScript(quotaCheckLua)

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

// quotaKeys returns the Redis keys of the quota of caller (its escaped key
// part): the caller's records and their bytes. Both carry a hash tag made
// of a digest of the caller, so one script reaches both on Cluster
// whatever the caller holds, and the keys stay short.
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

// getChecked is get plus, when q is on, a check that caller has room for
// one more record, in the same round trip. over is how long until it has
// room, 0 when it has.
func (s recordStore) getChecked(ctx context.Context, key string, q quota, qkeys []string) (r record, ok bool, over time.Duration, err error) {
	if !q.on() {
		r, ok, err = s.get(ctx, key)
		return r, ok, 0, err
	}
	pipe := s.rdb.Pipeline()
	get := pipe.Get(ctx, key)
	args := []any{q.responses, q.bytes}
	chk := quotaCheckScript.EvalSha(ctx, pipe, qkeys, args...)
	_, _ = pipe.Exec(ctx) // each command's error is read below
	r, ok, err = s.decode(get)
	if err != nil || ok {
		return r, ok, 0, err
	}
	ms, err := rerun(ctx, s.rdb, chk, quotaCheckScript, qkeys, args...).Int64()
	if err != nil {
		return r, false, 0, fmt.Errorf("idempotency: checking the caller's quota: %w", err)
	}
	return r, false, time.Duration(ms) * time.Millisecond, nil
}

// putCounted is put plus, when q is on, counting the record against its
// caller's quota, in the same round trip.
func (s recordStore) putCounted(ctx context.Context, key string, r *record, body []byte, q quota, qkeys []string) (stored bool, err error) {
	if !q.on() {
		return s.put(ctx, key, r, body)
	}
	enc := r.encode(body)
	pipe := s.rdb.Pipeline()
	set := pipe.SetNX(ctx, key, enc, s.retention)
	args := []any{len(enc) + len(key), key, s.retention.Milliseconds()}
	add := quotaAddScript.EvalSha(ctx, pipe, qkeys, args...)
	_, _ = pipe.Exec(ctx)
	if stored, err = set.Result(); err != nil {
		return false, fmt.Errorf("idempotency: storing the record: %w", err)
	}
	if stored {
		if err := rerun(ctx, s.rdb, add, quotaAddScript, qkeys, args...).Err(); err != nil {
			// Stored, not counted: the quota is a bound on growth, and
			// one uncounted record does not break it.
			return true, fmt.Errorf("idempotency: counting the record against the caller's quota: %w", err)
		}
	}
	return stored, nil
}
