package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"
)

// The budgets of one mutant's steps.
const (
	buildTimeout   = 10 * time.Minute
	exploreTimeout = 20 * time.Minute
	suiteTimeout   = 15 * time.Minute
)

// suiteMode is -suite: off, the explorer's survivors, or all.
type suiteMode string

func (s *suiteMode) String() string   { return string(*s) }
func (s *suiteMode) IsBoolFlag() bool { return true }
func (s *suiteMode) Set(v string) error {
	switch v {
	case "true", "survivors":
		*s = "survivors"
	case "all":
		*s = "all"
	case "false", "":
		*s = ""
	default:
		return fmt.Errorf("want -suite, -suite=survivors or -suite=all, got %q", v)
	}
	return nil
}

// result is what a run found for one mutant.
type result struct {
	m        *mutant
	status   string // "stale", "build", "killed", "survived", "checked"
	detail   string // why stale or not built
	killed   bool
	inv      string // the first invariant the explorer reported broken
	seeds    int    // seeds the explorer ran (-1: unknown)
	explore  time.Duration
	suiteRan bool
	suiteErr bool   // the suite failed
	suiteBy  string // the first failing test
	suiteDur time.Duration
}

func main() {
	var (
		check    = flag.Bool("check", false, "only apply and build every mutant")
		suite    suiteMode
		jobs     = flag.Int("j", 1, "mutants run at once")
		markdown = flag.Bool("markdown", false, "print the kill table as Markdown")
		keep     = flag.Bool("keep", false, "keep each mutant's copy of the tree")
		logs     = flag.String("logs", "", "write each mutant's output to this directory")
	)
	flag.Var(&suite, "suite", "run the non-explorer suite of the touched packages for survivors (-suite=all: for every mutant)")
	flag.Usage = func() {
		fmt.Fprintf(flag.CommandLine.Output(), "usage: go run ./internal/mutant [flags] [names...]\n")
		flag.PrintDefaults()
	}
	flag.Parse()
	if *jobs < 1 {
		*jobs = 1
	}
	root, err := moduleRoot()
	if err != nil {
		fatal(err)
	}
	all, err := loadCatalog()
	if err != nil {
		fatal(err)
	}
	ms, err := pick(all, flag.Args())
	if err != nil {
		fatal(err)
	}
	files, err := treeFiles(root)
	if err != nil {
		fatal(err)
	}
	if *logs != "" {
		if err := os.MkdirAll(*logs, 0o755); err != nil {
			fatal(err)
		}
	}
	r := &runner{root: root, files: files, check: *check, suite: suite, keep: *keep, logs: *logs}

	began := time.Now()
	results := make([]*result, len(ms))
	next := make(chan int)
	var wg sync.WaitGroup
	var mu sync.Mutex
	for range *jobs {
		wg.Go(func() {
			for i := range next {
				res := r.run(ms[i])
				mu.Lock()
				results[i] = res
				fmt.Fprintln(os.Stderr, res.line())
				mu.Unlock()
			}
		})
	}
	for i := range ms {
		next <- i
	}
	close(next)
	wg.Wait()

	if *markdown {
		printMarkdown(os.Stdout, results, *check)
	} else {
		printPlain(os.Stdout, results, *check)
	}
	fmt.Printf("%s in %v\n", totals(results, *check), time.Since(began).Round(time.Second))
	for _, res := range results {
		if res.status == "stale" || res.status == "build" {
			os.Exit(1)
		}
	}
}

func fatal(err error) {
	fmt.Fprintln(os.Stderr, "mutant:", err)
	os.Exit(2)
}

// pick returns the mutants names asks for, by full name or number; all
// of them when names is empty.
func pick(all []*mutant, names []string) ([]*mutant, error) {
	if len(names) == 0 {
		return all, nil
	}
	var out []*mutant
	for _, n := range names {
		found := false
		for _, m := range all {
			num, _, _ := strings.Cut(m.Name, "-")
			if m.Name == n || num == n {
				out = append(out, m)
				found = true
			}
		}
		if !found {
			return nil, fmt.Errorf("no mutant %q in the catalog", n)
		}
	}
	return out, nil
}

