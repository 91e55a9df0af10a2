package main

import (
	"bytes"
	"context"
	"regexp"
	"strings"
	"testing"

	"github.com/ratekit/ratekit/examples/internal/apptest"
)

// The test binary doubles as the demo: apptest starts it as a process.
func TestMain(m *testing.M) { apptest.Main(m, main) }

// wantOutput checks the short demo's output: four phases, each with its
// table, and the numbers that make the point.
func wantOutput(t *testing.T, out string) {
	t.Helper()
	for _, want := range []string{
		`(?m)^1/4  Every replica checks the shared limit in Redis$`,
		`(?m)^  replica +address +allowed +denied$`,
		`(?m)^  (net/http|gin|echo|fiber) +127\.0\.0\.1:\d+ +6 +18$`,
		`(?m)^  total +24 +72 +global limit: 3 clients x 8 = 24$`,
		`OK: exactly the global limit got through`,
		`(?m)^2/4  `,
		`(?m)^  total +96 +0 +global limit`,
		`4\.0x the global limit got through`,
		`(?m)^3/4  Redis stops`,
		`Every request was answered`,
		`So the fleet holds near the global limit:\s+exactly it here`,
		`\(4 of 4 are open;`,
		`(?m)^4/4  Redis is back$`,
		`every circuit breaker closed after`,
		`OK: exactly the global limit again`,
	} {
		if !regexp.MustCompile(want).MatchString(out) {
			t.Errorf("the output lacks %s", want)
		}
	}
	if strings.Count(out, "\n  total ") != 4 {
		t.Errorf("want four tables, one per phase")
	}
	if t.Failed() {
		t.Logf("output:\n%s", out)
	}
}

// TestShort runs the short demo in this process, where the race detector
// sees it.
func TestShort(t *testing.T) {
	var out bytes.Buffer
	if code := run(context.Background(), &out, false, quick); code != 0 {
		t.Errorf("exit status %d, want 0", code)
	}
	wantOutput(t, out.String())
}

// TestCommand runs the demo as a command with -short, as README says.
func TestCommand(t *testing.T) {
	code, out := apptest.Exec(t, []string{"-short"})
	if code != 0 {
		t.Errorf("exit status %d, want 0", code)
	}
	wantOutput(t, out)
}
