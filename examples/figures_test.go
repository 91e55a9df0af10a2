package examples_test

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// generatedFigure matches the figures that the generated pages own: Redis
// time per call or decision, decisions per second, Redis calls per
// decision. They go stale with every change of the scripts or the
// Limiter, and bench/ rewrites the pages that hold them
// (docs/benchmarks*.md, docs/capacity.md); a how-to page points to those
// tables instead of quoting them.
var generatedFigure = regexp.MustCompile(`\d[\d,.]*\s?(µs|us) (per|a) (call|decision)|\d[\d,.]*k? decisions/s|\d[\d.]* Redis calls`)

// figurePages are the pages that may quote such figures: the generated
// ones, the dated record of measurements, and the record of decisions,
// each figure there with its date or its run.
var figurePages = map[string]bool{
	"capacity.md": true, "measurements.md": true, "ARCHITECTURE.md": true,
}

// TestHowToPagesQuoteNoGeneratedFigures fails when README.md or a how-to
// page of docs/ quotes a figure that a generated page owns.
func TestHowToPagesQuoteNoGeneratedFigures(t *testing.T) {
	pages, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	pages = append(pages, filepath.Join(root, "README.md"))
	for _, p := range pages {
		name := filepath.Base(p)
		if figurePages[name] || strings.HasPrefix(name, "benchmarks") {
			continue
		}
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		for i, line := range strings.Split(string(b), "\n") {
			if m := generatedFigure.FindString(line); m != "" {
				t.Errorf("%s:%d quotes %q: point to the generated tables (docs/capacity.md, docs/benchmarks*.md) instead", name, i+1, m)
			}
		}
	}
}
