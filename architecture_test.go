package padlock_test

import (
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
