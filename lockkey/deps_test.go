package lockkey_test

import (
	"os/exec"
	"strings"
	"testing"
)

// What a user compiles is part of the design: the engine, the decorator
// and the net/http middleware, with the key packages they use, compile no
// gin (nor what gin drags in: quic-go, mongo's bson, sonic).
func TestNoGinDependency(t *testing.T) {
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command on PATH")
	}
	forbidden := []string{"github.com/gin-gonic/", "github.com/quic-go/", "go.mongodb.org/", "github.com/bytedance/sonic"}
	for _, pkg := range []string{"github.com/padlockgo/padlock", "github.com/padlockgo/padlock/decorator",
		"github.com/padlockgo/padlock/lockkey", "github.com/padlockgo/padlock/httplock"} {
		out, err := exec.Command(gobin, "list", "-deps", pkg).Output()
		if err != nil {
			t.Fatalf("go list -deps %s: %v", pkg, err)
		}
		for _, dep := range strings.Fields(string(out)) {
			for _, f := range forbidden {
				if strings.HasPrefix(dep, f) {
					t.Errorf("got %s among the dependencies of %s, want none from %s", dep, pkg, f)
				}
			}
		}
	}
}
