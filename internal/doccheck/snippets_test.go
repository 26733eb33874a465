package doccheck

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"go/ast"
	"go/importer"
	"go/parser"
	"go/token"
	"go/types"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
)

// packages are the names a snippet may use without importing, and where
// they come from. module is the directory of the module that has them.
var packages = map[string]struct{ path, module string }{
	"context":     {"context", "."},
	"errors":      {"errors", "."},
	"fmt":         {"fmt", "."},
	"http":        {"net/http", "."},
	"httptest":    {"net/http/httptest", "."},
	"log":         {"log", "."},
	"slog":        {"log/slog", "."},
	"strconv":     {"strconv", "."},
	"strings":     {"strings", "."},
	"testing":     {"testing", "."},
	"time":        {"time", "."},
	"chi":         {"github.com/go-chi/chi/v5", "."},
	"gin":         {"github.com/gin-gonic/gin", "."},
	"redis":       {"github.com/redis/go-redis/v9", "."},
	"padlock":     {"github.com/padlockgo/padlock", "."},
	"decorator":   {"github.com/padlockgo/padlock/decorator", "."},
	"httplock":    {"github.com/padlockgo/padlock/httplock", "."},
	"idempotency": {"github.com/padlockgo/padlock/idempotency", "."},
	"ginidem":     {"github.com/padlockgo/padlock/idempotency/ginidem", "."},
	"keyfunc":     {"github.com/padlockgo/padlock/keyfunc", "."},
	"lockkey":     {"github.com/padlockgo/padlock/lockkey", "."},
	"lockview":    {"github.com/padlockgo/padlock/lockview", "."},
	"middleware":  {"github.com/padlockgo/padlock/middleware", "."},
	"padlockotel": {"github.com/padlockgo/padlock/padlockotel", "."},
	"padlockslog": {"github.com/padlockgo/padlock/padlockslog", "."},
	"padlocktest": {"github.com/padlockgo/padlock/padlocktest", "."},
	"schedule":    {"github.com/padlockgo/padlock/schedule", "."},
	"gocron":      {"github.com/go-co-op/gocron/v2", "gocronlock"},
	"gocronlock":  {"github.com/padlockgo/padlock/gocronlock", "gocronlock"},
}

// prelude declares the names every snippet may use, and the package each
// one's type comes from.
var prelude = []struct{ name, typ, pkg string }{
	{"ctx", "context.Context", "context"},
	{"rdb", "*redis.Client", "redis"},
	{"locker", "*padlock.Locker", "padlock"},
	{"r", "*gin.Engine", "gin"},
	{"mux", "*http.ServeMux", "http"},
	{"logger", "*slog.Logger", "slog"},
	{"t", "*testing.T", "testing"},
}

// inModule reports whether package name can be imported by a snippet
// compiled in module: the gocronlock module does not require gin.
func inModule(name, module string) bool {
	return module == "." || name != "gin" && name != "chi"
}

// snippet is one ```go block of a Markdown file.
type snippet struct {
	file      string // repository path of the Markdown file
	line      int    // line of the block's first line of code
	code      string
	directive string // the HTML comment above the block, without <!-- -->
	dirLine   int    // line of the directive's first line
}

var exampleRE = regexp.MustCompile(`^the body of (Example\w*) in (\S+)$`)

// TestSnippetsCompile type-checks every Go snippet of the repository's
// Markdown as the package documentation describes.
func TestSnippetsCompile(t *testing.T) {
	root := repoRoot(t)
	var all []snippet
	for _, f := range repoFiles(t, root, ".md") {
		b, err := os.ReadFile(filepath.Join(root, f))
		if err != nil {
			t.Fatal(err)
		}
		all = append(all, snippets(f, string(b))...)
	}
	if len(all) < 20 {
		t.Fatalf("found %d Go snippets, want the README's and the guides' (over 20)", len(all))
	}
	byModule := make(map[string][]snippet)
	for _, s := range all {
		if exampleRE.MatchString(s.directive) {
			continue // TestSnippetsMatchExamples
		}
		byModule[snippetModule(s)] = append(byModule[snippetModule(s)], s)
	}
	for module, ss := range byModule {
		var names []string
		for _, s := range ss {
			names = append(names, imports(s)...)
		}
		imp := moduleImporter(t, filepath.Join(root, module), names)
		for _, s := range ss {
			if err := typeCheck(s, imp); err != nil {
				t.Errorf("%v", err)
			}
		}
	}
}

