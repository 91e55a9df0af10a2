package caddyratekit_test

import (
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2"

	"github.com/ratekit/ratekit/caddyratekit"
)

// A bad JSON config is refused by Validate, and by Provision before it
// opens anything, with an error naming the field.
func TestValidate(t *testing.T) {
	const rule = `{"name":"r","limit":5,"period":60000000000}`
	const url = "redis://127.0.0.1:1"
	for _, c := range []struct{ js, want string }{
		{`{"rules":[` + rule + `]}`, "redis: a url, cluster_url or sentinel_url is required"},
		{`{"redis":{"url":"` + url + `","cluster_url":"` + url + `"},"rules":[` + rule + `]}`, "give only one of url, cluster_url and sentinel_url"},
		{handlerJSON(url, "", ""), "at least one rule is required"},
		{handlerJSON(url, rule+","+rule, ""), `two rules are named "r"`},
		{handlerJSON(url, `{"limit":5,"period":60000000000}`, ""), "a rule needs a name"},
		{handlerJSON(url, `{"name":"r","period":60000000000}`, ""), `rule "r": limit must be a positive number of requests, not 0`},
		{handlerJSON(url, `{"name":"r","limit":5}`, ""), `rule "r": period must be positive`},
		{handlerJSON(url, `{"name":"r","limit":5,"period":1000}`, ""), `rule "r": ratekit: invalid limit`}, // 1µs: below a millisecond
		{handlerJSON(url, `{"name":"r","limit":5,"period":60000000000,"burst":-1}`, ""), "burst must not be negative"},
		{handlerJSON(url, `{"name":"r","limit":5,"period":60000000000,"algorithm":"leaky"}`, ""), `unknown algorithm "leaky"`},
		{handlerJSON(url, `{"name":"r{x}","limit":5,"period":60000000000}`, ""), "r{x}"},
		{handlerJSON(url, `{"name":"r","limit":5,"period":60000000000,"keys":[{}]}`, ""), "a key needs a source"},
		{handlerJSON(url, `{"name":"r","limit":5,"period":60000000000,"keys":[{"source":"cookie"}]}`, ""), `unknown key source "cookie"`},
		{handlerJSON(url, `{"name":"r","limit":5,"period":60000000000,"keys":[{"source":"header"}]}`, ""), "key header: the header field to read is required"},
		{handlerJSON(url, `{"name":"r","limit":5,"period":60000000000,"keys":[{"source":"ip","header":"X-Real-IP"}]}`, ""), "key ip: field header does not apply to this source"},
		{handlerJSON(url, `{"name":"r","limit":5,"period":60000000000,"keys":[{"source":"ip","ipv6_prefix":129}]}`, ""), "ipv6_prefix must be from 1 to 128"},
		{handlerJSON(url, `{"name":"r","limit":5,"period":60000000000,"keys":[{"source":"jwt"}]}`, ""), "exactly one of secret and public_key_file"},
		{handlerJSON(url, `{"name":"r","limit":5,"period":60000000000,"keys":[{"source":"placeholder"}]}`, ""), "a value with placeholders is required"},
		{handlerJSON(url, rule, `"headers":"all"`), `unknown headers style "all"`},
		{handlerJSON(url, rule, `"no_identity":"deny"`), `unknown no_identity "deny"`},
		{handlerJSON(url, rule, `"fail":"maybe"`), `unknown fail policy "maybe"`},
		{handlerJSON(url, rule, `"ietf_draft":12`), "unsupported IETF draft revision 12"},
		{handlerJSON(url, rule, `"fail_closed_status":302`), "fail_closed_status 302 is not a 4xx or 5xx status"},
		{handlerJSON(url, rule, `"timeout":-1`), "timeout must be positive"},
		{handlerJSON(url, rule, `"replicas":-2`), "replicas must be positive"},
		{handlerJSON(url, rule, `"denied_cache":-1`), "denied_cache must not be negative"},
		{handlerJSON(url, rule, `"lease":{"size":-1}`), "lease: size and hold must not be negative"},
		{handlerJSON(url, rule, `"breaker":{"failures":-1}`), "breaker: failures, backoff and max_backoff must not be negative"},
	} {
		h := fromJSON(t, c.js)
		if err := h.Validate(); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s:\nValidate: %v\nwant an error containing %q", c.js, err, c.want)
		}
		if err := tryProvision(t, fromJSON(t, c.js)); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s:\nProvision: %v\nwant an error containing %q", c.js, err, c.want)
		}
	}
}

// Caddy decodes module JSON strictly: a misspelt field is an error, not
// an option silently ignored.
func TestUnknownField(t *testing.T) {
	h := new(caddyratekit.Handler)
	err := caddy.StrictUnmarshalJSON([]byte(`{"redis":{"url":"redis://x"},"rules":[{"name":"r","limit":1,"period":1,"algoritm":"fixed"}]}`), h)
	if err == nil || !strings.Contains(err.Error(), "algoritm") {
		t.Errorf("a misspelt field: %v, want an error naming it", err)
	}
}

// Redis URLs take Caddy's placeholders, such as {env.REDIS_URL}; one that
// names an unset variable is refused at provisioning, as is a URL that
// go-redis cannot parse.
func TestRedisPlaceholders(t *testing.T) {
	_, url := redisURL(t)
	t.Setenv("RATEKIT_TEST_REDIS_URL", url)
	h := fromJSON(t, handlerJSON("{env.RATEKIT_TEST_REDIS_URL}", `{"name":"r","limit":1,"period":60000000000}`, ""))
	provision(t, h)
	if a := get(t, h, "/", "198.51.100.1"); a.status != 200 || a.placeholder(caddyratekit.PlaceholderDegraded) != "false" {
		t.Errorf("through {env.RATEKIT_TEST_REDIS_URL}: %d, degraded %s; want 200 from Redis", a.status, a.placeholder(caddyratekit.PlaceholderDegraded))
	}
	for _, c := range []struct{ url, want string }{
		{"{env.RATEKIT_TEST_UNSET}", `redis url "{env.RATEKIT_TEST_UNSET}"`},
		{"http://127.0.0.1:6379", "redis url: redis: invalid URL scheme: http"},
		{"redis://127.0.0.1:6379?pool_sise=3", "pool_sise"},
	} {
		err := tryProvision(t, fromJSON(t, handlerJSON(c.url, `{"name":"r","limit":1,"period":60000000000}`, "")))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("url %s: %v, want an error containing %q", c.url, err, c.want)
		}
	}
}
