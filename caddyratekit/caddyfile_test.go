package caddyratekit_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2/caddyconfig"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	_ "github.com/caddyserver/caddy/v2/modules/caddyhttp/caddyauth"
	_ "github.com/caddyserver/caddy/v2/modules/caddyhttp/headers"
	_ "github.com/caddyserver/caddy/v2/modules/caddyhttp/reverseproxy"

	"github.com/ratekit/ratekit/caddyratekit"
)

// compact returns js without insignificant white space.
func compact(t *testing.T, js string) string {
	t.Helper()
	var v any
	if err := json.Unmarshal([]byte(js), &v); err != nil {
		t.Fatalf("%s: %v", js, err)
	}
	b, _ := json.Marshal(v)
	return string(b)
}

func TestUnmarshalCaddyfile(t *testing.T) {
	for _, c := range []struct{ name, src, want string }{
		{"one-line rule", `ratekit {
			redis redis://127.0.0.1:6379
			rule default 100 1m
		}`, `{"redis":{"url":"redis://127.0.0.1:6379"},"rules":[{"name":"default","limit":100,"period":60000000000}]}`},
		{"every option", `ratekit {
			redis_cluster redis://10.0.0.1:6379?addr=10.0.0.2:6379
			prefix rk:
			timeout 25ms
			fail closed
			fail_closed_status 429
			replicas 3
			breaker {
				failures 3
				backoff 50ms
				max_backoff 2s
			}
			lease 32 {
				hold 50ms
			}
			denied_cache 0
			batching off
			headers ietf
			ietf_draft 10
			no_identity 401
			rule api {
				limit 10
				period 1s
				burst 20
				algorithm sliding-log
				cost 2
				shadow
				key jwt {
					secret {env.JWT_SECRET}
					algorithms HS256 HS512
					issuer https://issuer.example
					audience api web
					claim uid
					leeway 5s
					expiration_optional
				}
				key apikey X-Key {
					query api_key
					auth_scheme ApiKey
					hash_secret {env.KEY_SECRET}
				}
				key header X-Tenant
				key placeholder {http.auth.user.id}
				key ip 56
				match {
					path /api/*
					method POST
				}
			}
		}`, `{"redis":{"cluster_url":"redis://10.0.0.1:6379?addr=10.0.0.2:6379"},"prefix":"rk:","timeout":25000000,
			"fail":"closed","fail_closed_status":429,"replicas":3,"breaker":{"failures":3,"backoff":50000000,"max_backoff":2000000000},
			"lease":{"size":32,"hold":50000000},"denied_cache":0,"batching":false,"headers":"ietf","ietf_draft":10,"no_identity":"401",
			"rules":[{"name":"api","limit":10,"period":1000000000,"burst":20,"algorithm":"sliding-log","cost":2,"shadow":true,
				"keys":[
					{"source":"jwt","secret":"{env.JWT_SECRET}","algorithms":["HS256","HS512"],"issuer":"https://issuer.example","audience":["api","web"],"claim":"uid","leeway":5000000000,"expiration_optional":true},
					{"source":"apikey","header":"X-Key","query":"api_key","auth_scheme":"ApiKey","hash_secret":"{env.KEY_SECRET}"},
					{"source":"header","header":"X-Tenant"},
					{"source":"placeholder","value":"{http.auth.user.id}"},
					{"source":"ip","ipv6_prefix":56}],
				"match":[{"method":["POST"],"path":["/api/*"]}]}]}`},
		{"breaker on one line, sentinel, days", `ratekit {
			redis_sentinel redis://127.0.0.1:26379?master_name=m
			breaker 4 10ms
			rule daily 1000 1d
		}`, `{"redis":{"sentinel_url":"redis://127.0.0.1:26379?master_name=m"},"breaker":{"failures":4,"backoff":10000000},
			"rules":[{"name":"daily","limit":1000,"period":86400000000000}]}`},
	} {
		t.Run(c.name, func(t *testing.T) {
			h := fromCaddyfile(t, c.src)
			got, err := json.Marshal(h)
			if err != nil {
				t.Fatal(err)
			}
			if got, want := compact(t, string(got)), compact(t, c.want); got != want {
				t.Errorf("JSON\n got %s\nwant %s", got, want)
			}
		})
	}
}

