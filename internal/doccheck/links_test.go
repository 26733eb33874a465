package doccheck

import (
	"fmt"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"unicode"
)

// TestLinks checks every relative link in the repository's Markdown, and
// every .md path named in a Go comment: the file (or directory) exists,
// and an #anchor names a heading, or an <a id>, of the Markdown file.
func TestLinks(t *testing.T) {
	root := repoRoot(t)
	docs := make(map[string]string) // path -> text
	for _, f := range repoFiles(t, root, ".md") {
		b, err := os.ReadFile(filepath.Join(root, f))
		if err != nil {
			t.Fatal(err)
		}
		docs[f] = string(b)
	}
	if _, ok := docs["README.md"]; !ok {
		t.Fatal("no README.md at the module root")
	}
	check := checker{root: root, docs: docs, anchors: make(map[string]map[string]bool)}
	n := 0
	for f, text := range docs {
		for _, l := range markdownLinks(text) {
			n++
			if err := check.resolve(f, l.target); err != nil {
				t.Errorf("%s:%d: link %q: %v", f, l.line, l.target, err)
			}
		}
	}
	for _, f := range repoFiles(t, root, ".go") {
		if strings.HasPrefix(f, "internal/doccheck/") {
			continue // its fixtures name files that do not exist on purpose
		}
		b, err := os.ReadFile(filepath.Join(root, f))
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range goDocLinks(string(b)) {
			n++
			if err := check.resolveGo(f, l.target); err != nil {
				t.Errorf("%s:%d: %q: %v", f, l.line, l.target, err)
			}
		}
	}
	if n < 100 {
		t.Errorf("checked %d links, want the repository's (over 100): is the parser blind?", n)
	}
}

// TestLinksCatchBreaks feeds the checker links that must fail and links
// that must pass, so TestLinks cannot pass by checking nothing.
func TestLinksCatchBreaks(t *testing.T) {
	docs := map[string]string{
		"README.md": "# padlock\n\n## Quick start\n\n## Quick start\n\n### `net/http`, without gin\n\n<a id=\"custom\"></a>\n",
		"docs/a.md": "# A guide\n\n```sh\n# not a heading\n```\n\n## Eviction: run Redis with `noeviction`\n",
	}
	check := checker{root: t.TempDir(), docs: docs, anchors: make(map[string]map[string]bool)}
	for _, tc := range []struct {
		from, target string
		ok           bool
	}{
		{"README.md", "docs/a.md", true},
		{"README.md", "docs/a.md#eviction-run-redis-with-noeviction", true},
		{"README.md", "#quick-start", true},
		{"README.md", "#quick-start-1", true},
		{"README.md", "#nethttp-without-gin", true},
		{"README.md", "#custom", true},
		{"docs/a.md", "../README.md#quick-start", true},
		{"docs/a.md", "#a-guide", true},
		{"README.md", "https://example.com/missing", true},
		{"README.md", "docs/b.md", false},
		{"README.md", "docs/a.md#eviction", false},
		{"README.md", "#quick-start-2", false},
		{"docs/a.md", "#not-a-heading", false},
		{"docs/a.md", "README.md", false},
		{"docs/a.md", "../../outside.md", false},
	} {
		err := check.resolve(tc.from, tc.target)
		if (err == nil) != tc.ok {
			t.Errorf("%s -> %s: got error %v, want ok %v", tc.from, tc.target, err, tc.ok)
		}
	}
	links := markdownLinks("[a](x.md) `[b](y.md)` [c\nd](z.md#e) ![i](p.png)\n```\n[no](no.md)\n```\n[ext](https://a.b) [t](u.md \"title\")\n[ref]: r.md\n")
	var got []string
	for _, l := range links {
		got = append(got, fmt.Sprintf("%d:%s", l.line, l.target))
	}
	want := "1:x.md 2:z.md#e 2:p.png 6:https://a.b 6:u.md 7:r.md"
	if strings.Join(got, " ") != want {
		t.Errorf("got links %v, want %s", got, want)
	}
}

type link struct {
	line   int
	target string
}

var (
	fenceRE   = regexp.MustCompile("^\\s*(```|~~~)")
	codeRE    = regexp.MustCompile("`[^`\n]*`")
	inlineRE  = regexp.MustCompile(`!?\[(?:[^\[\]]|\[[^\[\]]*\])*\]\(\s*<?([^()\s>]+)>?(?:\s+"[^"]*")?\s*\)`)
	refDefRE  = regexp.MustCompile(`(?m)^ {0,3}\[[^\]]+\]:\s+<?(\S+?)>?(?:\s+"[^"]*")?\s*$`)
	hrefRE    = regexp.MustCompile(`<(?:a|img)\s[^>]*?(?:href|src)="([^"]+)"`)
	headingRE = regexp.MustCompile(`^ {0,3}(#{1,6})\s+(.*?)\s*#*\s*$`)
	idRE      = regexp.MustCompile(`<a\s+(?:id|name)="([^"]+)"`)
	goLinkRE  = regexp.MustCompile(`(?:^|[\s("'\x60])((?:\.\.?/)*(?:[\w.-]+/)*[\w.-]+\.md)(#[\w-]+)?`)
)

