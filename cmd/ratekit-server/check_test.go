package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestCheck(t *testing.T) {
	good, bad := t.TempDir(), t.TempDir()
	os.WriteFile(filepath.Join(good, "a.yaml"), []byte("domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: second, requests_per_unit: 1}\n"), 0o644)
	os.WriteFile(filepath.Join(bad, "a.yaml"), []byte("domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: jiffy, requests_per_unit: 1}\n"), 0o644)
	var out strings.Builder
	if code := check([]string{good}, &out); code != 0 || !strings.Contains(out.String(), "1 files, 1 rate limits: ok") {
		t.Fatalf("good: %d %s", code, out.String())
	}
	out.Reset()
	if code := check([]string{bad}, &out); code != 1 || !strings.Contains(out.String(), "a.yaml:4: invalid rate limit unit 'jiffy'") {
		t.Fatalf("bad: %d %s", code, out.String())
	}
	if code := check(nil, &out); code != 2 {
		t.Fatalf("no directory: %d", code)
	}
}
