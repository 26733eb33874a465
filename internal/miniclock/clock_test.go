package miniclock_test

import (
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"go.uber.org/goleak"

	"github.com/padlockgo/padlock/internal/miniclock"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestKeysExpireInRealTime(t *testing.T) {
	m := miniredis.NewMiniRedis()
	if err := m.Start(); err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	c := miniclock.Start(m)
	defer c.Stop()

	if err := m.Set("k", "v"); err != nil {
		t.Fatal(err)
	}
	m.SetTTL("k", 50*time.Millisecond)
	for deadline := time.Now().Add(10 * time.Second); m.Exists("k"); {
		if time.Now().After(deadline) {
			t.Fatalf("key with a 50ms TTL: got still there after 10s, want expired")
		}
		time.Sleep(miniclock.Tick)
	}
}
