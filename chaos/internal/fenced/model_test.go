package fenced

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
)

func write(client int, key string, fence int64, value string, call, ret int64, ok bool) porcupine.Operation {
	return porcupine.Operation{ClientId: client, Input: Input{Key: key, Write: true, Fence: fence, Value: value},
		Call: call, Output: Output{OK: ok}, Return: ret}
}

func read(client int, key string, call, ret int64, fence int64, value string) porcupine.Operation {
	return porcupine.Operation{ClientId: client, Input: Input{Key: key},
		Call: call, Output: Output{OK: true, Fence: fence, Value: value}, Return: ret}
}

func pending(client int, key string, fence int64, value string, call int64) porcupine.Operation {
	return porcupine.Operation{ClientId: client, Input: Input{Key: key, Write: true, Fence: fence, Value: value},
		Call: call, Output: Output{Unknown: true}, Return: math.MaxInt64}
}

// The model must be able to fail: each broken history here is one a
// store without fencing, or with a wrong fence rule, would produce.
func TestModel(t *testing.T) {
	tests := []struct {
		name    string
		history []porcupine.Operation
		want    porcupine.CheckResult
	}{
		{"sequential holders, stale write rejected", []porcupine.Operation{
			write(0, "k", 10, "a", 0, 1, true),
			write(1, "k", 20, "b", 2, 3, true),
			write(0, "k", 10, "a2", 4, 5, false), // A woke up after B took over
			read(2, "k", 6, 7, 20, "b"),
		}, porcupine.Ok},
		{"one holder writes twice with its fence", []porcupine.Operation{
			write(0, "k", 10, "claim", 0, 1, true),
			write(0, "k", 10, "commit", 2, 3, true),
			read(1, "k", 4, 5, 10, "commit"),
		}, porcupine.Ok},
		{"broken: stale write accepted after a newer one returned", []porcupine.Operation{
			write(0, "k", 20, "b", 0, 1, true),
			write(1, "k", 10, "a", 2, 3, true),
		}, porcupine.Illegal},
		{"broken: newest write rejected", []porcupine.Operation{
			write(0, "k", 10, "a", 0, 1, true),
			write(1, "k", 20, "b", 2, 3, false),
		}, porcupine.Illegal},
		{"broken: first write rejected by an empty register", []porcupine.Operation{
			write(0, "k", 10, "a", 0, 1, false),
		}, porcupine.Illegal},
		{"concurrent writes both accepted: the older went first", []porcupine.Operation{
			write(0, "k", 20, "b", 0, 10, true),
			write(1, "k", 10, "a", 1, 9, true),
			read(2, "k", 11, 12, 20, "b"),
		}, porcupine.Ok},
		{"broken: concurrent writes both accepted, yet the older one is read last", []porcupine.Operation{
			write(0, "k", 20, "b", 0, 10, true),
			write(1, "k", 10, "a", 1, 9, true),
			read(2, "k", 11, 12, 10, "a"),
		}, porcupine.Illegal},
		{"broken: read of a value never written", []porcupine.Operation{
			write(0, "k", 10, "a", 0, 1, true),
			read(1, "k", 2, 3, 10, "x"),
		}, porcupine.Illegal},
		{"a killed writer's write took effect", []porcupine.Operation{
			pending(0, "k", 10, "a", 0),
			read(1, "k", 5, 6, 10, "a"),
			write(2, "k", 20, "b", 7, 8, true),
		}, porcupine.Ok},
		{"a killed writer's write never arrived", []porcupine.Operation{
			pending(0, "k", 10, "a", 0),
			read(1, "k", 5, 6, 0, ""),
			write(2, "k", 20, "b", 7, 8, true),
			read(1, "k", 9, 10, 20, "b"),
		}, porcupine.Ok},
		{"unfenced writes are always accepted", []porcupine.Operation{
			write(0, "k", 0, "a", 0, 1, true),
			write(1, "k", 0, "b", 2, 3, true),
			read(2, "k", 4, 5, 0, "b"),
		}, porcupine.Ok},
		{"broken: unfenced write rejected", []porcupine.Operation{
			write(0, "k", 0, "a", 0, 1, false),
		}, porcupine.Illegal},
		{"keys are independent", []porcupine.Operation{
			write(0, "k1", 20, "b", 0, 1, true),
			write(1, "k2", 10, "a", 2, 3, true),
			read(2, "k1", 4, 5, 20, "b"),
			read(2, "k2", 6, 7, 10, "a"),
		}, porcupine.Ok},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, _ := Check(tt.history, 10*time.Second)
			if got != tt.want {
				t.Fatalf("got %v, want %v", got, tt.want)
			}
		})
	}
}

// The store itself, driven by concurrent clients with random fences over
// HTTP, gives linearizable histories, and StaleAccepted finds nothing in
// its log.
func TestStoreLinearizable(t *testing.T) {
	s := NewStore()
	srv := httptest.NewServer(s)
	defer srv.Close()
	c := Client{Base: srv.URL}
	ctx := context.Background()

	var (
		mu      sync.Mutex
		history []porcupine.Operation
		wg      sync.WaitGroup
	)
	for client := range 4 {
		wg.Go(func() {
			r := rand.New(rand.NewPCG(uint64(client), 1))
			for i := range 50 {
				key := fmt.Sprintf("k%d", r.IntN(2))
				op := porcupine.Operation{ClientId: client, Call: time.Now().UnixNano()}
				if r.IntN(3) == 0 {
					fence, value, err := c.Read(ctx, key)
					if err != nil {
						t.Error(err)
						return
					}
					op.Input, op.Output = Input{Key: key}, Output{OK: true, Fence: fence, Value: value}
				} else {
					fence, value := int64(r.IntN(20)+1), fmt.Sprintf("c%d-%d", client, i)
					ok, err := c.Write(ctx, key, fence, value)
					if err != nil {
						t.Error(err)
						return
					}
					op.Input, op.Output = Input{Key: key, Write: true, Fence: fence, Value: value}, Output{OK: ok}
				}
				op.Return = time.Now().UnixNano()
				mu.Lock()
				history = append(history, op)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if res, _ := Check(history, 30*time.Second); res != porcupine.Ok {
		t.Fatalf("store history: got %v, want linearizable", res)
	}
	if n := StaleAccepted(s.Log()); n != 0 {
		t.Fatalf("StaleAccepted: got %d, want 0", n)
	}
	if Rejected(s.Log()) == 0 {
		t.Fatalf("Rejected: got 0, want some writes with random fences turned away")
	}
}

func TestStaleAccepted(t *testing.T) {
	log := []Entry{
		{Key: "k", Write: true, Fence: 10, OK: true},
		{Key: "k", Write: true, Fence: 20, OK: true},
		{Key: "k", Write: true, Fence: 10, OK: true}, // what a broken store would do
		{Key: "k", Write: true, Fence: 5, OK: false},
		{Key: "j", Write: true, Fence: 1, OK: true},
		{Key: "k", Write: true, Fence: 0, OK: true}, // unfenced
	}
	if got := StaleAccepted(log); got != 1 {
		t.Fatalf("StaleAccepted: got %d, want 1", got)
	}
	if got := Rejected(log); got != 1 {
		t.Fatalf("Rejected: got %d, want 1", got)
	}
}