// TestSnippetsMatchExamples checks that each snippet marked as the body
// of an Example is, character for character.
func TestSnippetsMatchExamples(t *testing.T) {
	root := repoRoot(t)
	n := 0
	for _, f := range repoFiles(t, root, ".md") {
		b, err := os.ReadFile(filepath.Join(root, f))
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range snippets(f, string(b)) {
			m := exampleRE.FindStringSubmatch(s.directive)
			if m == nil {
				continue
			}
			n++
			src, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(m[2])))
			if err != nil {
				t.Errorf("%s:%d: %v", s.file, s.dirLine, err)
				continue
			}
			body, ok := exampleBody(string(src), m[1])
			if !ok {
				t.Errorf("%s:%d: %s has no func %s", s.file, s.dirLine, m[2], m[1])
				continue
			}
			if s.code != body {
				t.Errorf("%s:%d: the snippet differs from %s's body in %s:\ngot:\n%s\nwant:\n%s", s.file, s.line, m[1], m[2], s.code, body)
			}
		}
	}
	if n == 0 {
		t.Error("no snippet is marked as an Example's body; the Redlock guide's is")
	}
}

// TestSnippetCheckerCatchesBreaks feeds the checker snippets that must
// fail and snippets that must pass, so TestSnippetsCompile cannot pass by
// checking nothing.
func TestSnippetCheckerCatchesBreaks(t *testing.T) {
	var names []string
	for n, p := range packages {
		if p.module == "." {
			names = append(names, n)
		}
	}
	imp := moduleImporter(t, repoRoot(t), names)
	for _, tc := range []struct {
		name string
		s    snippet
		ok   bool
	}{
		{"body", snippet{code: "lk, err := locker.Acquire(ctx, \"k\", padlock.Options{})\nif err != nil {\n\treturn err\n}\ndefer lk.Release(ctx)\n"}, true},
		{"unused names are fine", snippet{code: "lk, err := locker.Acquire(ctx, \"k\", padlock.Options{})\n"}, true},
		{"bare return", snippet{code: "return\n"}, true},
		{"declarations", snippet{directive: "go\nvar store interface{ Pay(context.Context, int64) error }", code: "return store.Pay(ctx, 42)\n"}, true},
		{"file", snippet{directive: "go: file", code: "type orderURI struct {\n\tID int64 `uri:\"id\"`\n}\n\nfunc key(c *gin.Context) (int64, error) {\n\tvar u orderURI\n\treturn u.ID, c.ShouldBindUri(&u)\n}\n"}, true},
		{"a name that is gone", snippet{code: "locker.AcquireMaybe(ctx, \"k\")\n"}, false},
		{"a wrong argument", snippet{code: "locker.Acquire(ctx, 42, padlock.Options{})\n"}, false},
		{"an option that is gone", snippet{code: "_ = padlock.Options{Lease: 1}\n"}, false},
		{"not Go", snippet{code: "for x := range y { ... }\n"}, false},
		{"an undeclared name", snippet{code: "return store.Pay(ctx, 42)\n"}, false},
	} {
		tc.s.file, tc.s.line = "test.md", 1
		err := typeCheck(tc.s, imp)
		if (err == nil) != tc.ok {
			t.Errorf("%s: got error %v, want ok %v", tc.name, err, tc.ok)
		}
	}
}

// snippets returns the ```go blocks of a Markdown text, each with the
// HTML comment just above it, if any.
func snippets(file, text string) []snippet {
	lines := strings.Split(text, "\n")
	var out []snippet
	for i := 0; i < len(lines); i++ {
		if strings.TrimSpace(lines[i]) != "```go" {
			continue
		}
		s := snippet{file: file, line: i + 2}
		j := i + 1
		for ; j < len(lines) && !strings.HasPrefix(strings.TrimSpace(lines[j]), "```"); j++ {
			s.code += lines[j] + "\n"
		}
		// The comment ends on the line above the fence (blank lines between
		// are allowed) and may span lines.
		k := i - 1
		for k >= 0 && strings.TrimSpace(lines[k]) == "" {
			k--
		}
		if k >= 0 && strings.HasSuffix(strings.TrimSpace(lines[k]), "-->") {
			start := k
			for start >= 0 && !strings.Contains(lines[start], "<!--") {
				start--
			}
			if start >= 0 {
				c := strings.Join(lines[start:k+1], "\n")
				c = c[strings.Index(c, "<!--")+len("<!--") : strings.LastIndex(c, "-->")]
				s.directive = strings.TrimSpace(c)
				s.dirLine = start + 1
			}
		}
		out = append(out, s)
		i = j
	}
	return out
}

// exampleBody returns the body of func name in src, one tab removed from
// each line, as it would be shown in Markdown.
func exampleBody(src, name string) (string, bool) {
	_, body, ok := strings.Cut(src, "func "+name+"() {\n")
	if !ok {
		return "", false
	}
	body, _, ok = strings.Cut(body, "\n}\n")
	if !ok {
		return "", false
	}
	var b strings.Builder
	for line := range strings.Lines(body + "\n") {
		b.WriteString(strings.TrimPrefix(line, "\t"))
	}
	return b.String(), true
}

var identRE = regexp.MustCompile(`\b([a-z][a-z0-9]*)\.`)

