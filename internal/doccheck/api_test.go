package doccheck

import (
	"fmt"
	"go/ast"
	"go/build"
	"go/doc"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// libraryPackage is one package a user imports: its files, parsed with
// their comments, and its test files, for the Examples.
type libraryPackage struct {
	dir   string // repository path: "." for the root package
	fset  *token.FileSet
	files []*ast.File // the package's own files, as the default build sees them
	tests []*ast.File // its _test.go files, both packages
}

// libraryPackages returns the packages of the repository that users
// import: every package of the root module and of the gocronlock module,
// but internal ones, commands (the example app, examples/, bench's) and
// the chaos suite, which is tests only.
func libraryPackages(t *testing.T, root string) []libraryPackage {
	t.Helper()
	var pkgs []libraryPackage
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() {
			return nil
		}
		rel, err := filepath.Rel(root, path)
		if err != nil {
			return err
		}
		rel = filepath.ToSlash(rel)
		name := d.Name()
		if rel != "." {
			if strings.HasPrefix(name, ".") || name == "testdata" || name == "internal" || rel == "chaos" {
				return filepath.SkipDir
			}
			// A module of its own is not padlock's, but gocronlock.
			if _, err := os.Stat(filepath.Join(path, "go.mod")); err == nil && rel != "gocronlock" {
				return filepath.SkipDir
			}
		}
		bp, err := build.Default.ImportDir(path, 0)
		if err != nil {
			if _, ok := err.(*build.NoGoError); ok {
				return nil
			}
			return err
		}
		if bp.Name == "main" {
			return nil
		}
		p := libraryPackage{dir: rel, fset: token.NewFileSet()}
		parse := func(names []string) ([]*ast.File, error) {
			var files []*ast.File
			for _, n := range names {
				f, err := parser.ParseFile(p.fset, filepath.Join(path, n), nil, parser.ParseComments)
				if err != nil {
					return nil, err
				}
				files = append(files, f)
			}
			return files, nil
		}
		if p.files, err = parse(bp.GoFiles); err != nil {
			return err
		}
		if p.tests, err = parse(append(slices.Clone(bp.TestGoFiles), bp.XTestGoFiles...)); err != nil {
			return err
		}
		pkgs = append(pkgs, p)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return pkgs
}

var (
	// defaultRE is what a field of an Options or Config struct, or an
	// option constructor, says of its default: "Default: 30s", "the
	// default", or that it is required.
	defaultRE = regexp.MustCompile(`(?i)\bdefault|\brequired\b`)
	// errorsRE is what the doc comment of a func returning an error says
	// of its errors: a sentinel (ErrNotHeld), an error type
	// (*QuorumError), an error, or how it fails.
	errorsRE = regexp.MustCompile(`(?i)\berr\w*|\w+error\b|\bfail\w*`)
	// optionRE is the name of an option type: Option, LockerOption,
	// BodyOption, ...
	optionRE = regexp.MustCompile(`Option$`)
	// settingsRE is the name of a struct whose fields are settings:
	// Options, lockview's Config.
	settingsRE = regexp.MustCompile(`(Options|Config)$`)
)

// checkDocs returns what breaks the rules of the package documentation
// ("API documentation") in the doc comments of p's exported names, each
// as "file:line: name: what".
func (p libraryPackage) checkDocs() []string {
	var out []string
	report := func(pos token.Pos, name, format string, args ...any) {
		at := p.fset.Position(pos)
		file := filepath.ToSlash(filepath.Join(p.dir, filepath.Base(at.Filename)))
		out = append(out, fmt.Sprintf("%s:%d: %s: %s", file, at.Line, name, fmt.Sprintf(format, args...)))
	}
	d, err := doc.NewFromFiles(p.fset, p.files, "github.com/padlockgo/padlock/"+p.dir, doc.PreserveAST)
	if err != nil {
		return []string{fmt.Sprintf("%s: %v", p.dir, err)}
	}

	values := func(vs []*doc.Value) {
		for _, v := range vs {
			for _, s := range v.Decl.Specs {
				vs := s.(*ast.ValueSpec)
				for _, n := range vs.Names {
					if n.IsExported() && v.Doc == "" && vs.Doc == nil && vs.Comment == nil {
						report(n.Pos(), n.Name, "no doc comment, on it or on its group")
					}
				}
			}
		}
	}
	funcs := func(recv string, fs []*doc.Func) {
		for _, f := range fs {
			name := f.Name
			if recv != "" {
				name = recv + "." + f.Name
			}
			p.checkFunc(report, name, f.Name, f.Doc, f.Decl.Type, f.Decl.Pos())
		}
	}
	values(d.Consts)
	values(d.Vars)
	funcs("", d.Funcs)
	for _, t := range d.Types {
		if t.Doc == "" {
			report(t.Decl.Pos(), t.Name, "no doc comment")
		} else if !startsWith(t.Doc, t.Name) {
			report(t.Decl.Pos(), t.Name, "the doc comment does not begin with the name (or A, An or The and the name)")
		}
		values(t.Consts)
		values(t.Vars)
		funcs("", t.Funcs)
		funcs(t.Name, t.Methods)
		for _, s := range t.Decl.Specs {
			ts := s.(*ast.TypeSpec)
			switch typ := ts.Type.(type) {
			case *ast.StructType:
				settings := settingsRE.MatchString(ts.Name.Name)
				for _, fld := range typ.Fields.List {
					text := fld.Doc.Text() + fld.Comment.Text()
					for _, n := range fld.Names {
						if !n.IsExported() {
							continue
						}
						name := ts.Name.Name + "." + n.Name
						switch {
						case strings.TrimSpace(text) == "":
							report(n.Pos(), name, "no doc comment on the field")
						case settings && !defaultRE.MatchString(text):
							report(n.Pos(), name, "a field of %s does not state its default (\"Default: ...\", or \"Required\")", ts.Name.Name)
						}
					}
				}
			case *ast.InterfaceType:
				for _, m := range typ.Methods.List {
					for _, n := range m.Names {
						if !n.IsExported() {
							continue
						}
						text := m.Doc.Text() + m.Comment.Text()
						name := ts.Name.Name + "." + n.Name
						if strings.TrimSpace(text) == "" {
							report(n.Pos(), name, "no doc comment on the interface method")
							continue
						}
						if ft, ok := m.Type.(*ast.FuncType); ok && returnsError(ft) && !errorsRE.MatchString(text) {
							report(n.Pos(), name, "returns an error, and its doc comment does not say which (name the ErrX, the error type, or when it fails)")
						}
					}
				}
			}
		}
	}
	return out
}

// checkFunc checks the doc comment of one func or method.
func (p libraryPackage) checkFunc(report func(token.Pos, string, string, ...any), name, short, text string, ft *ast.FuncType, pos token.Pos) {
	if text == "" {
		report(pos, name, "no doc comment")
		return
	}
	if !startsWith(text, short) {
		report(pos, name, "the doc comment does not begin with the name")
	}
	if returnsError(ft) && !errorsRE.MatchString(text) {
		report(pos, name, "returns an error, and its doc comment does not say which (name the ErrX, the error type, or when it fails)")
	}
	if returnsOption(ft) && !defaultRE.MatchString(text) {
		report(pos, name, "an option whose doc comment does not state the default (\"Default: ...\")")
	}
}

// startsWith reports whether a doc comment begins with name, alone or
// after an article: "Lock returns", "A Canon says", "The zero Options".
func startsWith(text, name string) bool {
	words := strings.Fields(text)
	for i, w := range words {
		if i > 1 {
			break
		}
		if strings.TrimRight(w, ",.:;") == name {
			return true
		}
		if i == 0 && w != "A" && w != "An" && w != "The" {
			return false
		}
	}
	return false
}

// returnsError reports whether a func's last result is an error.
func returnsError(ft *ast.FuncType) bool {
	if ft.Results == nil || len(ft.Results.List) == 0 {
		return false
	}
	id, ok := ft.Results.List[len(ft.Results.List)-1].Type.(*ast.Ident)
	return ok && id.Name == "error"
}

// returnsOption reports whether a func returns an option alone: an
// Option, LockerOption, BodyOption (of this package or another).
func returnsOption(ft *ast.FuncType) bool {
	if ft.Results == nil || len(ft.Results.List) != 1 || len(ft.Results.List[0].Names) > 1 {
		return false
	}
	typ := ft.Results.List[0].Type
	if sel, ok := typ.(*ast.SelectorExpr); ok {
		typ = sel.Sel
	}
	id, ok := typ.(*ast.Ident)
	return ok && optionRE.MatchString(id.Name)
}

// TestAPIDocs checks every exported name of every package users import
// against the rules of the package documentation ("API documentation"):
// a doc comment that begins with the name, a default for every setting,
// the errors of every func that returns one.
func TestAPIDocs(t *testing.T) {
	pkgs := libraryPackages(t, repoRoot(t))
	if len(pkgs) < 13 {
		t.Fatalf("found %d library packages, want the repository's 13 or more: is the walk blind?", len(pkgs))
	}
	names := 0
	for _, p := range pkgs {
		if p.dir == "." && len(p.files) < 20 {
			t.Fatalf("the root package has %d files: is the test in the repository?", len(p.files))
		}
		for _, f := range p.checkDocs() {
			t.Error(f)
		}
		for _, f := range p.files {
			for _, o := range f.Scope.Objects {
				if ast.IsExported(o.Name) {
					names++
				}
			}
		}
	}
	if names < 200 {
		t.Errorf("checked %d exported names, want the repository's (over 200): is the parser blind?", names)
	}
}

// example is an Example a main call sequence must have: runnable, with
// its output checked, unless compileOnly says why it cannot run.
type example struct {
	dir, name string // the package's repository path, the func's name
	sequence  string // the call sequence it shows
	// compileOnly says why the Example has no // Output: comment; it is
	// then only compiled. Empty for a runnable Example.
	compileOnly string
}

// examples are the main call sequences of padlock, each with the Example
// that documents it. A sequence a user is expected to write goes here;
// the Example shows it whole, and runs.
var examples = []example{
	{".", "ExampleLocker_Acquire", "take a lock, guard the work with its context, release it", ""},
	{".", "ExampleLocker_Acquire_wait", "wait for a key another holder has", ""},
	{".", "ExampleRetryAfter", "a busy key, and when to try again", ""},
	{".", "ExampleLock_Context", "stop the work when the lock is lost", ""},
	{".", "ExampleLock_Done", "hear of a lost lock", ""},
	{".", "ExampleLock_Fence", "fence the writes to a store", ""},
	{".", "ExampleLock_Extend", "extend a lease by hand", ""},
	{".", "ExampleLocker_AcquireAll", "lock several keys, all or none", ""},
	{".", "ExampleLocker_AcquireRead", "many readers or one writer", ""},
	{".", "ExampleSemaphore", "N holders of a key", ""},
	{".", "ExampleElection_Campaign", "elect a leader", ""},
	{".", "ExampleElection_Observe", "follow the leader", ""},
	{".", "ExampleLocker_Resume", "hand a lock to another process", ""},
	{".", "ExampleWithObserver", "observe a Locker's locks", ""},
	{".", "ExampleNewRedlock", "a lock on a majority of independent masters",
		"it needs three independent Redis masters, which an Example cannot start; store_redlock_test.go runs the same calls on real servers, and docs/redlock.md shows this body"},
	{"decorator", "ExampleWithLock", "wrap a function in a lock", ""},
	{"decorator", "ExampleWithLockErr", "wrap a function that returns only an error", ""},
	{"decorator", "ExampleDo", "run a closure once under a lock", ""},
	{"decorator", "ExampleWithPermit", "wrap a function in a semaphore's permit", ""},
	{"httplock", "ExampleLock", "lock a net/http request's resource", ""},
	{"httplock", "ExampleLimit", "bound a net/http route's concurrency", ""},
	{"httplock", "ExampleKeyFor", "the key a request would lock", ""},
	{"middleware", "ExampleLock", "lock a Gin request's resource", ""},
	{"middleware", "ExampleLimit", "bound a Gin route's concurrency", ""},
	{"keyfunc", "ExampleJoin", "a key from several parts of a Gin request", ""},
	{"keyfunc", "ExampleBind", "a key from the bound request", ""},
	{"keyfunc", "ExampleMustTemplate", "a key from a template", ""},
	{"lockkey", "ExampleArg", "a key from a function's argument", ""},
	{"lockkey", "ExampleInt", "a key part in its canonical form", ""},
	{"idempotency", "ExampleNew", "Idempotency-Key on net/http", ""},
	{"idempotency/ginidem", "ExampleNew", "Idempotency-Key on Gin", ""},
	{"idempotency/ginidem", "ExampleNew_withLock", "authentication, Idempotency-Key and the lock on Gin, in their safe order", ""},
	{"schedule", "ExampleRun", "run a job once across a fleet", ""},
	{"schedule", "ExampleEvery", "run a job once per interval across a fleet", ""},
	{"gocronlock", "Example", "gocron jobs, once across a fleet", ""},
	{"padlocktest", "Example", "test code that takes locks", ""},
	{"padlocktest", "ExampleEnv_Busy", "test the busy answer", ""},
	{"padlocktest", "ExampleEnv_LoseLock", "test a lost lock", ""},
	{"padlocktest", "ExampleEnv_Down", "test Redis down", ""},
	{"padlocktest", "ExampleEnv_Clock", "test a scheduled job's ticks", ""},
	{"padlockslog", "ExampleNew", "log a Locker's trouble", ""},
	{"padlockotel", "ExampleNew", "metrics and traces of a Locker",
		"it reports to the process's global OpenTelemetry providers, which an Example must not set; ExampleWithMeterProvider runs"},
	{"padlockotel", "ExampleWithMeterProvider", "metrics of a Locker, read back", ""},
	{"lockview", "ExampleNew", "the lock page on an admin listener", ""},
}

// TestAPIExamples checks that every main call sequence (examples) has
// its Example, runnable with its output checked unless the list says why
// not, and that no Example of a library package goes unrun without a
// reason there: an Example that is only compiled can show a sequence
// that no longer works.
func TestAPIExamples(t *testing.T) {
	pkgs := libraryPackages(t, repoRoot(t))
	for _, f := range checkExamples(pkgs, examples) {
		t.Error(f)
	}
}

// checkExamples returns what breaks the rules above, for pkgs and the
// list want.
func checkExamples(pkgs []libraryPackage, want []example) []string {
	var out []string
	found := map[string]*doc.Example{} // dir + " " + func name
	for _, p := range pkgs {
		for _, ex := range doc.Examples(p.tests...) {
			found[p.dir+" "+"Example"+ex.Name] = ex
		}
	}
	listed := map[string]example{}
	for _, w := range want {
		key := w.dir + " " + w.name
		listed[key] = w
		ex, ok := found[key]
		switch runs := ok && (ex.Output != "" || ex.EmptyOutput); {
		case !ok:
			out = append(out, fmt.Sprintf("%s: no %s for %q: write it, runnable, with an // Output: comment", w.dir, w.name, w.sequence))
		case !runs && w.compileOnly == "":
			out = append(out, fmt.Sprintf("%s: %s has no // Output: comment, so it only compiles: make it run, or say why not in examples", w.dir, w.name))
		case runs && w.compileOnly != "":
			out = append(out, fmt.Sprintf("%s: %s runs now: drop its reason in examples", w.dir, w.name))
		}
	}
	for key, ex := range found {
		if ex.Output != "" || ex.EmptyOutput {
			continue
		}
		if _, ok := listed[key]; !ok {
			dir, name, _ := strings.Cut(key, " ")
			out = append(out, fmt.Sprintf("%s: %s has no // Output: comment, so it only compiles: make it run, or list it in examples with the reason", dir, name))
		}
	}
	slices.Sort(out)
	return out
}

// TestAPICheckerCatchesBreaks feeds the checks a package and Examples
// that break each rule, and ones that keep them, so TestAPIDocs and
// TestAPIExamples cannot pass by checking nothing.
func TestAPICheckerCatchesBreaks(t *testing.T) {
	const src = `package p

import "errors"

// ErrGone reports a thing gone.
var ErrGone = errors.New("p: gone")

var Undocumented = 1

// Good returns a thing, or an error matching ErrGone.
func Good() (int, error) { return 0, nil }

// Bad returns a thing.
func Bad() (int, error) { return 0, nil }

// This comment is about something else.
func Misnamed() {}

func Bare() {}

// Options configure a call.
type Options struct {
	// TTL is the lease. Default: 30s.
	TTL int
	// Wait is how long to wait.
	Wait int
	Retry int
}

// Thing is a thing.
type Thing struct {
	// Name names it.
	Name string
	Size int
	own  int
}

// Close lets it go.
func (t *Thing) Close() error { return nil }

func (t *Thing) String() string { return "" }

// Option configures New.
type Option func()

// WithGood sets good. Default: off.
func WithGood() Option { return nil }

// WithBad sets bad.
func WithBad() Option { return nil }

// Getter gets.
type Getter interface {
	// Get gets a value, or an error matching ErrGone.
	Get() (int, error)
	// Put puts it.
	Put(int) error
	Drop()
}
`
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, "p.go", src, parser.ParseComments)
	if err != nil {
		t.Fatal(err)
	}
	got := libraryPackage{dir: "p", fset: fset, files: []*ast.File{f}}.checkDocs()
	want := []string{
		"p/p.go:8: Undocumented: no doc comment",
		"p/p.go:14: Bad: returns an error, and its doc comment does not say which",
		"p/p.go:17: Misnamed: the doc comment does not begin with the name",
		"p/p.go:19: Bare: no doc comment",
		"p/p.go:26: Options.Wait: a field of Options does not state its default",
		"p/p.go:27: Options.Retry: no doc comment on the field",
		"p/p.go:34: Thing.Size: no doc comment on the field",
		"p/p.go:39: Thing.Close: returns an error, and its doc comment does not say which",
		"p/p.go:41: Thing.String: no doc comment",
		"p/p.go:50: WithBad: an option whose doc comment does not state the default",
		"p/p.go:57: Getter.Put: returns an error, and its doc comment does not say which",
		"p/p.go:58: Getter.Drop: no doc comment on the interface method",
	}
	match := func(got []string, want []string) {
		t.Helper()
		for _, w := range want {
			if !slices.ContainsFunc(got, func(g string) bool { return strings.HasPrefix(g, w) }) {
				t.Errorf("the check missed %q; got:\n%s", w, strings.Join(got, "\n"))
			}
		}
		if len(got) != len(want) {
			t.Errorf("got %d findings, want %d:\n%s", len(got), len(want), strings.Join(got, "\n"))
		}
	}
	match(got, want)

	const tests = `package p_test

func ExampleGood() {
	// Output: 1
}

func ExampleBad() {
}

func ExampleThing_Close() {
}

func ExampleOptions() {
}
`
	tf, err := parser.ParseFile(fset, "p_test.go", tests, parser.ParseComments)
	if err != nil {
		t.Fatal(err)
	}
	pkgs := []libraryPackage{{dir: "p", fset: fset, tests: []*ast.File{tf}}}
	got = checkExamples(pkgs, []example{
		{"p", "ExampleGood", "runs", ""},
		{"p", "ExampleBad", "does not run", ""},
		{"p", "ExampleThing_Close", "cannot run", "it needs a thing"},
		{"p", "ExampleGone", "is missing", ""},
		{"p", "ExampleGood", "runs, and says it cannot", "a stale reason"},
	})
	match(got, []string{
		"p: ExampleBad has no // Output: comment, so it only compiles: make it run, or say why not",
		"p: ExampleGood runs now: drop its reason",
		"p: ExampleOptions has no // Output: comment, so it only compiles: make it run, or list it",
		"p: no ExampleGone",
	})
}
