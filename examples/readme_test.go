package examples_test

import (
	"bufio"
	"bytes"
	"fmt"
	"maps"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"unicode"

	"github.com/yuin/goldmark"
	"github.com/yuin/goldmark/ast"
	"github.com/yuin/goldmark/extension"
	"github.com/yuin/goldmark/text"
)

// The pages are README.md and every docs/*.md. A page's Go code sits in a
// block fenced with ```go right after a marker line <!-- snippet:<name> -->,
// and the same code, compiled, between "// snippet:<name>" and
// "// snippet:end" in one of the snippets*_test.go files beside this one.

// root is the repository's root, seen from this package's directory.
const root = ".."

// snippets returns the blocks of a Go source file between "// snippet:<name>"
// and "// snippet:end", by name, with the indentation of the marker removed
// and without trailing blank lines.
func snippets(t *testing.T, path string) map[string]string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	out := map[string]string{}
	var (
		name, indent string
		lines        []string
	)
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		trimmed := strings.TrimSpace(line)
		switch {
		case trimmed == "// snippet:end":
			if name == "" {
				t.Fatalf("%s:%d: snippet:end outside a snippet", path, n)
			}
			for len(lines) > 0 && lines[len(lines)-1] == "" {
				lines = lines[:len(lines)-1] // gofmt's blank line before a top-level marker
			}
			out[name] = strings.Join(lines, "\n")
			name, lines = "", nil
		case strings.HasPrefix(trimmed, "// snippet:"):
			if name != "" {
				t.Fatalf("%s:%d: snippet inside snippet %s", path, n, name)
			}
			name = strings.TrimPrefix(trimmed, "// snippet:")
			indent = line[:len(line)-len(strings.TrimLeft(line, "\t"))]
			if _, dup := out[name]; dup {
				t.Fatalf("%s:%d: two snippets named %s", path, n, name)
			}
		case name != "":
			if line != "" && !strings.HasPrefix(line, indent) {
				t.Fatalf("%s:%d: snippet %s is indented less than its marker", path, n, name)
			}
			lines = append(lines, strings.TrimPrefix(line, indent))
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if name != "" {
		t.Fatalf("%s: snippet %s has no end", path, name)
	}
	return out
}

// compiled returns the snippets of every snippets*_test.go file, by name,
// and the file each is in.
func compiled(t *testing.T) (code, file map[string]string) {
	t.Helper()
	code, file = map[string]string{}, map[string]string{}
	files, _ := filepath.Glob("snippets*_test.go") // the pattern is valid
	for _, f := range files {
		for name, text := range snippets(t, f) {
			if other, dup := file[name]; dup {
				t.Fatalf("snippet %s is in both %s and %s", name, other, f)
			}
			code[name], file[name] = text, f
		}
	}
	return code, file
}

// pages returns the paths, relative to the repository's root, of README.md
// and of every docs/*.md.
func pages(t *testing.T) []string {
	t.Helper()
	docs, _ := filepath.Glob(filepath.Join(root, "docs", "*.md")) // the pattern is valid
	out := []string{"README.md"}
	for _, d := range docs {
		out = append(out, filepath.ToSlash(must(filepath.Rel(root, d))))
	}
	return out
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

// readPage returns the text of a page, given its path from the root.
func readPage(t *testing.T, page string) []byte {
	t.Helper()
	src, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(page)))
	if err != nil {
		t.Fatal(err)
	}
	return src
}

var snippetMarker = regexp.MustCompile(`^<!-- snippet:(\S+) -->$`)

// pageSnippet is a Go block of a page.
type pageSnippet struct {
	name string // "" when the block has no marker
	line int    // of the opening fence
	text string
}

// pageSnippets returns the Go blocks of a page, in order.
func pageSnippets(src []byte) []pageSnippet {
	lines := strings.Split(string(src), "\n")
	var out []pageSnippet
	for i := 0; i < len(lines); i++ {
		if lines[i] != "```go" {
			continue
		}
		s := pageSnippet{line: i + 1}
		if i > 0 {
			if m := snippetMarker.FindStringSubmatch(lines[i-1]); m != nil {
				s.name = m[1]
			}
		}
		var body []string
		for i++; i < len(lines) && lines[i] != "```"; i++ {
			body = append(body, lines[i])
		}
		s.text = strings.Join(body, "\n")
		out = append(out, s)
	}
	return out
}

