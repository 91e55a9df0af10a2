package ruleconf_test

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/ratekit/ratekit/core"
	"github.com/ratekit/ratekit/memorystore"
	"github.com/ratekit/ratekit/ruleconf"
)

func writeFile(t *testing.T, path, doc string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
}

func TestLoad(t *testing.T) {
	path := filepath.Join(t.TempDir(), "rules.yaml")
	writeFile(t, path, contract)
	rules, err := ruleconf.Load(path, registry())
	if err != nil {
		t.Fatal(err)
	}
	if got, want := names(rules), []string{"default", "strict"}; !slices.Equal(got, want) {
		t.Fatalf("rules = %q, want %q", got, want)
	}

	writeFile(t, path, "rules:\n  strict: {limit: 2, period: 60}\n")
	_, err = ruleconf.Load(path, registry())
	if want := path + `:2: rule "strict": period: want a Go duration such as 1m or 30s (a number needs a unit), got integer 60`; err == nil || err.Error() != want {
		t.Fatalf("error = %v\nwant    %s", err, want)
	}
	if _, err := ruleconf.Load(filepath.Join(t.TempDir(), "missing.yaml"), registry()); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("missing file: error = %v, want fs.ErrNotExist", err)
	}
}

func TestRegistryErrors(t *testing.T) {
	tests := []struct {
		name string
		reg  ruleconf.Registry
		want string
	}{
		{"no keys", ruleconf.Registry{}, "no key functions"},
		{"nil key", ruleconf.Registry{Keys: map[string]core.KeyFunc{"ip": nil}}, `key function "ip" is nil`},
		{"unknown default", ruleconf.Registry{Keys: map[string]core.KeyFunc{"ip": addrKey}, DefaultKey: "user"}, `default key "user"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ruleconf.Parse([]byte(contract), tt.reg)
			var e *ruleconf.Error
			if err == nil || errors.As(err, &e) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("error = %v, want one of the registry that says %q", err, tt.want)
			}
		})
	}
}

func TestSelect(t *testing.T) {
	rules := mustParse(t, contract, registry())
	got, err := ruleconf.Select(rules, "strict", "default")
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"strict", "default"}; !slices.Equal(names(got), want) {
		t.Fatalf("Select = %q, want %q", names(got), want)
	}
	if _, err := ruleconf.Select(rules, "default", "login"); !errors.Is(err, ruleconf.ErrNoRule) || !strings.Contains(err.Error(), `"login"`) {
		t.Fatalf("missing rule: error = %v, want ErrNoRule naming login", err)
	}
	if _, err := ruleconf.Select(rules); !errors.Is(err, ruleconf.ErrNoRule) {
		t.Fatalf("no names: error = %v, want ErrNoRule", err)
	}
}

// TestReload checks that Reload replaces a RuleSet's rules with a good
// file's, and keeps them, saying why, for a bad file or a missing rule.
func TestReload(t *testing.T) {
	path := filepath.Join(t.TempDir(), "rules.yaml")
	writeFile(t, path, contract)
	set, err := core.NewRuleSet(mustParse(t, "rules: {old: {limit: 1}}", registry()))
	if err != nil {
		t.Fatal(err)
	}
	current := func() []string { return names(set.Rules()) }

	if err := ruleconf.Reload(path, registry(), set); err != nil {
		t.Fatal(err)
	}
	if want := []string{"default", "strict"}; !slices.Equal(current(), want) {
		t.Fatalf("after a reload: rules = %q, want %q", current(), want)
	}
	if err := ruleconf.Reload(path, registry(), set, "strict"); err != nil {
		t.Fatal(err)
	}
	if want := []string{"strict"}; !slices.Equal(current(), want) {
		t.Fatalf("after a reload of strict: rules = %q, want %q", current(), want)
	}

	for _, tt := range []struct {
		name, doc string
		names     []string
		is        error
	}{
		{"bad file", "rules:\n  default: {limit: 0}\n", nil, core.ErrInvalidLimit},
		{"not yaml", "rules: {", nil, nil},
		{"missing rule", contract, []string{"default", "login"}, ruleconf.ErrNoRule},
	} {
		writeFile(t, path, tt.doc)
		err := ruleconf.Reload(path, registry(), set, tt.names...)
		if err == nil || !strings.Contains(err.Error(), path) || tt.is != nil && !errors.Is(err, tt.is) {
			t.Fatalf("%s: error = %v, want one naming the file and wrapping %v", tt.name, err, tt.is)
		}
		if want := []string{"strict"}; !slices.Equal(current(), want) {
			t.Fatalf("%s: rules = %q, want the old %q", tt.name, current(), want)
		}
	}
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	if err := ruleconf.Reload(path, registry(), set); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("removed file: error = %v, want fs.ErrNotExist", err)
	}
}

// TestLimiter checks parsed rules under a Limiter: a pro caller gets the
// pro limit, no plan or an unknown plan the rule's, and a rule's cost and
// shadow mode apply.
func TestLimiter(t *testing.T) {
	store, err := memorystore.New()
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	lim, err := core.NewLimiter(store)
	if err != nil {
		t.Fatal(err)
	}
	defer lim.Close()
	rules := mustParse(t, `
rules:
  default: {limit: 2, period: 1m, plans: {pro: 5}}
  bulk: {limit: 6, period: 1h, algorithm: fixed, cost: 3, key: user, shadow: true}
`, registry())
	for i, tt := range []struct {
		plan    string
		allowed int
	}{{"pro", 5}, {"", 2}, {"enterprise", 2}} {
		req := request("192.0.2."+string(rune('1'+i))+":1", tt.plan, "u"+string(rune('1'+i)))
		for n := 1; n <= tt.allowed+1; n++ {
			d, err := lim.Check(context.Background(), req, rules)
			if err != nil {
				t.Fatal(err)
			}
			if got, want := d.Allowed, n <= tt.allowed; got != want {
				t.Fatalf("plan %q, request %d: allowed = %v, want %v", tt.plan, n, got, want)
			}
			if !d.Allowed {
				continue // a denial stops the check before bulk
			}
			// bulk spends 3 of 6 a request, and being in shadow mode never denies
			bulk := d.Results[1]
			if got, want := bulk.Allowed, n <= 2; bulk.Rule != "bulk" || !bulk.Shadow || got != want {
				t.Fatalf("plan %q, request %d: bulk result %+v, want allowed %v in shadow mode", tt.plan, n, bulk, want)
			}
		}
	}
}