// moduleRoot finds the directory of the padlock module's go.mod, from the
// working directory up.
func moduleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		b, err := os.ReadFile(filepath.Join(dir, "go.mod"))
		if err == nil && bytes.HasPrefix(b, []byte("module github.com/padlockgo/padlock\n")) {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("not inside the padlock module")
		}
		dir = parent
	}
}

// treeFiles lists the module's files, slash-separated and relative to
// root: git's tracked and untracked-but-not-ignored files, or, without
// git, every file outside .git.
func treeFiles(root string) ([]string, error) {
	cmd := exec.Command("git", "ls-files", "-z", "--cached", "--others", "--exclude-standard")
	cmd.Dir = root
	if out, err := cmd.Output(); err == nil {
		var files []string
		for f := range strings.SplitSeq(strings.TrimRight(string(out), "\x00"), "\x00") {
			if st, err := os.Lstat(filepath.Join(root, f)); err == nil && st.Mode().IsRegular() {
				files = append(files, f)
			}
		}
		return files, nil
	}
	var files []string
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && d.Name() == ".git" {
			return filepath.SkipDir
		}
		if d.Type().IsRegular() {
			rel, err := filepath.Rel(root, p)
			if err != nil {
				return err
			}
			files = append(files, filepath.ToSlash(rel))
		}
		return nil
	})
	return files, err
}

type runner struct {
	root  string
	files []string
	check bool
	suite suiteMode
	keep  bool
	logs  string
}

// run copies the tree, applies m and runs what the flags ask for.
func (r *runner) run(m *mutant) *result {
	res := &result{m: m, seeds: -1}
	dir, err := os.MkdirTemp("", "padlock-mutant-")
	if err != nil {
		res.status, res.detail = "build", err.Error()
		return res
	}
	if r.keep {
		fmt.Fprintf(os.Stderr, "%s: copy kept in %s\n", m.Name, dir)
	} else {
		defer os.RemoveAll(dir)
	}
	if err := copyTree(r.root, dir, r.files); err != nil {
		res.status, res.detail = "build", err.Error()
		return res
	}
	read := func(p string) ([]byte, error) { return os.ReadFile(filepath.Join(dir, filepath.FromSlash(p))) }
	write := func(p string, b []byte) error {
		return os.WriteFile(filepath.Join(dir, filepath.FromSlash(p)), b, 0o644)
	}
	if _, err := m.apply(read, write); err != nil {
		res.status, res.detail = "stale", err.Error()
		return res
	}

	// Build: the whole module, and the root package's tests.
	for _, args := range [][]string{
		{"build", "./..."},
		{"test", "-c", "-o", os.DevNull, "."},
	} {
		out, _, err := goCmd(dir, buildTimeout, nil, args...)
		r.log(m, "build", out)
		if err != nil {
			res.status, res.detail = "build", "go "+strings.Join(args, " ")+": "+firstLines(out, 3)
			return res
		}
	}
	if r.check {
		res.status = "checked"
		return res
	}

	// The explorer, at CI's budget.
	out, took, err := goCmd(dir, exploreTimeout, []string{"PADLOCK_EXPLORE_SEEDS=400", "PADLOCK_EXPLORE_STOP=1"},
		"test", "-v", "-count=1", "-timeout", exploreTimeout.String(), "-run", "^TestExplore$", ".")
	r.log(m, "explore", out)
	res.explore = took
	res.seeds = seedsRun(out)
	if err != nil {
		res.status, res.killed = "killed", true
		res.inv = invariantOf(out)
	} else {
		res.status = "survived"
	}

	// The rest of the touched packages' tests.
	if r.suite == "all" || r.suite == "survivors" && !res.killed {
		args := append([]string{"test", "-count=1", "-failfast", "-timeout", suiteTimeout.String(), "-skip", "^TestExplore$"}, m.packages()...)
		out, took, err := goCmd(dir, suiteTimeout+time.Minute, nil, args...)
		r.log(m, "suite", out)
		res.suiteRan, res.suiteDur = true, took
		if err != nil {
			res.suiteErr = true
			res.suiteBy = failingTest(out)
		}
	}
	return res
}