// checkPageSnippets checks that every Go block of page is marked, and is
// verbatim the compiled snippet of its name, and returns the names it uses.
func checkPageSnippets(t *testing.T, page string, code, file map[string]string) []string {
	t.Helper()
	var names []string
	for _, s := range pageSnippets(readPage(t, page)) {
		if s.name == "" {
			t.Errorf("%s:%d: a Go block without a <!-- snippet:<name> --> marker on the line before: compile it in a snippets*_test.go file", page, s.line)
			continue
		}
		names = append(names, s.name)
		want, ok := code[s.name]
		if !ok {
			t.Errorf("%s:%d: snippet %s is in no snippets*_test.go", page, s.line, s.name)
			continue
		}
		if s.text != want {
			t.Errorf("%s:%d: snippet %s differs from %s:\n--- %s\n%s\n--- %s\n%s", page, s.line, s.name, file[s.name], page, s.text, file[s.name], want)
		}
	}
	return names
}

// TestREADMESnippets checks that every Go block of README.md is marked with
// <!-- snippet:<name> --> and is, verbatim, the compiled snippet of that name,
// and that the README names the two commands.
func TestREADMESnippets(t *testing.T) {
	code, file := compiled(t)
	checkPageSnippets(t, "README.md", code, file)
	readme := string(readPage(t, "README.md"))
	for _, want := range []string{"go run ./examples/demo", "go test ./...", "redis-server"} {
		if !strings.Contains(readme, want) {
			t.Errorf("README.md does not mention %q", want)
		}
	}
}

// TestREADMEFitsAScreen keeps the front page a front page: at most 250
// lines, the rest in the guides it links to.
func TestREADMEFitsAScreen(t *testing.T) {
	if n := strings.Count(string(readPage(t, "README.md")), "\n"); n > 250 {
		t.Errorf("README.md has %d lines, want at most 250: move what grew into a guide under docs/", n)
	}
}

// TestGuideSnippets checks the Go blocks of every docs/*.md as
// TestREADMESnippets checks the README's.
func TestGuideSnippets(t *testing.T) {
	code, file := compiled(t)
	for _, page := range pages(t)[1:] {
		checkPageSnippets(t, page, code, file)
	}
}

// TestSnippetsUsed checks that every compiled snippet appears on exactly
// one page: none is compiled for nothing, and none is shown twice.
func TestSnippetsUsed(t *testing.T) {
	code, file := compiled(t)
	onPage := map[string][]string{}
	for _, page := range pages(t) {
		for _, s := range pageSnippets(readPage(t, page)) {
			if s.name != "" {
				onPage[s.name] = append(onPage[s.name], page)
			}
		}
	}
	for name := range code {
		switch ps := onPage[name]; len(ps) {
		case 0:
			t.Errorf("snippet %s of %s is on no page (README.md, docs/*.md)", name, file[name])
		case 1:
		default:
			t.Errorf("snippet %s of %s is on %d pages, %s: show it once and link to it", name, file[name], len(ps), strings.Join(ps, ", "))
		}
	}
}

// TestLinks checks every relative link of README.md and docs/*.md: the
// file or directory it names exists in the repository, and a #fragment
// names a heading of the Markdown page it points to, as GitHub makes
// anchors of headings. Links with a scheme (https:, mailto:) are not
// followed.
func TestLinks(t *testing.T) {
	anchors := map[string]map[string]bool{} // by page, from the root
	anchorsOf := func(page string) map[string]bool {
		if a, ok := anchors[page]; ok {
			return a
		}
		a := headingAnchors(readPage(t, page))
		anchors[page] = a
		return a
	}
	checked := 0
	for _, page := range pages(t) {
		src := readPage(t, page)
		for _, l := range links(src) {
			checked++
			if err := checkLink(page, l.dest, anchorsOf); err != nil {
				t.Errorf("%s:%d: link %q: %v", page, l.line, l.dest, err)
			}
		}
	}
	if checked == 0 {
		t.Fatal("no link found on any page: the parser reads none")
	}
	t.Logf("%d links on %d pages", checked, len(pages(t)))
}

// checkLink checks the link dest of page (a path from the root).
func checkLink(page, dest string, anchorsOf func(page string) map[string]bool) error {
	u, err := url.Parse(dest)
	if err != nil {
		return err
	}
	if u.Scheme != "" || u.Host != "" {
		return nil // not followed
	}
	target := page
	if u.Path != "" {
		if path.IsAbs(u.Path) {
			return fmt.Errorf("an absolute path: make it relative to %s", path.Dir(page))
		}
		target = path.Join(path.Dir(page), u.Path)
		if target == ".." || strings.HasPrefix(target, "../") {
			return fmt.Errorf("points outside the repository")
		}
		if _, err := os.Stat(filepath.Join(root, filepath.FromSlash(target))); err != nil {
			return fmt.Errorf("%s does not exist", target)
		}
	}
	if u.Fragment == "" {
		return nil
	}
	if path.Ext(target) != ".md" {
		return fmt.Errorf("a #fragment into %s, which is not a Markdown page", target)
	}
	if !anchorsOf(target)[u.Fragment] {
		return fmt.Errorf("%s has no heading #%s", target, u.Fragment)
	}
	return nil
}

