package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestCatalogApplies applies every mutant's edits to the current tree, in
// memory: a find text that a refactor removed or made ambiguous fails it.
func TestCatalogApplies(t *testing.T) {
	if testing.Short() {
		t.Skip("-short")
	}
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	ms, err := loadCatalog()
	if err != nil {
		t.Fatal(err)
	}
	if len(ms) < 20 {
		t.Errorf("the catalog has %d mutants, want at least 20", len(ms))
	}
	for _, m := range ms {
		read := func(p string) ([]byte, error) { return os.ReadFile(filepath.Join(root, filepath.FromSlash(p))) }
		discard := func(string, []byte) error { return nil }
		if _, err := m.apply(read, discard); err != nil {
			t.Error(err)
		}
	}
}

func TestParseMutant(t *testing.T) {
	text := "promise: \"a\" (README.md)\n  and more\n# a comment\nprimitive: mutex\nexpect: exclusion\n\n" +
		"@@@ lua/x.lua\n<<<\nif a then\n\treturn\n===\nif b then\n\treturn\n>>>\n"
	m, err := parseMutant("01-x", text)
	if err != nil {
		t.Fatal(err)
	}
	if m.Promise != "\"a\" (README.md) and more" || m.Primitive != "mutex" || m.Expect != "exclusion" {
		t.Errorf("header: %+v", m)
	}
	if len(m.Edits) != 1 || m.Edits[0].File != "lua/x.lua" || m.Edits[0].Find != "if a then\n\treturn" || m.Edits[0].Replace != "if b then\n\treturn" {
		t.Errorf("edits: %+v", m.Edits)
	}
	files := map[string]string{"lua/x.lua": "x\nif a then\n\treturn\nend\n"}
	read := func(p string) ([]byte, error) { return []byte(files[p]), nil }
	write := func(p string, b []byte) error { files[p] = string(b); return nil }
	if _, err := m.apply(read, write); err != nil {
		t.Fatal(err)
	}
	if files["lua/x.lua"] != "x\nif b then\n\treturn\nend\n" {
		t.Errorf("applied: %q", files["lua/x.lua"])
	}
	if _, err := m.apply(read, write); err == nil || !strings.Contains(err.Error(), "stale") {
		t.Errorf("applying twice: %v, want stale", err)
	}
	for _, bad := range []string{
		"primitive: x\nexpect: y\n@@@ a\n<<<\nx\n===\ny\n>>>\n",              // no promise
		"promise: p\nprimitive: x\nexpect: y\n",                              // no edit
		"promise: p\nprimitive: x\nexpect: y\n@@@ a\n<<<\nx\n===\ny\n",       // no >>>
		"promise: p\nprimitive: x\nexpect: y\n@@@ ../a\n<<<\nx\n===\ny\n>>>", // bad path
	} {
		if _, err := parseMutant("bad", bad); err == nil {
			t.Errorf("parse of %q: no error", bad)
		}
	}
}
