package main

import (
	"context"
	"errors"
	"path/filepath"
	"testing"
)

// The database enforces the fence: a holder whose lock passed to a newer
// holder (who claimed the order) cannot pay it, however late it wakes up.
func TestStoreFence(t *testing.T) {
	type step struct {
		op      string // "claim" or "pay"
		fence   int64
		wantErr error
	}
	tests := []struct {
		name        string
		steps       []step
		wantStatus  string
		wantCharges int
	}{
		{"holder pays", []step{{"claim", 10, nil}, {"pay", 10, nil}}, statusPaid, 1},
		{"stale holder's payment refused", []step{
			{"claim", 10, nil}, // holder A
			{"claim", 20, nil}, // A's lease ran out; B took the lock and claimed
			{"pay", 10, errStale},
		}, statusPending, 0},
		{"newer holder pays after a stale one was refused", []step{
			{"claim", 10, nil}, {"claim", 20, nil}, {"pay", 10, errStale}, {"pay", 20, nil},
		}, statusPaid, 1},
		{"stale claim refused", []step{{"claim", 20, nil}, {"claim", 10, errStale}}, statusPending, 0},
		{"second payment refused", []step{{"claim", 10, nil}, {"pay", 10, nil}, {"claim", 20, nil}, {"pay", 20, errStale}}, statusPaid, 1},
		{"no fence (redlock): status alone", []step{{"claim", 0, nil}, {"pay", 0, nil}, {"pay", 0, errStale}}, statusPaid, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := context.Background()
			st, err := openStore(ctx, filepath.Join(t.TempDir(), "orders.db"))
			if err != nil {
				t.Fatal(err)
			}
			defer st.close()
			o, err := st.createOrder(ctx, "shop-1", "alice", 500, "EUR")
			if err != nil {
				t.Fatal(err)
			}
			for i, s := range tt.steps {
				switch s.op {
				case "claim":
					_, err = st.claim(ctx, "shop-1", o.ID, s.fence)
				case "pay":
					_, _, err = st.pay(ctx, "shop-1", o.ID, s.fence)
				}
				if !errors.Is(err, s.wantErr) {
					t.Fatalf("step %d (%s with fence %d): got %v, want %v", i+1, s.op, s.fence, err, s.wantErr)
				}
			}
			got, err := st.order(ctx, "shop-1", o.ID)
			if err != nil {
				t.Fatal(err)
			}
			charges, err := st.charges(ctx, o.ID)
			if err != nil {
				t.Fatal(err)
			}
			if got.Status != tt.wantStatus || len(charges) != tt.wantCharges {
				t.Fatalf("got status %s and %d charges, want %s and %d", got.Status, len(charges), tt.wantStatus, tt.wantCharges)
			}
		})
	}
}

func TestStoreNotFound(t *testing.T) {
	ctx := context.Background()
	st, err := openStore(ctx, filepath.Join(t.TempDir(), "orders.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.close()
	if _, err := st.claim(ctx, "shop-1", 7, 10); !errors.Is(err, errNotFound) {
		t.Fatalf("claim: got %v, want errNotFound", err)
	}
	if _, err := st.order(ctx, "shop-1", 7); !errors.Is(err, errNotFound) {
		t.Fatalf("order: got %v, want errNotFound", err)
	}
}