// link is a link's destination and the line it is on.
type link struct {
	dest string
	line int
}

// parse parses a Markdown page as GitHub does, tables included.
func parse(src []byte) ast.Node {
	md := goldmark.New(goldmark.WithExtensions(extension.Table, extension.Strikethrough))
	return md.Parser().Parse(text.NewReader(src))
}

// links returns the links and images of a Markdown page, outside code.
func links(src []byte) []link {
	var out []link
	ast.Walk(parse(src), func(n ast.Node, entering bool) (ast.WalkStatus, error) {
		if !entering {
			return ast.WalkContinue, nil
		}
		switch n := n.(type) {
		case *ast.Link:
			out = append(out, link{string(n.Destination), lineOf(src, n)})
		case *ast.Image:
			out = append(out, link{string(n.Destination), lineOf(src, n)})
		}
		return ast.WalkContinue, nil
	})
	return out
}

// lineOf returns the line of src on which n starts, or 0 when the parser
// did not record it.
func lineOf(src []byte, n ast.Node) int {
	pos := n.Pos()
	for c := n.FirstChild(); pos < 0 && c != nil; c = c.FirstChild() {
		if t, ok := c.(*ast.Text); ok {
			pos = t.Segment.Start
		}
	}
	if pos < 0 {
		return 0
	}
	return bytes.Count(src[:pos], []byte("\n")) + 1
}

// headingAnchors returns the anchors GitHub gives the headings of a page.
func headingAnchors(src []byte) map[string]bool {
	out := map[string]bool{}
	seen := map[string]int{}
	ast.Walk(parse(src), func(n ast.Node, entering bool) (ast.WalkStatus, error) {
		h, ok := n.(*ast.Heading)
		if !ok || !entering {
			return ast.WalkContinue, nil
		}
		slug := githubSlug(plainText(src, h))
		anchor := slug
		if k := seen[slug]; k > 0 {
			anchor = slug + "-" + strconv.Itoa(k)
		}
		seen[slug]++
		out[anchor] = true
		return ast.WalkSkipChildren, nil
	})
	return out
}

// plainText returns the text of an inline tree: its words, code spans and
// link texts, without markup.
func plainText(src []byte, n ast.Node) string {
	var b strings.Builder
	ast.Walk(n, func(c ast.Node, entering bool) (ast.WalkStatus, error) {
		if !entering {
			return ast.WalkContinue, nil
		}
		switch c := c.(type) {
		case *ast.Text:
			b.Write(c.Segment.Value(src))
			if c.SoftLineBreak() {
				b.WriteByte(' ')
			}
		case *ast.String:
			b.Write(c.Value)
		}
		return ast.WalkContinue, nil
	})
	return b.String()
}

// githubSlug makes an anchor of a heading's text as GitHub does: lower
// case, spaces to hyphens, and every character but letters, digits,
// hyphens and underscores dropped.
func githubSlug(heading string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(strings.TrimSpace(heading)) {
		switch {
		case r == ' ':
			b.WriteByte('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r) || unicode.Is(unicode.M, r):
			b.WriteRune(r)
		}
	}
	return b.String()
}

// TestLinkAnchorSlug checks anchors made as GitHub makes them, on headings
// like those of this repository's pages.
func TestLinkAnchorSlug(t *testing.T) {
	for _, c := range []struct{ heading, want string }{
		{"Quick start", "quick-start"},
		{"net/http", "nethttp"},
		{"Echo v5", "echo-v5"},
		{"Changing a rule's algorithm", "changing-a-rules-algorithm"},
		{"Redis Cluster, Sentinel and Ring", "redis-cluster-sentinel-and-ring"},
		{"Metrics, logs and shadow mode", "metrics-logs-and-shadow-mode"},
		{"One request, from the adapter to the script and back", "one-request-from-the-adapter-to-the-script-and-back"},
		{"Failover: Redis Cluster and Sentinel", "failover-redis-cluster-and-sentinel"},
		{"`Limiter.Check` and `core.Rule`", "limitercheck-and-corerule"},
		{"Quota management (limits that follow the caller)", "quota-management-limits-that-follow-the-caller"},
		{"The first hour — a front page", "the-first-hour--a-front-page"},
	} {
		if got := githubSlug(c.heading); got != c.want {
			t.Errorf("githubSlug(%q) = %q, want %q", c.heading, got, c.want)
		}
	}
	// a repeated heading gets -1, -2
	got := headingAnchors([]byte("# A\n\n## Notes\n\n## Notes\n\n## Notes\n"))
	for _, want := range []string{"a", "notes", "notes-1", "notes-2"} {
		if !got[want] {
			t.Errorf("anchors %v lack %s", slices.Sorted(maps.Keys(got)), want)
		}
	}
}
