package examples_test

import (
	"bufio"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// snippets returns the blocks of a Go source file between "// snippet:<name>"
// and "// snippet:end", by name, with the indentation of the marker removed.
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

var readmeSnippet = regexp.MustCompile("(?s)<!-- snippet:(\\S+) -->\n```go\n(.*?)\n```")

// TestREADMESnippets checks that every snippet that README.md marks with
// <!-- snippet:<name> --> is, verbatim, the compiled snippet of that name,
// and that every compiled snippet (of every snippets*_test.go) is in
// README.md.
func TestREADMESnippets(t *testing.T) {
	compiled := map[string]string{}
	files, _ := filepath.Glob("snippets*_test.go") // the pattern is valid
	for _, file := range files {
		for name, text := range snippets(t, file) {
			if _, dup := compiled[name]; dup {
				t.Fatalf("%s: snippet %s is also in another snippets file", file, name)
			}
			compiled[name] = text
		}
	}
	readme, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, m := range readmeSnippet.FindAllStringSubmatch(string(readme), -1) {
		name, text := m[1], m[2]
		seen[name] = true
		want, ok := compiled[name]
		if !ok {
			t.Errorf("README.md: snippet %s is in no snippets*_test.go", name)
			continue
		}
		if text != want {
			t.Errorf("README.md: snippet %s differs from snippets*_test.go:\n--- README.md\n%s\n--- snippets*_test.go\n%s", name, text, want)
		}
	}
	for name := range compiled {
		if !seen[name] {
			t.Errorf("snippet %s of snippets*_test.go is not in README.md", name)
		}
	}
	for _, want := range []string{"go run ./examples/demo", "go test ./...", "redis-server"} {
		if !strings.Contains(string(readme), want) {
			t.Errorf("README.md does not mention %q", want)
		}
	}
}