// prose returns text with fenced code blocks and inline code spans blanked
// out, line numbers kept.
func prose(text string) string {
	lines := strings.Split(text, "\n")
	in := false
	for i, l := range lines {
		if fenceRE.MatchString(l) {
			in = !in
			lines[i] = ""
			continue
		}
		if in {
			lines[i] = ""
			continue
		}
		lines[i] = codeRE.ReplaceAllStringFunc(l, func(s string) string { return strings.Repeat(" ", len(s)) })
	}
	return strings.Join(lines, "\n")
}

// markdownLinks returns the link targets of a Markdown text, outside code:
// inline links and images, reference definitions, and HTML href and src.
func markdownLinks(text string) []link {
	p := prose(text)
	var links []link
	add := func(re *regexp.Regexp) {
		for _, m := range re.FindAllStringSubmatchIndex(p, -1) {
			links = append(links, link{line: 1 + strings.Count(p[:m[2]], "\n"), target: p[m[2]:m[3]]})
		}
	}
	add(inlineRE)
	add(refDefRE)
	add(hrefRE)
	// In order of position, for stable messages.
	for i := 1; i < len(links); i++ {
		for j := i; j > 0 && links[j].line < links[j-1].line; j-- {
			links[j], links[j-1] = links[j-1], links[j]
		}
	}
	return links
}

// goDocLinks returns the .md paths, with any #anchor, named in a Go
// file's comments and strings.
func goDocLinks(src string) []link {
	var links []link
	for i, l := range strings.Split(src, "\n") {
		if !strings.Contains(l, ".md") {
			continue
		}
		for _, m := range goLinkRE.FindAllStringSubmatch(l, -1) {
			links = append(links, link{line: i + 1, target: m[1] + m[2]})
		}
	}
	return links
}

type checker struct {
	root    string
	docs    map[string]string          // repository path -> Markdown text
	anchors map[string]map[string]bool // repository path -> anchors, built on first use
}

// resolve checks target, a link in the Markdown file from.
func (c *checker) resolve(from, target string) error {
	if u, err := url.Parse(target); err == nil && (u.Scheme != "" || strings.HasPrefix(target, "//")) {
		return nil // not relative
	}
	file, frag, _ := strings.Cut(target, "#")
	file, err := url.PathUnescape(file)
	if err != nil {
		return err
	}
	p := from
	if file != "" {
		p = path.Join(path.Dir(from), file)
	}
	return c.exists(p, frag)
}

// resolveGo checks target, a .md path in the Go file from: relative to the
// file's directory, or else to the module root, as comments name them.
func (c *checker) resolveGo(from, target string) error {
	file, frag, _ := strings.Cut(target, "#")
	err := c.exists(path.Join(path.Dir(from), file), frag)
	if err != nil && c.exists(path.Clean(file), frag) == nil {
		return nil
	}
	return err
}

func (c *checker) exists(p, frag string) error {
	if p == ".." || strings.HasPrefix(p, "../") {
		return fmt.Errorf("%s is outside the repository", p)
	}
	text, isDoc := c.docs[p]
	if !isDoc {
		if _, err := os.Stat(filepath.Join(c.root, filepath.FromSlash(p))); err != nil {
			return fmt.Errorf("no file %s", p)
		}
		if frag != "" && strings.HasSuffix(p, ".md") {
			return fmt.Errorf("%s is not a Markdown file of the repository", p)
		}
		return nil
	}
	if frag == "" {
		return nil
	}
	a, ok := c.anchors[p]
	if !ok {
		a = anchors(text)
		c.anchors[p] = a
	}
	if !a[frag] {
		return fmt.Errorf("%s has no heading or anchor #%s", p, frag)
	}
	return nil
}

// anchors returns the anchors GitHub gives a Markdown text: one per
// heading (duplicates numbered -1, -2, ...), and each <a id> or <a name>.
func anchors(text string) map[string]bool {
	a := make(map[string]bool)
	seen := make(map[string]int)
	in := false
	for _, l := range strings.Split(text, "\n") {
		if fenceRE.MatchString(l) {
			in = !in
			continue
		}
		if in {
			continue
		}
		for _, m := range idRE.FindAllStringSubmatch(l, -1) {
			a[m[1]] = true
		}
		m := headingRE.FindStringSubmatch(l)
		if m == nil {
			continue
		}
		s := slug(m[2])
		if n := seen[s]; n > 0 {
			a[fmt.Sprintf("%s-%d", s, n)] = true
		} else {
			a[s] = true
		}
		seen[s]++
	}
	return a
}

var linkTextRE = regexp.MustCompile(`!?\[([^\]]*)\]\([^)]*\)`)

// slug is GitHub's anchor for a heading: its text without Markdown, lower
// case, with spaces as hyphens and every other character but letters,
// digits, hyphens and underscores left out.
func slug(heading string) string {
	heading = linkTextRE.ReplaceAllString(heading, "$1")
	var b strings.Builder
	for _, r := range strings.ToLower(heading) {
		switch {
		case r == ' ':
			b.WriteByte('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
			b.WriteRune(r)
		}
	}
	return b.String()
}