// Bad input is refused with an error that says what is wrong and where.
func TestUnmarshalCaddyfileErrors(t *testing.T) {
	for _, c := range []struct{ src, want string }{
		{"ratekit 10 {\n}", "takes no arguments besides a matcher"},
		{"ratekit {\n\tredis\n}", "redis needs a Redis URL, such as redis://127.0.0.1:6379 (is the environment variable in its place empty?), at Testfile:2"},
		{"ratekit {\n\tredis a b\n}", "redis takes one URL, got 2 arguments, at Testfile:2"},
		{"ratekit {\n\tlimit 10\n}", `unknown ratekit option "limit", at Testfile:2`},
		{"ratekit {\n\ttimeout soon\n}", `timeout: "soon" is not a duration`},
		{"ratekit {\n\tfail maybe\n}", `fail: "maybe" is not one of [local open closed], at Testfile:2`},
		{"ratekit {\n\treplicas two\n}", `replicas: "two" is not a whole number`},
		{"ratekit {\n\tbatching yes\n}", `batching: "yes" is not one of [on off]`},
		{"ratekit {\n\theaders all\n}", `headers: "all" is not one of [both legacy ietf none]`},
		{"ratekit {\n\tno_identity deny\n}", `no_identity: "deny" is not one of [next 401]`},
		{"ratekit {\n\tbreaker 1 2 3 4\n}", "breaker takes at most three arguments"},
		{"ratekit {\n\tbreaker x\n}", `breaker: bad argument "x"`},
		{"ratekit {\n\tbreaker {\n\t\tretries 3\n\t}\n}", `unknown breaker option "retries", at Testfile:3`},
		{"ratekit {\n\tlease 1 2\n}", "lease takes at most one argument"},
		{"ratekit {\n\tlease many\n}", `lease: size "many" is not a whole number`},
		{"ratekit {\n\tlease {\n\t\tttl 1s\n\t}\n}", `unknown lease option "ttl", at Testfile:3`},
		{"ratekit {\n\trule\n}", "rule takes a name, optionally followed by a limit and a period"},
		{"ratekit {\n\trule a 10\n}", "rule takes a name, optionally followed by a limit and a period (rule default 100 1m), got 2 arguments"},
		{"ratekit {\n\trule a ten 1m\n}", `rule a: limit "ten" is not a number of requests`},
		{"ratekit {\n\trule a 10 monthly\n}", `rule a: period "monthly"`},
		{"ratekit {\n\trule a {\n\t\tlimit 10\n\t}\n}", "rule a: a limit and a period are required"},
		{"ratekit {\n\trule a 10 1m {\n\t\tburst big\n\t}\n}", `burst: "big" is not a whole number, at Testfile:3`},
		{"ratekit {\n\trule a 10 1m {\n\t\talgorithm token-bucket\n\t}\n}", `algorithm: "token-bucket" is not one of [gcra fixed sliding-log sliding-counter]`},
		{"ratekit {\n\trule a 10 1m {\n\t\tquota 5\n\t}\n}", `rule a: unknown option "quota", at Testfile:3`},
		{"ratekit {\n\trule a 10 1m {\n\t\tshadow yes\n\t}\n}", "wrong argument count"},
		{"ratekit {\n\trule a 10 1m {\n\t\tkey\n\t}\n}", "key needs a source"},
		{"ratekit {\n\trule a 10 1m {\n\t\tkey cookie session\n\t}\n}", `unknown key source "cookie" (want ip, header, jwt, apikey or placeholder)`},
		{"ratekit {\n\trule a 10 1m {\n\t\tkey header\n\t}\n}", "key header takes one argument, the header field"},
		{"ratekit {\n\trule a 10 1m {\n\t\tkey ip big\n\t}\n}", `key ip: the IPv6 prefix length "big" is not a number`},
		{"ratekit {\n\trule a 10 1m {\n\t\tkey ip {\n\t\t\tprefix 64\n\t\t}\n\t}\n}", "key ip takes no block"},
		{"ratekit {\n\trule a 10 1m {\n\t\tkey jwt\n\t}\n}", "key jwt needs a secret or a public_key_file"},
		{"ratekit {\n\trule a 10 1m {\n\t\tkey jwt HS256\n\t}\n}", "key jwt takes no arguments"},
		{"ratekit {\n\trule a 10 1m {\n\t\tkey jwt {\n\t\t\tquery token\n\t\t}\n\t}\n}", `key jwt: unknown option "query", at Testfile:4`},
		{"ratekit {\n\trule a 10 1m {\n\t\tkey apikey {\n\t\t\tsecret x\n\t\t}\n\t}\n}", `key apikey: unknown option "secret"`},
		{"ratekit {\n\trule a 10 1m {\n\t\tmatch {\n\t\t\tnosuchmatcher x\n\t\t}\n\t}\n}", "getting matcher module 'nosuchmatcher'"},
	} {
		h := new(caddyratekit.Handler)
		err := h.UnmarshalCaddyfile(caddyfile.NewTestDispenser(c.src))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q:\n got %v\nwant an error containing %q", c.src, err, c.want)
		}
	}
}

