package livepage_test

import (
	"bytes"
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/ratekit/ratekit/core"
	"github.com/ratekit/ratekit/internal/redistest"
	"github.com/ratekit/ratekit/internal/testkit"
	"github.com/ratekit/ratekit/livepage"
)

// statusShape is status.json as docs/live-page.md gives it, and as the
// example-app contract names its parts (rules[].name, rules[].offenders[]
// .identity and .denied, and the fleet's under rules[].fleet). Decoded with
// DisallowUnknownFields, a field the documents do not name fails the test.
type statusShape struct {
	Generated      time.Time    `json:"generated"`
	Process        string       `json:"process"`
	ShowIdentities bool         `json:"show_identities"`
	Peekable       bool         `json:"peekable"`
	Writable       bool         `json:"writable"`
	Limiters       []limiterShp `json:"limiters"`
	Rules          []ruleShape  `json:"rules"`
	Tables         []tableShape `json:"tables"`
}

type limiterShp struct {
	Name            string             `json:"name"`
	FailurePolicy   string             `json:"failure_policy"`
	Breaker         string             `json:"breaker"`
	BreakerOpenings uint64             `json:"breaker_openings"`
	StoreCalls      uint64             `json:"store_calls"`
	StoreErrors     uint64             `json:"store_errors"`
	Latency         map[string]float64 `json:"latency_ms"`
	Degraded        uint64             `json:"degraded"`
	Fleet           []string           `json:"fleet"`
	FleetError      string             `json:"fleet_error"`
}

type ruleShape struct {
	Limiter      string          `json:"limiter"`
	Name         string          `json:"name"`
	Limit        string          `json:"limit"`
	Algorithm    string          `json:"algorithm"`
	Capacity     int             `json:"capacity"`
	PeriodMS     int64           `json:"period_ms"`
	Shadow       bool            `json:"shadow"`
	Allowed      uint64          `json:"allowed"`
	Denied       uint64          `json:"denied"`
	ShadowDenied uint64          `json:"shadow_denied"`
	Degraded     uint64          `json:"degraded"`
	Series       seriesShape     `json:"series"`
	Offenders    []offenderShape `json:"offenders"`
	Near         []offenderShape `json:"near"`
	Fleet        *struct {
		Offenders []offenderShape `json:"offenders"`
		Bound     uint64          `json:"bound"`
	} `json:"fleet"`
}

type seriesShape struct {
	End          int64    `json:"end"`
	Allowed      []uint32 `json:"allowed"`
	Denied       []uint32 `json:"denied"`
	ShadowDenied []uint32 `json:"shadow_denied"`
}

type offenderShape struct {
	Identity string `json:"identity"`
	Denied   uint64 `json:"denied"`
	Error    uint64 `json:"error"`
}

type tableShape struct {
	Title   string     `json:"title"`
	Columns []string   `json:"columns"`
	Rows    [][]string `json:"rows"`
}

// TestStatusShape serves the page of a Limiter whose Recorder publishes to
// a fleet on a real redis-server, denies one identity, and decodes
// status.json strictly against its documented shape, once the fleet's
// view holds the identity; the contract's parts must be present, not
// merely decodable.
func TestStatusShape(t *testing.T) {
	fleet, err := livepage.NewRedisFleet(redistest.StartServer(t).Client(t), "ratekit:")
	if err != nil {
		t.Fatal(err)
	}
	rec, err := livepage.NewRecorder(livepage.RecorderOptions{Fleet: fleet, PublishEvery: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rec.Close() })
	l, err := core.NewLimiter(testkit.MustMemory(), core.WithObserver(rec))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	rules := []core.Rule{{Name: "strict", Limit: core.PerMinute(1), Key: func(r core.Request) (string, error) { return r.RemoteAddr(), nil }}}
	h, err := livepage.New(livepage.Options{ShowIdentities: true, Tables: func() []livepage.Table {
		return []livepage.Table{{Title: "t", Columns: []string{"a"}, Rows: [][]string{{"1"}}}}
	}}, livepage.Source{Name: "only", Limiter: l, Recorder: rec, Rules: func() []core.Rule { return rules }})
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if _, err := l.Check(context.Background(), idRequest("ip:127.0.0.1"), rules); err != nil {
			t.Fatal(err)
		}
	}
	var st statusShape
	var body []byte
	deadline := time.Now().Add(30 * time.Second)
	for {
		body = do(t, h, "GET", "/ratekit/status.json").Body.Bytes()
		dec := json.NewDecoder(bytes.NewReader(body))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&st); err != nil {
			t.Fatalf("status.json against its documented shape: %v\n%s", err, body)
		}
		if len(st.Rules) == 1 && st.Rules[0].Fleet != nil && len(st.Rules[0].Fleet.Offenders) == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the fleet's view never held the identity:\n%s", body)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if !st.Peekable || st.Writable {
		t.Errorf("peekable %v, writable %v; want a page given rules and no token to peek, not write", st.Peekable, st.Writable)
	}
	r := st.Rules[0]
	if want := (offenderShape{Identity: "ip:127.0.0.1", Denied: 2}); r.Name != "strict" || len(r.Offenders) != 1 || r.Offenders[0] != want || r.Fleet.Offenders[0] != want {
		t.Errorf("rule %q, offenders %+v, fleet's %+v; want strict, %+v in both", r.Name, r.Offenders, r.Fleet.Offenders, want)
	}
	var raw map[string]any
	if err := json.Unmarshal(body, &raw); err != nil {
		t.Fatal(err)
	}
	rule := raw["rules"].([]any)[0].(map[string]any)
	requireKeys(t, "rules[0]", rule, "name", "offenders", "fleet")
	requireKeys(t, "rules[0].offenders[0]", rule["offenders"].([]any)[0], "identity", "denied")
	requireKeys(t, "rules[0].fleet", rule["fleet"], "offenders", "bound")
	requireKeys(t, "rules[0].fleet.offenders[0]", rule["fleet"].(map[string]any)["offenders"].([]any)[0], "identity", "denied")
}

func requireKeys(t *testing.T, path string, v any, keys ...string) {
	t.Helper()
	m, ok := v.(map[string]any)
	if !ok {
		t.Fatalf("%s: a %T, want an object", path, v)
	}
	for _, k := range keys {
		if _, ok := m[k]; !ok {
			t.Errorf("%s lacks %q", path, k)
		}
	}
}
