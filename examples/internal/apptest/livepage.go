package apptest

import (
	"encoding/json"
	"slices"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"

	"github.com/ratekit/ratekit/examples/internal/app"
	"github.com/ratekit/ratekit/livepage"
)

// TestLivePage starts two processes of the app on one Redis with
// -show-identities and ADMIN_TOKEN, exceeds the strict rule from both for
// one client, and checks the live page: never limited, its status.json
// names the client among the strict rule's offenders, this process's and
// the fleet's, a reset through it needs the token and frees the client in
// the other process too.
func TestLivePage(t *testing.T) {
	skipUnsupported(t)
	mr := miniredis.RunT(t)
	args := []string{"-redis", mr.Addr(), "-show-identities", "-period", "1h"}
	a := Start(t, args, "ADMIN_TOKEN=tok")
	b := Start(t, args, "ADMIN_TOKEN=tok")
	for _, p := range []*Proc{a, b, a, b} {
		Get(t, p.URL, app.StrictPath)
	}
	r := Get(t, a.URL, app.PagePath)
	if r.Status != 200 || r.Header.Get("X-Ratelimit-Limit") != "" {
		t.Fatalf("GET %s: %d, limit %q; want 200, not limited", app.PagePath, r.Status, r.Header.Get("X-Ratelimit-Limit"))
	}
	var st livepage.Status
	deadline := time.Now().Add(30 * time.Second)
	for {
		r := Get(t, a.URL, app.PagePath+"status.json")
		if err := json.Unmarshal([]byte(r.Body), &st); err != nil {
			t.Fatalf("status.json: %v\n%s", err, r.Body)
		}
		i := slices.IndexFunc(st.Rules, func(r livepage.RuleStatus) bool { return r.Name == app.StrictRule })
		if i >= 0 && has(st.Rules[i].Offenders, "ip:127.0.0.1", 1) && st.Rules[i].Fleet != nil && has(st.Rules[i].Fleet.Offenders, "ip:127.0.0.1", 2) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("status.json never showed ip:127.0.0.1 denied once here and twice in the fleet under %s:\n%s", app.StrictRule, r.Body)
		}
		time.Sleep(200 * time.Millisecond)
	}
	if r := Do(t, "POST", a.URL, app.PagePath+"reset?rule=strict&identity=ip:127.0.0.1"); r.Status != 401 {
		t.Errorf("a reset without the token: %d, want 401", r.Status)
	}
	if r := Do(t, "POST", a.URL, app.PagePath+"reset?rule=strict&identity=ip:127.0.0.1", "Authorization", "Bearer tok"); r.Status != 204 {
		t.Errorf("a reset with the token: %d %s, want 204", r.Status, r.Body)
	}
	awaitReset(t, b, app.StrictPath)
}

func has(offs []livepage.Offender, id string, denied uint64) bool {
	return slices.ContainsFunc(offs, func(o livepage.Offender) bool { return o.Identity == id && o.Denied >= denied })
}
