package doccheck

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"go/ast"
	"go/format"
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
	"strconv"
	"strings"
	"testing"
)

// packages are the names a hidden declaration (<!-- go ... -->) may use
// without importing, and where they come from. A snippet's own code
// imports what it uses, in its import block.
var packages = map[string]string{
	"context":     "context",
	"errors":      "errors",
	"fmt":         "fmt",
	"http":        "net/http",
	"httptest":    "net/http/httptest",
	"slog":        "log/slog",
	"time":        "time",
	"gin":         "github.com/gin-gonic/gin",
	"redis":       "github.com/redis/go-redis/v9",
	"padlock":     "github.com/padlockgo/padlock",
	"decorator":   "github.com/padlockgo/padlock/decorator",
	"httplock":    "github.com/padlockgo/padlock/httplock",
	"keyfunc":     "github.com/padlockgo/padlock/keyfunc",
	"lockkey":     "github.com/padlockgo/padlock/lockkey",
	"middleware":  "github.com/padlockgo/padlock/middleware",
	"padlocktest": "github.com/padlockgo/padlock/padlocktest",
	"schedule":    "github.com/padlockgo/padlock/schedule",
}

// otherModules are the modules of the repository besides the root one,
// by the import path prefix that sends a snippet there: the gocronlock
// module has gocron, and examples/migrating the peer libraries, which the
// root module does not require.
var otherModules = map[string]string{
	"github.com/go-co-op/gocron":              "gocronlock",
	"github.com/padlockgo/padlock/gocronlock": "gocronlock",
	"github.com/go-redsync/redsync":           "examples/migrating",
	"github.com/bsm/redislock":                "examples/migrating",
	"github.com/redis/rueidis":                "examples/migrating",
}

// snippet is one ```go block of a Markdown file.
type snippet struct {
	file      string // repository path of the Markdown file
	line      int    // line of the block's first line of code
	code      string
	directive string // the HTML comment above the block, without <!-- -->
	dirLine   int    // line of the directive's first line
}

// parts is a snippet split into its import block and the rest.
type parts struct {
	imports  []string // import paths, in order
	names    []string // each import's local name ("" when none is given)
	block    string   // the import declarations' text; "" when the snippet has none
	rest     string   // the code after them
	restLine int      // line of rest's first line in the Markdown
}

// split separates the import declarations a snippet begins with (after
// comments, if any) from the code that follows them.
func split(s snippet) parts {
	p := parts{rest: s.code, restLine: s.line}
	const head = "package p\n"
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, "", head+s.code, parser.ImportsOnly)
	if err != nil || len(f.Imports) == 0 {
		return p // no import block; errors in the rest are the type check's to report
	}
	end := 0
	for _, d := range f.Decls {
		if g, ok := d.(*ast.GenDecl); ok && g.Tok == token.IMPORT {
			end = fset.Position(g.End()).Offset - len(head)
		}
	}
	for _, is := range f.Imports {
		path, _ := strconv.Unquote(is.Path.Value)
		name := ""
		if is.Name != nil {
			name = is.Name.Name
		}
		p.imports = append(p.imports, path)
		p.names = append(p.names, name)
	}
	p.block = s.code[:end]
	p.rest = strings.TrimLeft(s.code[end:], "\n")
	p.restLine = s.line + strings.Count(s.code[:len(s.code)-len(p.rest)], "\n")
	return p
}

var exampleRE = regexp.MustCompile(`^the body of (Example\w*) in (\S+)$`)

// TestSnippetsCompile type-checks every Go snippet of the repository's
// Markdown as the package documentation describes.
func TestSnippetsCompile(t *testing.T) {
	root := repoRoot(t)
	var all []checked
	n := 0
	for _, f := range repoFiles(t, root, ".md") {
		b, err := os.ReadFile(filepath.Join(root, f))
		if err != nil {
			t.Fatal(err)
		}
		ss := snippets(f, string(b))
		n += len(ss)
		cs, errs := guide(ss)
		for _, err := range errs {
			t.Error(err)
		}
		all = append(all, cs...)
	}
	if n < 20 {
		t.Fatalf("found %d Go snippets, want the README's and the guides' (over 20)", n)
	}
	byModule := make(map[string][]checked)
	for _, c := range all {
		m := c.module()
		byModule[m] = append(byModule[m], c)
	}
	for module, cs := range byModule {
		var paths []string
		for _, c := range cs {
			paths = append(paths, c.paths()...)
		}
		imp := moduleImporter(t, filepath.Join(root, module), paths)
		for _, c := range cs {
			if err := typeCheck(c, imp); err != nil {
				t.Errorf("%v", err)
			}
			if err := gofmtCheck(c); err != nil {
				t.Error(err)
			}
		}
	}
}

// checked is a snippet as it is type-checked: split, with the imports it
// compiles with.
type checked struct {
	snippet
	parts
	inherited bool // the imports are the guide's first snippet's
}

