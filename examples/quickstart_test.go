package examples_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// quickStartSections are the README's quick start sections by their
// snippet's name; each but net/http names its imports in a sentence
// "Its imports, in place of <dropped>: <added>."
var quickStartSections = []string{"nethttp", "gin", "echo", "echo5", "fiber", "fiber3", "grpc"}

var (
	importsSentence = regexp.MustCompile(`Its imports, in place of (.+?): (.+?)\.(\s|$)`)
	codeSpan        = regexp.MustCompile("`([^`]+)`")
)

// TestQuickStartBuilds builds the README's quick start as a reader pastes
// it, in a module of its own that requires this repository: for each
// framework, a main package of the README's import block (with the
// framework's own imports in place of those its section names), and a
// main function of the setup and the framework's lines.
func TestQuickStartBuilds(t *testing.T) {
	if testing.Short() {
		t.Skip("builds seven programs")
	}
	readme := string(readPage(t, "README.md"))
	blocks := map[string]string{}
	for _, s := range pageSnippets([]byte(readme)) {
		blocks[s.name] = s.text
	}
	imports, setup := blocks["imports"], blocks["setup"]
	if !strings.HasPrefix(imports, "import (") || setup == "" {
		t.Fatalf("README.md's quick start lacks its import block or its setup")
	}
	dir := t.TempDir()
	rootAbs, err := filepath.Abs(root)
	if err != nil {
		t.Fatal(err)
	}
	gomod := "module quickstart\n\ngo 1.26\n\nrequire github.com/ratekit/ratekit v0.0.0\n\nreplace github.com/ratekit/ratekit => " + rootAbs + "\n"
	write(t, filepath.Join(dir, "go.mod"), gomod)
	write(t, filepath.Join(dir, "go.sum"), string(readPage(t, "go.sum")))
	for _, name := range quickStartSections {
		body, ok := blocks[name]
		if !ok {
			t.Fatalf("README.md has no snippet %s", name)
		}
		imp := imports
		if name != "nethttp" {
			imp = sectionImports(t, readme, name, imports)
		}
		src := "package main\n\n" + imp + "\n\nfunc main() {\n" + indent(setup) + "\n\n" + indent(body) + "\n}\n"
		write(t, filepath.Join(dir, name, "main.go"), src)
	}
	cmd := exec.Command("go", "build", "./...")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOFLAGS=-mod=mod", "GOWORK=off")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("the quick start does not build as pasted: %v\n%s", err, out)
	}
}

// sectionImports returns the import block for the README's section whose
// snippet is name: the quick start's block, less the imports the section
// says it replaces, plus those it names.
func sectionImports(t *testing.T, readme, name, imports string) string {
	t.Helper()
	marker := "<!-- snippet:" + name + " -->"
	end := strings.Index(readme, marker)
	start := strings.LastIndex(readme[:max(end, 0)], "\n### ")
	if end < 0 || start < 0 {
		t.Fatalf("README.md: no section for snippet %s", name)
	}
	m := importsSentence.FindStringSubmatch(strings.Join(strings.Fields(readme[start:end]), " "))
	if m == nil {
		t.Fatalf("README.md: the section of snippet %s does not name its imports (Its imports, in place of ...: ...)", name)
	}
	drop := map[string]bool{}
	for _, c := range codeSpan.FindAllStringSubmatch(m[1], -1) {
		drop[c[1]] = true
	}
	var lines []string
	for _, line := range strings.Split(imports, "\n") {
		spec := strings.TrimSpace(line)
		if drop[spec] {
			delete(drop, spec)
			continue
		}
		if spec == ")" {
			for _, c := range codeSpan.FindAllStringSubmatch(m[2], -1) {
				lines = append(lines, "\t"+c[1])
			}
		}
		lines = append(lines, line)
	}
	if len(drop) > 0 {
		t.Fatalf("README.md: the section of snippet %s replaces imports the quick start does not have: %v", name, drop)
	}
	return strings.Join(lines, "\n")
}

func indent(code string) string {
	lines := strings.Split(code, "\n")
	for i, l := range lines {
		if l != "" {
			lines[i] = "\t" + l
		}
	}
	return strings.Join(lines, "\n")
}

func write(t *testing.T, path, text string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
}
