package ginidem_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/gin-gonic/gin"
	"github.com/redis/go-redis/v9"

	"github.com/padlockgo/padlock"
	"github.com/padlockgo/padlock/idempotency/ginidem"
)

// TestNewFromLocker: the middleware keeps its records through the client
// the Locker was made with: a retry is replayed, the handler runs once,
// and the record is in that Redis.
func TestNewFromLocker(t *testing.T) {
	l, _, rdb := newLocker(t)
	if l.Client() != redis.UniversalClient(rdb) {
		t.Fatal("Locker.Client is not the client New was given")
	}
	r := gin.New()
	runs := 0
	r.POST("/orders", ginidem.NewFromLocker(l, tester), func(c *gin.Context) {
		runs++
		c.JSON(http.StatusCreated, gin.H{"id": runs})
	})
	first := send(r, "POST", "/orders", `{}`, key(`"k1"`))
	if first.Code != http.StatusCreated {
		t.Fatalf("got %d %s, want 201", first.Code, first.Body)
	}
	checkReplay(t, send(r, "POST", "/orders", `{}`, key(`"k1"`)), first)
	if runs != 1 {
		t.Fatalf("got %d handler runs, want 1", runs)
	}
	if n := rdb.DBSize(t.Context()).Val(); n == 0 {
		t.Fatal("no record in the Locker's Redis")
	}
}

// TestNewFromLockerRefusesRedlock: a Redlock Locker has no one client to
// keep the records: NewFromLocker says so at construction.
func TestNewFromLockerRefusesRedlock(t *testing.T) {
	_, _, a := newLocker(t)
	_, _, b := newLocker(t)
	_, _, c := newLocker(t)
	l, err := padlock.NewRedlock([]redis.UniversalClient{a, b, c})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if l.Client() != nil {
		t.Fatal("a Redlock Locker's Client is not nil")
	}
	defer func() {
		msg, _ := recover().(string)
		if !strings.Contains(msg, "Redlock") {
			t.Fatalf("got panic %q, want one that names Redlock", msg)
		}
	}()
	ginidem.NewFromLocker(l, tester)
}
