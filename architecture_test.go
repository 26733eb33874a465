package padlock_test

import (
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestArchitectureNamesEverything checks that ARCHITECTURE.md names, in
// backquotes, every non-test Go file of the root package and every
// directory that holds Go files: the map must not fall behind the code.
func TestArchitectureNamesEverything(t *testing.T) {
	doc, err := os.ReadFile("ARCHITECTURE.md")
	if err != nil {
		t.Fatal(err)
	}
	named := func(s string) bool { return strings.Contains(string(doc), "`"+s+"`") }

	roots, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	files := 0
	for _, f := range roots {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		files++
		if !named(f) {
			t.Errorf("ARCHITECTURE.md does not name the root file %s: add it to the code map", f)
		}
	}
	if files == 0 {
		t.Fatal("no root Go files found: is the test running in the repository root?")
	}

	// And every root file it names is there: the map names no file gone.
	for _, m := range regexp.MustCompile("`([a-z0-9_]+\\.go)`").FindAllSubmatch(doc, -1) {
		if _, err := os.Stat(string(m[1])); err != nil {
			t.Errorf("ARCHITECTURE.md names %s, which is not in the root package", m[1])
		}
	}

	dirs := map[string]bool{}
	err = filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && path != "." && (strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata") {
			return filepath.SkipDir
		}
		if !d.IsDir() && strings.HasSuffix(path, ".go") {
			if dir := filepath.ToSlash(filepath.Dir(path)); dir != "." {
				dirs[dir] = true
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(dirs) == 0 {
		t.Fatal("no package directories found")
	}
	for dir := range dirs {
		if !named(dir) {
			t.Errorf("ARCHITECTURE.md does not name the package directory %s: add it to the code map", dir)
		}
	}
}

// crossCutting are the root test files that mirror no source file: suites
// that span the package, and the files every test leans on. Each is named
// in ARCHITECTURE.md's map of the tests, and each says why it stands
// apart. Keep the list short: a test proves one file's promise, and lives
// beside that file.
var crossCutting = map[string]string{
	"acl_test.go":              "docs/acl.md's permissions, for every operation on every deployment",
	"architecture_test.go":     "this map's own checks",
	"bench_test.go":            "the lock cycle's benchmarks beside the go-redis floors they are read against",
	"bubble_test.go":           "the synctest bubble that tests of timing run in",
	"bubble_internal_test.go":  "the same bubble for the tests of package padlock",
	"contract_test.go":         "the contract every store keeps, run on each deployment",
	"example*_test.go":         "the Examples: the documentation, one call sequence each",
	"explore*_test.go":         "the explorer: every primitive under seeded faults",
	"export_test.go":           "what the external tests may use of the package's insides",
	"helpers_test.go":          "helpers that more than one external test file uses",
	"helpers_internal_test.go": "helpers that more than one internal test file uses",
	"main_test.go":             "TestMain",
}

// TestTestFilesMirrorTheCode checks that every root test file either
// mirrors a source file (x_test.go or x_internal_test.go for x.go) or is
// one of the cross-cutting files above, so that a reader finds a
// promise's tests beside the file that keeps it. A mirroring file's name
// says its package: x_internal_test.go is package padlock, x_test.go
// package padlock_test.
func TestTestFilesMirrorTheCode(t *testing.T) {
	doc, err := os.ReadFile("ARCHITECTURE.md")
	if err != nil {
		t.Fatal(err)
	}
	for pattern := range crossCutting {
		if !strings.Contains(string(doc), "`"+pattern+"`") {
			t.Errorf("ARCHITECTURE.md's map of the tests does not name the cross-cutting %s: add it there", pattern)
		}
	}

	tests, err := filepath.Glob("*_test.go")
	if err != nil {
		t.Fatal(err)
	}
	if len(tests) == 0 {
		t.Fatal("no root test files found: is the test running in the repository root?")
	}
	fset := token.NewFileSet()
	for _, f := range tests {
		if apart(f) {
			continue
		}
		internal := strings.HasSuffix(f, "_internal_test.go")
		source := strings.TrimSuffix(strings.TrimSuffix(f, "_test.go"), "_internal") + ".go"
		if _, err := os.Stat(source); err != nil {
			t.Errorf("%s mirrors no source file (there is no %s): put its tests beside the file whose promise each proves, "+
				"in <file>_test.go (package padlock_test) or <file>_internal_test.go (package padlock), "+
				"its shared helpers in helpers_test.go or helpers_internal_test.go; "+
				"a suite that spans the package goes in crossCutting here and in ARCHITECTURE.md's map of the tests", f, source)
			continue
		}
		af, err := parser.ParseFile(fset, f, nil, parser.PackageClauseOnly)
		if err != nil {
			t.Fatal(err)
		}
		want := "padlock_test"
		if internal {
			want = "padlock"
		}
		if got := af.Name.Name; got != want {
			t.Errorf("%s is package %s, want %s: a mirroring file in package padlock is named <file>_internal_test.go, "+
				"one in package padlock_test <file>_test.go", f, got, want)
		}
	}
}

// apart reports whether the test file f is one of the cross-cutting files.
func apart(f string) bool {
	for pattern := range crossCutting {
		if ok, _ := filepath.Match(pattern, f); ok {
			return true
		}
	}
	return false
}