// guide applies a Markdown file's import rule to its snippets: a snippet
// with an import block compiles with it alone; one without compiles with
// the block of the file's first snippet, if that has one, and is refused
// otherwise.
func guide(ss []snippet) ([]checked, []error) {
	var out []checked
	var errs []error
	var first *parts
	for i, s := range ss {
		p := split(s)
		if i == 0 && p.block != "" {
			first = &p
		}
		c := checked{snippet: s, parts: p}
		if p.block == "" {
			if first == nil {
				errs = append(errs, fmt.Errorf("%s:%d: the snippet shows no import block, nor does the first snippet of %s", s.file, s.line, s.file))
				continue
			}
			c.imports, c.names, c.inherited = first.imports, first.names, true
		}
		out = append(out, c)
	}
	return out, errs
}

// module returns the directory of the module a snippet compiles in.
func (c checked) module() string {
	for _, p := range c.imports {
		for prefix, m := range otherModules {
			if strings.HasPrefix(p, prefix) {
				return m
			}
		}
	}
	return "."
}

// paths returns the import paths a snippet's files need.
func (c checked) paths() []string {
	paths := slices.Clone(c.imports)
	for _, n := range usedPackages(c.decls()) {
		paths = append(paths, packages[n])
	}
	return paths
}

// TestSnippetCheckerCatchesBreaks feeds the checker snippets that must
// fail and snippets that must pass, so TestSnippetsCompile cannot pass by
// checking nothing.
func TestSnippetCheckerCatchesBreaks(t *testing.T) {
	const imports = "import (\n\t\"context\"\n\n\t\"github.com/padlockgo/padlock\"\n)\n\n"
	const body = "ctx := context.Background()\nvar locker *padlock.Locker\n"
	var paths []string
	for _, p := range packages {
		paths = append(paths, p)
	}
	imp := moduleImporter(t, repoRoot(t), paths)
	for _, tc := range []struct {
		name string
		ss   []snippet // the guide; the last one is the snippet checked
		ok   bool
	}{
		{"body", []snippet{{code: imports + body + "lk, err := locker.Acquire(ctx, \"k\", padlock.Options{})\nif err != nil {\n\treturn err\n}\ndefer lk.Release(ctx)\n"}}, true},
		{"unused names are fine", []snippet{{code: imports + body + "lk, err := locker.Acquire(ctx, \"k\", padlock.Options{})\n"}}, true},
		{"bare return", []snippet{{code: "import \"fmt\"\n\nfmt.Println()\nreturn\n"}}, true},
		{"file", []snippet{{code: imports + "func pay(ctx context.Context, locker *padlock.Locker) error {\n\t_, err := locker.Acquire(ctx, \"k\", padlock.Options{})\n\treturn err\n}\n"}}, true},
		{"the reader's own code, hidden", []snippet{{directive: "go\nvar store interface{ Pay(context.Context, int64) error }", code: "import \"context\"\n\nfunc pay(ctx context.Context) error {\n\treturn store.Pay(ctx, 42)\n}\n"}}, true},
		{"the guide's first block", []snippet{{code: imports + body}, {code: body + "_, _ = locker.Acquire(ctx, \"k\", padlock.Options{})\n"}}, true},
		{"a package not imported", []snippet{{code: "import \"context\"\n\nctx := context.Background()\nvar locker *padlock.Locker\n_, _ = locker.Acquire(ctx, \"k\", padlock.Options{})\n"}}, false},
		{"no import block anywhere", []snippet{{code: body}}, false},
		{"the guide's first block shows none", []snippet{{code: "return nil\n"}, {code: imports + body}, {code: body}}, false},
		{"an import not used", []snippet{{code: "import (\n\t\"fmt\"\n\t\"time\"\n)\n\nfmt.Println()\n"}}, false},
		{"a name from nowhere", []snippet{{code: imports + "_, _ = locker.Acquire(context.Background(), \"k\", padlock.Options{})\n"}}, false},
		{"a name that is gone", []snippet{{code: imports + body + "locker.AcquireMaybe(ctx, \"k\")\n"}}, false},
		{"a wrong argument", []snippet{{code: imports + body + "locker.Acquire(ctx, 42, padlock.Options{})\n"}}, false},
		{"an option that is gone", []snippet{{code: imports + "_ = padlock.Options{Lease: 1}\n"}}, false},
		{"not Go", []snippet{{code: imports + "for x := range y { ... }\n"}}, false},
	} {
		for i := range tc.ss {
			tc.ss[i].file, tc.ss[i].line = "test.md", 1+10*i
		}
		cs, errs := guide(tc.ss)
		err := errors.Join(errs...)
		if err == nil && len(cs) == len(tc.ss) {
			err = typeCheck(cs[len(cs)-1], imp)
		}
		if (err == nil) != tc.ok {
			t.Errorf("%s: got error %v, want ok %v", tc.name, err, tc.ok)
		} else if err != nil {
			t.Logf("%s: %v", tc.name, err)
		}
	}
}

