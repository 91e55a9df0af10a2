package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestQuickRun runs -quick against a redis-server of its own and checks
// that the report has every section and a row for every case. It asserts
// no timing.
func TestQuickRun(t *testing.T) {
	if _, err := exec.LookPath("redis-server"); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("redis-server not on PATH: %v", err)
		}
		t.Skip("redis-server not on PATH (Debian/Ubuntu: apt-get install redis-server)")
	}
	o := defaultOptions()
	o.quick, o.cmdline = true, "go run ./cmd/capacity -quick"
	o.out = filepath.Join(t.TempDir(), "capacity.md")
	if err := o.check(); err != nil {
		t.Fatal(err)
	}
	if err := run(context.Background(), o); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(o.out)
	if err != nil {
		t.Fatal(err)
	}
	out := string(b)
	checkSections(t, out)
	for i, c := range cases(o.manyKeys) {
		if want := "| " + id(i) + " | " + c.algName() + " | " + c.mode.String() + " | " + c.keys.name + " |"; !strings.Contains(out, want) {
			t.Errorf("no measured row %q", want)
		}
	}
}
