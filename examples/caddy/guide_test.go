package main

import (
	"bytes"
	"os"
	"regexp"
	"testing"

	"github.com/caddyserver/caddy/v2"

	"github.com/ratekit/ratekit/caddyratekit"
)

// guide is the page that documents the module, from this folder.
const guide = "../../docs/gateways-caddy.md"

// block returns the fenced block that follows the marker line on page.
func block(t *testing.T, page []byte, marker string) []byte {
	t.Helper()
	re := regexp.MustCompile("(?s)" + regexp.QuoteMeta(marker) + "\n```[a-z]*\n(.*?)```\n")
	m := re.FindSubmatch(page)
	if m == nil {
		t.Fatalf("%s has no block after %s", guide, marker)
	}
	return m[1]
}

// The guide shows the Caddyfiles that the tests run, as they are.
func TestGuideShowsTheCaddyfiles(t *testing.T) {
	page, err := os.ReadFile(guide)
	if err != nil {
		t.Fatal(err)
	}
	for _, file := range []string{"Caddyfile", "gateway.Caddyfile"} {
		want, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		if got := block(t, page, "<!-- file:examples/caddy/"+file+" -->"); !bytes.Equal(got, want) {
			t.Errorf("%s shows another %s than examples/caddy/%[2]s:\n%s", guide, file, got)
		}
	}
}

// The guide's JSON config is one Caddy takes: strictly decoded, valid.
func TestGuideJSON(t *testing.T) {
	page, err := os.ReadFile(guide)
	if err != nil {
		t.Fatal(err)
	}
	js := block(t, page, "<!-- json:handler -->")
	var h caddyratekit.Handler
	// the "handler" field names the module in a route; the module's own
	// fields are the rest
	js = regexp.MustCompile(`\s*"handler": "ratekit",`).ReplaceAll(js, nil)
	if err := caddy.StrictUnmarshalJSON(js, &h); err != nil {
		t.Fatalf("the guide's JSON: %v", err)
	}
	if err := h.Validate(); err != nil {
		t.Errorf("the guide's JSON: %v", err)
	}
	if len(h.Rules) != 3 || h.Rules[2].Keys[0].Source != caddyratekit.SourceAPIKey {
		t.Errorf("decoded %+v", h.Rules)
	}
}
