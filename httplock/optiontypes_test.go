package httplock_test

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// An option of another middleware or of the decorator, passed to Lock,
// does not compile (and the other way round): misuse is a build error,
// never a panic at run time. The snippets are built with go build
// -overlay, as a package that exists only for the build.
func TestOptionTypesDoNotMix(t *testing.T) {
	if testing.Short() {
		t.Skip("runs go build")
	}
	tests := []struct {
		name, code, want string
	}{
		{"decorator option to httplock.Lock",
			`var _ = httplock.Lock(nil, nil, decorator.WithReleaseError(nil))`,
			"as httplock.Option value in argument to httplock.Lock"},
		{"httplock option to decorator.Do",
			`var _ = decorator.Do(nil, nil, "", padlock.Options{}, nil, httplock.WithEchoKey())`,
			"as decorator.Option value in argument to decorator.Do"},
		{"lockkey body option to httplock.Lock",
			`var _ = httplock.Lock(nil, nil, lockkey.WithMaxBodyBytes(1))`,
			"as httplock.Option value in argument to httplock.Lock"},
		{"matching types compile", `var _ = httplock.Lock(nil, nil, httplock.WithEchoKey())`, ""},
	}
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go tool on PATH")
	}
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			src := filepath.Join(dir, "x.go")
			code := `package optioncheck

import (
	"github.com/padlockgo/padlock"
	"github.com/padlockgo/padlock/decorator"
	"github.com/padlockgo/padlock/httplock"
	"github.com/padlockgo/padlock/lockkey"
)

var (
	_ = padlock.Options{}
	_ = decorator.ErrKey
	_ = lockkey.Sep
)

` + tt.code + "\n"
			if err := os.WriteFile(src, []byte(code), 0o644); err != nil {
				t.Fatal(err)
			}
			pkg := filepath.Join(root, "internal", "optioncheck")
			overlay, _ := json.Marshal(map[string]any{"Replace": map[string]string{filepath.Join(pkg, "x.go"): src}})
			ov := filepath.Join(dir, "overlay.json")
			if err := os.WriteFile(ov, overlay, 0o644); err != nil {
				t.Fatal(err)
			}
			cmd := exec.Command(gobin, "build", "-overlay", ov, "./internal/optioncheck")
			cmd.Dir = root
			out, err := cmd.CombinedOutput()
			switch {
			case tt.want == "" && err != nil:
				t.Fatalf("got build error %v: %s, want it to compile", err, out)
			case tt.want != "" && (err == nil || !strings.Contains(string(out), tt.want)):
				t.Fatalf("got build result %v: %s, want an error saying %q", err, out, tt.want)
			}
		})
	}
}
