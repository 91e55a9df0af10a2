package server

import (
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/ratekit/ratekit/internal/redistest"
	"github.com/ratekit/ratekit/livepage"
)

// TestLivePageOnDebugPort runs a server on a real redis-server with a rule
// of envoy's counting and one of ratekit's GCRA, exceeds each for one
// descriptor over /json, and reads the debug port's live page: the
// domains loaded with the file and line of each, and under each
// configured rule the descriptor among the offenders, this process's and
// the fleet's (published to Redis), with its denials counted exactly.
func TestLivePageOnDebugPort(t *testing.T) {
	srv := redistest.StartServer(t)
	set := testSettings(t, "REDIS_URL", srv.Addr(), "RATEKIT_LIVE_PAGE_IDENTITIES", "true")
	dir := filepath.Join(set.RuntimeRoot, "rl", "config")
	gcra := "# ratekit's algorithm\ndomain: e\ndescriptors:\n  - key: user\n    rate_limit: {unit: minute, requests_per_unit: 1, algorithm: gcra}\n"
	if err := os.WriteFile(filepath.Join(dir, "b.yaml"), []byte(gcra), 0o644); err != nil {
		t.Fatal(err)
	}
	s := serve(t, set)
	for range 3 {
		postJSON(t, s.Addrs()[0], `{"domain":"d","descriptors":[{"entries":[{"key":"k","value":"alice"}]}]}`)
		postJSON(t, s.Addrs()[0], `{"domain":"e","descriptors":[{"entries":[{"key":"user","value":"bob"}]}]}`)
	}
	if c, body := get(t, s.Addrs()[2], "/ratekit/"); c != 200 || !strings.Contains(body, "app.js") {
		t.Fatalf("/ratekit/ on the debug port: %d %.80q", c, body)
	}
	want := map[string]string{"d.k": "d|k=alice", "e.user": "e|user=bob"}
	var st livepage.Status
	waitFor(t, "the offenders of both rules in this process's and the fleet's view", func() bool {
		c, body := get(t, s.Addrs()[2], "/ratekit/status.json")
		if c != 200 {
			t.Fatalf("status.json: %d %s", c, body)
		}
		if err := json.Unmarshal([]byte(body), &st); err != nil {
			t.Fatalf("status.json: %v\n%s", err, body)
		}
		for rule, id := range want {
			i := slices.IndexFunc(st.Rules, func(r livepage.RuleStatus) bool { return r.Name == rule })
			if i < 0 || !deniedTwice(st.Rules[i].Offenders, id) || st.Rules[i].Fleet == nil || !deniedTwice(st.Rules[i].Fleet.Offenders, id) {
				return false
			}
		}
		return true
	})
	if st.Peekable || st.Writable {
		t.Errorf("peekable %v, writable %v; want neither: the server's peeks and resets are /admin/'s", st.Peekable, st.Writable)
	}
	for _, r := range st.Rules {
		if want := map[string]string{"d.k": "compatible", "e.user": "ratekit"}[r.Name]; r.Limiter != want || r.Denied != 2 || r.Allowed != 1 {
			t.Errorf("rule %s: limiter %q, %d allowed, %d denied; want %s, 1 and 2", r.Name, r.Limiter, r.Allowed, r.Denied, want)
		}
	}
	if len(st.Tables) != 1 || !slices.Equal(st.Tables[0].Columns, []string{"domain", "rules", "source"}) ||
		!slices.EqualFunc(st.Tables[0].Rows, [][]string{
			{"d", "1", filepath.Join(dir, "a.yaml") + ":1"},
			{"e", "1", filepath.Join(dir, "b.yaml") + ":2"},
		}, slices.Equal) {
		t.Errorf("the domains' table: %q", st.Tables)
	}
}

func deniedTwice(offs []livepage.Offender, id string) bool {
	return slices.ContainsFunc(offs, func(o livepage.Offender) bool { return o.Identity == id && o.Denied == 2 })
}

func postJSON(t *testing.T, addr, body string) {
	t.Helper()
	resp, err := http.Post("http://"+addr+"/json", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 && resp.StatusCode != 429 {
		t.Fatalf("/json %s: %d", body, resp.StatusCode)
	}
}
