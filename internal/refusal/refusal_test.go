package refusal

import (
	"context"
	"testing"
)

func TestWatch(t *testing.T) {
	if From(context.Background()) != nil {
		t.Fatal("From a bare context: got a Watch, want nil")
	}
	ctx, w := With(context.Background())
	if From(ctx) != w || w.Refused() {
		t.Fatalf("got %p refused %v, want %p not refused", From(ctx), w.Refused(), w)
	}
	From(ctx).Mark()
	if !w.Refused() {
		t.Fatal("after Mark: got not refused, want refused")
	}
}