// usedPackages returns the names of packages src refers to.
func usedPackages(src string) []string {
	seen := make(map[string]bool)
	for _, m := range identRE.FindAllStringSubmatch(src, -1) {
		if _, ok := packages[m[1]]; ok {
			seen[m[1]] = true
		}
	}
	names := make([]string, 0, len(seen))
	for n := range seen {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// snippetModule returns the module directory a snippet compiles in: the
// gocronlock module's for one that names its packages.
func snippetModule(s snippet) string {
	for _, n := range usedPackages(s.directive + "\n" + s.code) {
		if m := packages[n].module; m != "." {
			return m
		}
	}
	return "."
}

// imports returns the names of the packages a snippet's file imports: those
// it names, and those of the prelude's types.
func imports(s snippet) []string {
	module := snippetModule(s)
	names := usedPackages(s.directive + "\n" + s.code)
	for _, p := range prelude {
		if inModule(p.pkg, module) && !slices.Contains(names, p.pkg) {
			names = append(names, p.pkg)
		}
	}
	sort.Strings(names)
	return names
}

// source returns the Go file a snippet is checked as, with //line
// directives that point errors at the Markdown.
func source(s snippet) string {
	decls, file := "", false
	switch {
	case s.directive == "go: file" || strings.HasPrefix(s.directive, "go: file\n"):
		file = true
		decls = strings.TrimPrefix(strings.TrimPrefix(s.directive, "go: file"), "\n")
	case s.directive == "go" || strings.HasPrefix(s.directive, "go\n"):
		decls = strings.TrimPrefix(strings.TrimPrefix(s.directive, "go"), "\n")
	}
	var b strings.Builder
	b.WriteString("package snippet\n\nimport (\n")
	for _, n := range imports(s) {
		fmt.Fprintf(&b, "\t%s %q\n", n, packages[n].path)
	}
	b.WriteString(")\n\nvar (\n")
	module := snippetModule(s)
	for _, p := range prelude {
		if inModule(p.pkg, module) {
			fmt.Fprintf(&b, "\t%s %s\n", p.name, p.typ)
		}
	}
	b.WriteString(")\n")
	if decls != "" {
		fmt.Fprintf(&b, "\n//line %s:%d\n%s\n", s.file, s.dirLine+1, decls)
	}
	if file {
		fmt.Fprintf(&b, "\n//line %s:%d\n%s", s.file, s.line, s.code)
	} else {
		fmt.Fprintf(&b, "\nfunc _() (_ error) {\n//line %s:%d\n%s\n\treturn\n}\n", s.file, s.line, s.code)
	}
	return b.String()
}

// typeCheck parses and type-checks a snippet, and returns its errors but
// those the package documentation lets pass.
func typeCheck(s snippet, imp types.Importer) error {
	fset := token.NewFileSet()
	src := source(s)
	f, err := parser.ParseFile(fset, "snippet.go", src, parser.SkipObjectResolution)
	if err != nil {
		return fmt.Errorf("%v\n(as checked:\n%s)", err, src)
	}
	var errs []error
	conf := types.Config{
		Importer: imp,
		Error: func(err error) {
			var te types.Error
			if errors.As(err, &te) && te.Soft && (strings.Contains(te.Msg, "declared and not used") || strings.Contains(te.Msg, "imported and not used")) {
				return
			}
			errs = append(errs, err)
		},
	}
	_, _ = conf.Check("snippet", fset, []*ast.File{f}, nil)
	return errors.Join(errs...)
}

// moduleImporter returns an importer of the compiled packages of the
// module in dir (go list -export), for the packages named and those they
// import.
func moduleImporter(t *testing.T, dir string, names []string) types.Importer {
	t.Helper()
	var paths []string
	for _, n := range names {
		paths = append(paths, packages[n].path)
	}
	slices.Sort(paths)
	paths = slices.Compact(paths)
	cmd := exec.Command("go", append([]string{"list", "-export", "-deps", "-json=ImportPath,Export,Error"}, paths...)...)
	cmd.Dir = dir
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list -export in %s: %v\n%s", dir, err, stderr.String())
	}
	exports := make(map[string]string)
	for dec := json.NewDecoder(bytes.NewReader(out)); ; {
		var p struct {
			ImportPath, Export string
			Error              *struct{ Err string }
		}
		if err := dec.Decode(&p); err == io.EOF {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		if p.Error != nil {
			t.Fatalf("go list %s: %s", p.ImportPath, p.Error.Err)
		}
		exports[p.ImportPath] = p.Export
	}
	return importer.ForCompiler(token.NewFileSet(), "gc", func(path string) (io.ReadCloser, error) {
		f, ok := exports[path]
		if !ok || f == "" {
			return nil, fmt.Errorf("no export data for %s", path)
		}
		return os.Open(f)
	})
}
