package main

import (
	"embed"
	"fmt"
	"io/fs"
	"path"
	"sort"
	"strings"
)

//go:embed catalog/*.txt
var catalogFS embed.FS

// mutant is one catalog entry.
type mutant struct {
	Name      string // the file's name without .txt
	Promise   string
	Primitive string
	Expect    string
	Edits     []edit
}

// edit replaces the one occurrence of Find in File with Replace.
type edit struct {
	File    string
	Find    string
	Replace string
}

// loadCatalog parses every mutant of the catalog, sorted by name.
func loadCatalog() ([]*mutant, error) {
	names, err := fs.Glob(catalogFS, "catalog/*.txt")
	if err != nil {
		return nil, err
	}
	sort.Strings(names)
	var out []*mutant
	for _, n := range names {
		b, err := catalogFS.ReadFile(n)
		if err != nil {
			return nil, err
		}
		m, err := parseMutant(strings.TrimSuffix(path.Base(n), ".txt"), string(b))
		if err != nil {
			return nil, err
		}
		out = append(out, m)
	}
	return out, nil
}

// parseMutant parses one catalog file (see the package documentation).
func parseMutant(name, text string) (*mutant, error) {
	m := &mutant{Name: name}
	lines := strings.Split(strings.ReplaceAll(text, "\r\n", "\n"), "\n")
	fail := func(i int, format string, args ...any) error {
		return fmt.Errorf("catalog/%s.txt:%d: %s", name, i+1, fmt.Sprintf(format, args...))
	}
	var field *string
	i := 0
	// The header.
	for ; i < len(lines); i++ {
		l := lines[i]
		switch {
		case strings.HasPrefix(l, "@@@"):
		case strings.TrimSpace(l) == "" || strings.HasPrefix(l, "#"):
			field = nil
			continue
		case l[0] == ' ' || l[0] == '\t':
			if field == nil {
				return nil, fail(i, "a continuation line with no field before it")
			}
			*field += " " + strings.TrimSpace(l)
			continue
		default:
			k, v, ok := strings.Cut(l, ":")
			if !ok {
				return nil, fail(i, "want \"field: value\", got %q", l)
			}
			switch strings.TrimSpace(k) {
			case "promise":
				field = &m.Promise
			case "primitive":
				field = &m.Primitive
			case "expect":
				field = &m.Expect
			default:
				return nil, fail(i, "unknown field %q", k)
			}
			*field = strings.TrimSpace(v)
			continue
		}
		break
	}
	switch {
	case m.Promise == "":
		return nil, fmt.Errorf("catalog/%s.txt: no promise", name)
	case m.Primitive == "":
		return nil, fmt.Errorf("catalog/%s.txt: no primitive", name)
	case m.Expect == "":
		return nil, fmt.Errorf("catalog/%s.txt: no expect", name)
	}
	// The edit blocks.
	for i < len(lines) {
		l := lines[i]
		if strings.TrimSpace(l) == "" || strings.HasPrefix(l, "#") {
			i++
			continue
		}
		if !strings.HasPrefix(l, "@@@ ") {
			return nil, fail(i, "want \"@@@ path\", got %q", l)
		}
		e := edit{File: strings.TrimSpace(strings.TrimPrefix(l, "@@@ "))}
		if e.File == "" || path.IsAbs(e.File) || strings.Contains(e.File, "..") || strings.Contains(e.File, "\\") {
			return nil, fail(i, "bad path %q", e.File)
		}
		i++
		if i >= len(lines) || lines[i] != "<<<" {
			return nil, fail(i, "want \"<<<\" after the path")
		}
		i++
		start := i
		for i < len(lines) && lines[i] != "===" {
			i++
		}
		if i >= len(lines) {
			return nil, fail(start, "no \"===\" after the find text")
		}
		e.Find = strings.Join(lines[start:i], "\n")
		i++
		start = i
		for i < len(lines) && lines[i] != ">>>" {
			i++
		}
		if i >= len(lines) {
			return nil, fail(start, "no \">>>\" after the replacement")
		}
		e.Replace = strings.Join(lines[start:i], "\n")
		i++
		if strings.TrimSpace(e.Find) == "" {
			return nil, fail(start, "empty find text")
		}
		if e.Find == e.Replace {
			return nil, fail(start, "the replacement equals the find text")
		}
		m.Edits = append(m.Edits, e)
	}
	if len(m.Edits) == 0 {
		return nil, fmt.Errorf("catalog/%s.txt: no edit block", name)
	}
	return m, nil
}

// staleError says that an edit's find text is not in its file exactly once.
type staleError struct {
	mutant string
	edit   edit
	count  int
}

func (e *staleError) Error() string {
	first, _, _ := strings.Cut(e.edit.Find, "\n")
	what := "not found"
	if e.count > 1 {
		what = fmt.Sprintf("found %d times", e.count)
	}
	return fmt.Sprintf("%s: stale: %s: find text %q... %s", e.mutant, e.edit.File, first, what)
}

// apply applies m's edits to the files read and written by the two
// functions, and returns the paths it changed.
func (m *mutant) apply(read func(string) ([]byte, error), write func(string, []byte) error) ([]string, error) {
	changed := map[string]string{}
	var order []string
	for _, e := range m.Edits {
		text, ok := changed[e.File]
		if !ok {
			b, err := read(e.File)
			if err != nil {
				return nil, fmt.Errorf("%s: stale: %w", m.Name, err)
			}
			text = string(b)
			order = append(order, e.File)
		}
		if n := strings.Count(text, e.Find); n != 1 {
			return nil, &staleError{mutant: m.Name, edit: e, count: n}
		}
		changed[e.File] = strings.Replace(text, e.Find, e.Replace, 1)
	}
	for _, f := range order {
		if err := write(f, []byte(changed[f])); err != nil {
			return nil, err
		}
	}
	return order, nil
}

// packages returns the import-path patterns (relative, "./x") of the
// packages m's edits touch: lua/ belongs to the root package.
func (m *mutant) packages() []string {
	seen := map[string]bool{}
	var out []string
	for _, e := range m.Edits {
		dir := path.Dir(e.File)
		if dir == "lua" {
			dir = "."
		}
		p := "."
		if dir != "." {
			p = "./" + dir
		}
		if !seen[p] {
			seen[p] = true
			out = append(out, p)
		}
	}
	sort.Strings(out)
	return out
}
