package idempotency_test

import (
	"os/exec"
	"strings"
	"testing"
)

// What a user compiles is part of the design: the net/http middleware
// compiles no gin (nor what gin drags in); only the Gin face does.
func TestNoGinDependency(t *testing.T) {
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command on PATH")
	}
	forbidden := []string{"github.com/gin-gonic/", "github.com/quic-go/", "go.mongodb.org/", "github.com/bytedance/sonic"}
	tests := []struct {
		pkg     string
		wantGin bool
	}{
		{"github.com/padlockgo/padlock/idempotency", false},
		{"github.com/padlockgo/padlock/idempotency/ginidem", true},
	}
	for _, tt := range tests {
		out, err := exec.Command(gobin, "list", "-deps", tt.pkg).Output()
		if err != nil {
			t.Fatalf("go list -deps %s: %v", tt.pkg, err)
		}
		gotGin := false
		for _, dep := range strings.Fields(string(out)) {
			for _, f := range forbidden {
				if strings.HasPrefix(dep, f) {
					gotGin = true
					if !tt.wantGin {
						t.Errorf("got %s among the dependencies of %s, want none from %s", dep, tt.pkg, f)
					}
				}
			}
		}
		// The check itself works: the Gin face does list gin.
		if tt.wantGin && !gotGin {
			t.Errorf("got no gin among the dependencies of %s, want it (is the check blind?)", tt.pkg)
		}
	}
}
