package envoytest

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	bootstrapv3 "github.com/envoyproxy/go-control-plane/envoy/config/bootstrap/v3"
	streamv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/access_loggers/stream/v3"
	rlv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ratelimit/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/router/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/upstreams/http/v3"
	"go.yaml.in/yaml/v3"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/ratekit/ratekit/cmd/ratekit-server/internal/config"
	"github.com/ratekit/ratekit/cmd/ratekit-server/internal/service"
	"github.com/ratekit/ratekit/cmd/ratekit-server/internal/settings"
)

// guide is the operator's guide whose snippets these tests check.
func guide(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(moduleDir(), "..", "..", "..", "docs", "gateways-envoy.md"))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// blocks returns the guide's fenced blocks of a language.
func blocks(doc, lang string) []string {
	var out []string
	for _, part := range strings.Split(doc, "```"+lang+"\n")[1:] {
		out = append(out, part[:strings.Index(part, "```")])
	}
	return out
}

func find(t *testing.T, bs []string, marker string) string {
	t.Helper()
	for _, b := range bs {
		if strings.Contains(b, marker) {
			return b
		}
	}
	t.Fatalf("no block with %q", marker)
	return ""
}

// TestGuideEnvoySnippet parses the guide's Envoy configuration into
// go-control-plane's Bootstrap, typed configurations included: every
// field name is the proto's.
func TestGuideEnvoySnippet(t *testing.T) {
	src := find(t, blocks(guide(t), "yaml"), "static_resources:")
	var v any
	if err := yaml.Unmarshal([]byte(src), &v); err != nil {
		t.Fatal(err)
	}
	j, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	var b bootstrapv3.Bootstrap
	if err := protojson.Unmarshal(j, &b); err != nil {
		t.Fatalf("the Envoy snippet is not a Bootstrap: %v", err)
	}
	if err := b.ValidateAll(); err != nil {
		t.Fatalf("the Envoy snippet does not validate: %v", err)
	}
	if !strings.Contains(src, "cluster_name: ratelimit") || !strings.Contains(src, "port_value: 8081") {
		t.Fatal("the snippet's rate_limit_service does not name the ratelimit cluster on 8081")
	}
}

// TestGuideKubernetes checks the Deployment's variables against the
// server's settings, and the Service's gRPC port.
func TestGuideKubernetes(t *testing.T) {
	src := find(t, blocks(guide(t), "yaml"), "kind: Deployment")
	known := map[string]bool{}
	for _, s := range settings.Table {
		known[s.Name] = true
	}
	dec := yaml.NewDecoder(strings.NewReader(src))
	kinds := 0
	for {
		var doc map[string]any
		if err := dec.Decode(&doc); err != nil {
			break
		}
		kinds++
	}
	if kinds != 2 {
		t.Fatalf("%d YAML documents, want a Deployment and a Service", kinds)
	}
	for _, m := range regexp.MustCompile(`name: ([A-Z_]+), value:`).FindAllStringSubmatch(src, -1) {
		if !known[m[1]] {
			t.Errorf("the Deployment sets %s, which is no setting", m[1])
		}
	}
}

// TestGuideSettingsTable: the guide's table names every setting, and only
// settings.
func TestGuideSettingsTable(t *testing.T) {
	doc := guide(t)
	start := strings.Index(doc, "| variable | default |")
	end := strings.Index(doc[start:], "\n\n") + start
	table := doc[start:end]
	named := map[string]bool{}
	for _, row := range strings.Split(table, "\n")[2:] {
		cells := strings.Split(row, "|")
		if len(cells) < 3 {
			continue
		}
		for _, m := range regexp.MustCompile("`([A-Z][A-Z0-9_]+)`").FindAllStringSubmatch(cells[1], -1) {
			named[m[1]] = true
		}
	}
	for _, s := range settings.Table {
		if !named[s.Name] {
			t.Errorf("the guide's table does not name %s", s.Name)
		}
		delete(named, s.Name)
	}
	for n := range named {
		if !strings.HasPrefix(n, "MEMCACHE") {
			t.Errorf("the guide's table names %s, which is no setting", n)
		}
	}
}

// TestGuideRatekitKeys loads the guide's example of ratekit's keys.
func TestGuideRatekitKeys(t *testing.T) {
	src := find(t, blocks(guide(t), "yaml"), "domain: api")
	c, _, err := config.Load([]config.File{{Name: "guide.yaml", Data: []byte(src)}}, config.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if c.Rules() != 2 {
		t.Fatalf("%d rules", c.Rules())
	}
}

// TestGuideMetadata loads the guide's example of descriptor metadata.
func TestGuideMetadata(t *testing.T) {
	src := find(t, blocks(guide(t), "yaml"), "plan: gold")
	c, _, err := config.Load([]config.File{{Name: "guide.yaml", Data: []byte(src)}}, config.Options{})
	if err != nil {
		t.Fatal(err)
	}
	m := c.Domain("api").Match([]*rlv3.RateLimitDescriptor_Entry{{Key: "tenant", Value: "acme"}})
	if got := m.Rule.Metadata.GetFields()["upstream"].GetStructValue().GetFields()["pool"].GetStringValue(); got != "dedicated" {
		t.Fatalf("metadata %v", m.Rule.Metadata)
	}
}

// TestGuideAccessLog parses the guide's access log into an
// HttpConnectionManager's, its typed configuration included, and checks
// that it prints the deciding rule where ratekit-server puts it.
func TestGuideAccessLog(t *testing.T) {
	src := find(t, blocks(guide(t), "yaml"), "envoy.access_loggers.stdout")
	var v any
	if err := yaml.Unmarshal([]byte(src), &v); err != nil {
		t.Fatal(err)
	}
	j, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	var hcm hcmv3.HttpConnectionManager
	if err := protojson.Unmarshal(j, &hcm); err != nil {
		t.Fatalf("the access log is not an HttpConnectionManager's: %v", err)
	}
	if len(hcm.GetAccessLog()) != 1 {
		t.Fatalf("%d access logs", len(hcm.GetAccessLog()))
	}
	var out streamv3.StdoutAccessLog
	if err := hcm.GetAccessLog()[0].GetTypedConfig().UnmarshalTo(&out); err != nil {
		t.Fatal(err)
	}
	if err := out.ValidateAll(); err != nil {
		t.Fatal(err)
	}
	format := out.GetLogFormat().GetTextFormatSource().GetInlineString()
	if !strings.Contains(format, "%DYNAMIC_METADATA(envoy.filters.http.ratelimit:"+service.RuleMetadataKey+":rule)%") {
		t.Fatalf("the format %q does not print the rule", format)
	}
}