// TestSnippetsMatchExamples checks that each snippet marked as the body
// of an Example is, after its import block, character for character.
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
			p := split(s)
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
			if p.rest != body {
				t.Errorf("%s:%d: the snippet differs from %s's body in %s:\ngot:\n%s\nwant:\n%s", s.file, p.restLine, m[1], m[2], p.rest, body)
			}
		}
	}
	if n == 0 {
		t.Error("no snippet is marked as an Example's body; the Redlock guide's is")
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

// decls returns the hidden declarations of a snippet's directive: the
// reader's own code it calls.
func (c checked) decls() string {
	if c.directive == "go" || strings.HasPrefix(c.directive, "go\n") {
		return strings.TrimPrefix(strings.TrimPrefix(c.directive, "go"), "\n")
	}
	return ""
}

// isFile reports whether code parses as package-level declarations.
func isFile(code string) bool {
	_, err := parser.ParseFile(token.NewFileSet(), "", "package p\n"+code, parser.SkipObjectResolution)
	return err == nil
}

// sources returns the Go files a snippet is checked as, with //line
// directives that point errors at the Markdown: the snippet's own file,
// with its imports and no others, and one for its hidden declarations.
func sources(c checked) (snippetFile, declsFile string) {
	var b strings.Builder
	b.WriteString("package snippet\n\n")
	if c.inherited {
		b.WriteString("import (\n")
		for i, p := range c.imports {
			fmt.Fprintf(&b, "\t%s %q\n", c.names[i], p)
		}
		b.WriteString(")\n")
	} else {
		fmt.Fprintf(&b, "//line %s:%d\n%s\n", c.file, c.line, c.block)
	}
	if isFile(c.rest) {
		fmt.Fprintf(&b, "\n//line %s:%d\n%s", c.file, c.restLine, c.rest)
	} else {
		fmt.Fprintf(&b, "\nfunc _() (_ error) {\n//line %s:%d\n%s\n\treturn\n}\n", c.file, c.restLine, c.rest)
	}
	snippetFile = b.String()
	if d := c.decls(); d != "" {
		b.Reset()
		b.WriteString("package snippet\n\nimport (\n")
		for _, n := range usedPackages(d) {
			fmt.Fprintf(&b, "\t%s %q\n", n, packages[n])
		}
		fmt.Fprintf(&b, ")\n\n//line %s:%d\n%s\n", c.file, c.dirLine+1, d)
		declsFile = b.String()
	}
	return snippetFile, declsFile
}

// gofmtCheck reports a snippet that is a file to paste (an import block
// and declarations) but not as gofmt would print it.
func gofmtCheck(c checked) error {
	if c.inherited || !isFile(c.rest) {
		return nil
	}
	const head = "package p\n\n"
	out, err := format.Source([]byte(head + c.code))
	if err != nil {
		return nil // the type check reports it
	}
	if got := string(out[len(head):]); got != c.code {
		return fmt.Errorf("%s:%d: the snippet is not gofmt'd; gofmt prints it:\n%s", c.file, c.line, got)
	}
	return nil
}

// typeCheck parses and type-checks a snippet, and returns its errors but
// those the package documentation lets pass.
func typeCheck(c checked, imp types.Importer) error {
	fset := token.NewFileSet()
	src, decls := sources(c)
	var files []*ast.File
	for i, s := range []string{src, decls} {
		if s == "" {
			continue
		}
		f, err := parser.ParseFile(fset, fmt.Sprintf("snippet%d.go", i), s, parser.SkipObjectResolution)
		if err != nil {
			return fmt.Errorf("%v\n(as checked:\n%s)", err, s)
		}
		files = append(files, f)
	}
	var errs []error
	conf := types.Config{
		Importer: imp,
		Error: func(err error) {
			var te types.Error
			if errors.As(err, &te) && te.Soft {
				if strings.Contains(te.Msg, "declared and not used") {
					return // a snippet may stop short of using what it shows
				}
				// An import block the snippet shows is its own, to paste:
				// it imports what it uses and nothing else. The guide's
				// first block, and the hidden declarations' imports, serve
				// many.
				if strings.Contains(te.Msg, "imported and not used") && (c.inherited || fset.Position(te.Pos).Filename != c.file) {
					return
				}
			}
			errs = append(errs, err)
		},
	}
	_, _ = conf.Check("snippet", fset, files, nil)
	return errors.Join(errs...)
}

// moduleImporter returns an importer of the compiled packages of the
// module in dir (go list -export), for the import paths given and those
// they import.
func moduleImporter(t *testing.T, dir string, paths []string) types.Importer {
	t.Helper()
	paths = slices.Clone(paths)
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