// goCmd runs the go command in dir with the extra environment, and returns
// its combined output and how long it took.
func goCmd(dir string, timeout time.Duration, env []string, args ...string) ([]byte, time.Duration, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "PADLOCK_REQUIRE_REDIS=1", "GOFLAGS=-buildvcs=false")
	cmd.Env = append(cmd.Env, env...)
	cmd.WaitDelay = 10 * time.Second
	var buf bytes.Buffer
	cmd.Stdout, cmd.Stderr = &buf, &buf
	began := time.Now()
	err := cmd.Run()
	if ctx.Err() != nil {
		fmt.Fprintf(&buf, "\nmutant: timed out after %v\n", timeout)
	}
	return buf.Bytes(), time.Since(began), err
}

func (r *runner) log(m *mutant, step string, out []byte) {
	if r.logs == "" {
		return
	}
	_ = os.WriteFile(filepath.Join(r.logs, m.Name+"."+step+".log"), out, 0o644)
}

// copyTree copies files from src to dst, skipping those removed since
// they were listed.
func copyTree(src, dst string, files []string) error {
	for _, f := range files {
		to := filepath.Join(dst, filepath.FromSlash(f))
		if err := os.MkdirAll(filepath.Dir(to), 0o755); err != nil {
			return err
		}
		err := copyFile(filepath.Join(src, filepath.FromSlash(f)), to)
		if errors.Is(err, fs.ErrNotExist) {
			continue // removed since the list was made
		}
		if err != nil {
			return err
		}
	}
	return nil
}