// adapt adapts a whole Caddyfile to JSON, as caddy adapt does.
func adapt(t *testing.T, src string) (string, error) {
	t.Helper()
	out, warnings, err := caddyconfig.GetAdapter("caddyfile").Adapt([]byte(src), map[string]any{"filename": "Caddyfile"})
	for _, w := range warnings {
		t.Logf("warning: %s", w)
	}
	return string(out), err
}

// The directive is ordered before basic_auth, and so before respond and
// reverse_proxy, wherever it is written; the global order option and
// route blocks place it elsewhere.
func TestDirectiveOrder(t *testing.T) {
	const site = `
:8080 {
	reverse_proxy 127.0.0.1:9000
	basic_auth {
		admin $2a$14$Zkx19XLiW6VYouLHR5NmfOFU0z2GTNmpkT/5qqR7hx4IjWJPDhjvG
	}
	ratekit {
		redis redis://127.0.0.1:6379
		rule default 10 1m
	}
}`
	order := func(js string) []string {
		var names []string
		for _, h := range []string{`"handler":"ratekit"`, `"handler":"authentication"`, `"handler":"reverse_proxy"`} {
			if i := strings.Index(js, h); i >= 0 {
				names = append(names, h[len(`"handler":"`):len(h)-1]+"@"+itoa(i))
			}
		}
		return names
	}
	js, err := adapt(t, site)
	if err != nil {
		t.Fatal(err)
	}
	if !(strings.Index(js, `"handler":"ratekit"`) < strings.Index(js, `"handler":"authentication"`) &&
		strings.Index(js, `"handler":"authentication"`) < strings.Index(js, `"handler":"reverse_proxy"`)) {
		t.Errorf("default order: handlers at %v, want ratekit, then basic_auth, then reverse_proxy", order(js))
	}
	js, err = adapt(t, "{\n\torder ratekit after basic_auth\n}\n"+site)
	if err != nil {
		t.Fatal(err)
	}
	if !(strings.Index(js, `"handler":"authentication"`) < strings.Index(js, `"handler":"ratekit"`)) {
		t.Errorf("order ratekit after basic_auth: handlers at %v, want basic_auth first", order(js))
	}
}

// The directive takes Caddy's matchers, named and inline, as any handler
// directive does.
func TestDirectiveMatcher(t *testing.T) {
	js, err := adapt(t, `:8080 {
	@limited not path /healthz
	ratekit @limited {
		redis redis://127.0.0.1:6379
		rule default 10 1m
	}
	respond "ok"
}`)
	if err != nil {
		t.Fatal(err)
	}
	want := compact(t, `{"handle":[{"handler":"ratekit","redis":{"url":"redis://127.0.0.1:6379"},"rules":[{"limit":10,"name":"default","period":60000000000}]}],"match":[{"not":[{"path":["/healthz"]}]}]}`)
	if js = compact(t, js); !strings.Contains(js, want) {
		t.Errorf("adapted config\n%s\nlacks the matched route\n%s", js, want)
	}
}
