package ruleconf_test

import (
	"context"
	"net/http/httptest"
	"testing"

	"github.com/ratekit/ratekit/core"
	"github.com/ratekit/ratekit/core/adapter"
	"github.com/ratekit/ratekit/ruleconf"
)

// request returns a request from addr with the given plan in X-Plan and
// user in X-User ("" for none).
func request(addr, plan, user string) core.Request {
	r := httptest.NewRequestWithContext(context.Background(), "GET", "/", nil)
	r.RemoteAddr = addr
	if plan != "" {
		r.Header.Set("X-Plan", plan)
	}
	if user != "" {
		r.Header.Set("X-User", user)
	}
	return adapter.HTTPRequest(r)
}

func addrKey(r core.Request) (string, error) { return "ip:" + r.RemoteAddr(), nil }

func userKey(r core.Request) (string, error) {
	if u := r.Header("X-User"); u != "" {
		return "user:" + u, nil
	}
	return "", core.ErrNoIdentity
}

// registry returns a Registry with keys ip (the default) and user, and
// the plan of the X-Plan header.
func registry() ruleconf.Registry {
	return ruleconf.Registry{
		Keys:       map[string]core.KeyFunc{"ip": addrKey, "user": userKey},
		DefaultKey: "ip",
		Plan:       func(r core.Request) string { return r.Header("X-Plan") },
	}
}

func mustParse(t testing.TB, doc string, reg ruleconf.Registry) []core.Rule {
	t.Helper()
	rules, err := ruleconf.Parse([]byte(doc), reg)
	if err != nil {
		t.Fatalf("Parse: %v\n%s", err, doc)
	}
	return rules
}

// names returns the rules' names, in order.
func names(rules []core.Rule) []string {
	out := make([]string, len(rules))
	for i, r := range rules {
		out[i] = r.Name
	}
	return out
}

// limitOf returns the limit of rule r for a request of plan.
func limitOf(r core.Rule, plan string) core.Limit {
	if r.LimitOf != nil {
		if lim, ok := r.LimitOf(request("192.0.2.1:1", plan, "")); ok {
			return lim
		}
	}
	return r.Limit
}