func copyFile(from, to string) error {
	in, err := os.Open(from)
	if err != nil {
		return err
	}
	defer in.Close()
	st, err := in.Stat()
	if err != nil {
		return err
	}
	out, err := os.OpenFile(to, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, st.Mode().Perm())
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

var (
	// The explorer's summary of a broken invariant, "  NAME  failed in
	// N seed(s)", or its first violation, "  NAME at 0.594s: ...".
	summaryRe   = regexp.MustCompile(`(?m)^\s+([a-z][a-z0-9-]*)\s+failed in\b`)
	violationRe = regexp.MustCompile(`(?m)^\s+([a-z][a-z0-9-]*) at [0-9.]+m?s: `)
	// The seeds it ran: "explored N runs of seeds ...".
	seedsRe = regexp.MustCompile(`explored ([0-9]+) runs`)
	// A failing test.
	failRe = regexp.MustCompile(`(?m)^\s*--- FAIL: (\S+)`)
)

// invariantOf returns the first invariant the explorer's output names as
// broken, or how the run failed when it names none.
func invariantOf(out []byte) string {
	for _, re := range []*regexp.Regexp{summaryRe, violationRe} {
		if m := re.FindSubmatch(out); m != nil {
			return string(m[1])
		}
	}
	switch {
	case bytes.Contains(out, []byte("panic: test timed out")), bytes.Contains(out, []byte("mutant: timed out")):
		return "(timeout)"
	case bytes.Contains(out, []byte("panic:")):
		return "(panic)"
	case bytes.Contains(out, []byte("deadlock")):
		return "(deadlock)"
	}
	return "(failed)"
}

// seedsRun returns the number of seeds the explorer says it ran, or -1.
func seedsRun(out []byte) int {
	n := -1
	for _, m := range seedsRe.FindAllSubmatch(out, -1) {
		if v, err := strconv.Atoi(string(m[1])); err == nil {
			n = v // the last mention is the summary
		}
	}
	return n
}

// failingTest returns the first failing top-level test, or how the run
// failed.
func failingTest(out []byte) string {
	ms := failRe.FindAllSubmatch(out, -1)
	if len(ms) == 0 {
		if bytes.Contains(out, []byte("panic:")) {
			return "(panic)"
		}
		return "(failed)"
	}
	// go test prints a parent's line before its subtests'.
	return string(ms[0][1])
}

func firstLines(out []byte, n int) string {
	var lines []string
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() && len(lines) < n {
		if l := strings.TrimSpace(sc.Text()); l != "" {
			lines = append(lines, l)
		}
	}
	return strings.Join(lines, " | ")
}

// line is a one-line progress report.
func (res *result) line() string {
	switch res.status {
	case "stale", "build":
		return fmt.Sprintf("%s: %s: %s", res.m.Name, res.status, res.detail)
	case "checked":
		return fmt.Sprintf("%s: applies and builds", res.m.Name)
	}
	s := fmt.Sprintf("%s: explorer %s", res.m.Name, res.status)
	if res.killed {
		s += " (" + res.inv + ")"
	}
	s += fmt.Sprintf(", %s seeds, %v", seedsText(res.seeds), res.explore.Round(time.Second))
	if res.suiteRan {
		s += "; suite " + res.suiteText() + fmt.Sprintf(" in %v", res.suiteDur.Round(time.Second))
	}
	return s
}

func seedsText(n int) string {
	if n < 0 {
		return "?"
	}
	return strconv.Itoa(n)
}

func (res *result) suiteText() string {
	switch {
	case !res.suiteRan:
		return "-"
	case res.suiteErr:
		return "killed: " + res.suiteBy
	}
	return "survived"
}

func printPlain(w io.Writer, results []*result, check bool) {
	for _, res := range results {
		fmt.Fprintln(w, res.line())
	}
}

// printMarkdown prints the kill table.
func printMarkdown(w io.Writer, results []*result, check bool) {
	if check {
		fmt.Fprintln(w, "| mutant | primitive | applies and builds |")
		fmt.Fprintln(w, "|---|---|---|")
		for _, res := range results {
			ok := "yes"
			if res.status != "checked" {
				ok = res.status + ": " + res.detail
			}
			fmt.Fprintf(w, "| `%s` | %s | %s |\n", res.m.Name, res.m.Primitive, mdEscape(ok))
		}
		return
	}
	fmt.Fprintln(w, "| mutant | promise | killed by explorer? | invariant | seeds | time | suite |")
	fmt.Fprintln(w, "|---|---|---|---|--:|--:|---|")
	for _, res := range results {
		killed, inv, seeds, took := "no", "—", seedsText(res.seeds), res.explore.Round(time.Second).String()
		switch res.status {
		case "stale", "build":
			killed, inv, seeds, took = res.status, mdEscape(res.detail), "—", "—"
		case "killed":
			killed, inv = "yes", res.inv
		}
		suite := "—"
		if res.suiteRan {
			suite = "survived"
			if res.suiteErr {
				suite = "`" + res.suiteBy + "`"
			}
		}
		fmt.Fprintf(w, "| `%s` | %s | %s | %s | %s | %s | %s |\n", res.m.Name, mdEscape(res.m.Promise), killed, inv, seeds, took, suite)
	}
}

func mdEscape(s string) string { return strings.ReplaceAll(s, "|", `\|`) }

// totals sums the run up.
func totals(results []*result, check bool) string {
	var n, stale, build, killed, suiteRan, suiteKilled, escaped int
	for _, res := range results {
		n++
		switch res.status {
		case "stale":
			stale++
		case "build":
			build++
		case "killed":
			killed++
		}
		if res.suiteRan {
			suiteRan++
			if res.suiteErr {
				suiteKilled++
			}
		}
		if res.status == "survived" && res.suiteRan && !res.suiteErr {
			escaped++
		}
	}
	if check {
		return fmt.Sprintf("%d mutants: %d apply and build, %d stale, %d do not build", n, n-stale-build, stale, build)
	}
	return fmt.Sprintf("%d mutants: explorer killed %d/%d; suite killed %d/%d run; escaped both %d; %d stale, %d do not build",
		n, killed, n, suiteKilled, suiteRan, escaped, stale, build)
}
