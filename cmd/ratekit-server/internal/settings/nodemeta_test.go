package settings_test

import (
	"maps"
	"strings"
	"testing"

	"github.com/ratekit/ratekit/cmd/ratekit-server/internal/settings"
)

// TestNodeMetadata: CONFIG_GRPC_XDS_NODE_METADATA is read as envoy's
// service reads it (split at commas, each entry at its first "=", nothing
// trimmed, empty entries skipped), except that an entry without "=",
// which envoy's service drops silently, is refused with the variable
// named.
func TestNodeMetadata(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want map[string]string
	}{
		{"", map[string]string{}},
		{"a=b", map[string]string{"a": "b"}},
		{"a=b,c=", map[string]string{"a": "b", "c": ""}},
		{"a=b=c, d=e,", map[string]string{"a": "b=c", " d": "e"}},
		{"=v,,a=1,a=2", map[string]string{"": "v", "a": "2"}},
	} {
		s, _, err := settings.Load(env("RUNTIME_SUBDIRECTORY", "x", "CONFIG_TYPE", "GRPC_XDS_SOTW", "CONFIG_GRPC_XDS_NODE_METADATA", tc.in))
		if err != nil {
			t.Errorf("%q: %v", tc.in, err)
			continue
		}
		if !maps.Equal(s.XDS.NodeMetadata, tc.want) {
			t.Errorf("%q: %q, want %q", tc.in, s.XDS.NodeMetadata, tc.want)
		}
	}
	for _, in := range []string{"key1:val1", "a=b,c", "a=b, c ,d=e"} {
		_, _, err := settings.Load(env("RUNTIME_SUBDIRECTORY", "x", "CONFIG_TYPE", "GRPC_XDS_SOTW", "CONFIG_GRPC_XDS_NODE_METADATA", in))
		if err == nil || !strings.HasPrefix(err.Error(), "CONFIG_GRPC_XDS_NODE_METADATA=") || !strings.Contains(err.Error(), "has no '='") {
			t.Errorf("%q: %v, want a refusal naming CONFIG_GRPC_XDS_NODE_METADATA", in, err)
		}
	}
}
