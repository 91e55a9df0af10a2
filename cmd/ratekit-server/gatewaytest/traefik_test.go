//go:build linux

package gatewaytest

import (
	"bytes"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"
)

// traefikConfigs returns the guide's static and dynamic configurations
// with its example addresses made the test's: the entry point on addr,
// forward auth to ratekit, the app where it runs.
func traefikConfigs(t *testing.T, addr, ratekit, app string) (static, dynamic string) {
	t.Helper()
	doc, err := Guide("gateways-traefik.md")
	if err != nil {
		t.Fatal(err)
	}
	static, err1 := Block(doc, "traefik-static")
	dynamic, err2 := Block(doc, "traefik")
	if err1 != nil || err2 != nil {
		t.Fatal(err1, err2)
	}
	// on loopback alone: a wildcard bind of the port would clash with the
	// test clients' sockets on other loopback addresses
	if static, err = Substitute(static, `address: ":8000"`, `address: "`+addr+`"`); err != nil {
		t.Fatalf("the guide's static configuration: %v", err)
	}
	if dynamic, err = Substitute(dynamic, "http://ratekit:8080/", "http://"+ratekit+"/", "http://app:9000", "http://"+app); err != nil {
		t.Fatalf("the guide's dynamic configuration: %v", err)
	}
	return static, dynamic
}

// TestTraefik runs the guide's configurations: two Traefik processes
// built from Traefik's module, whose forwardAuth asks one address, behind
// which a balancer passes each connection to one of two ratekit-server
// replicas in turn, on one redis-server. Traefik gives an allowed
// request's fields to the app (authResponseHeaders), not to the client.
func TestTraefik(t *testing.T) {
	bin := traefikBin(t)
	e := startEdge(t, "gateways-traefik.md")
	bal, err := StartBalancer(e.replicas[0].HTTP, e.replicas[1].HTTP)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(bal.Close)
	dir := t.TempDir()
	gws := startGateways(t, []string{"traefik-1", "traefik-2"}, func(name string) (*Proc, error) {
		addr, err := FreePort()
		if err != nil {
			return nil, err
		}
		static, dynamic := traefikConfigs(t, addr, bal.Addr(), e.app.Addr())
		return StartTraefik(bin, dir, name, addr, static, dynamic, "/healthz")
	})
	testGateway(t, e, gws, traits{noReplica: 500, fieldsToApp: true})
	if c := bal.Conns(); c[0] == 0 || c[1] == 0 {
		t.Errorf("connections to the replicas %v: one replica was never asked", c)
	}
}

// The guide's configurations are also checked for their shape, without a
// Traefik binary: they must decode, with unknown keys refused,
// into these structs of the fields Traefik documents for the file
// provider's routers, forwardAuth middlewares and load-balanced services,
// and for entry points and providers (doc.traefik.io, "Routers",
// "ForwardAuth", "Services", "EntryPoints", "File"; Traefik v3).
type traefikDynamic struct {
	HTTP struct {
		Routers     map[string]traefikRouter     `yaml:"routers"`
		Middlewares map[string]traefikMiddleware `yaml:"middlewares"`
		Services    map[string]traefikService    `yaml:"services"`
	} `yaml:"http"`
}

type traefikRouter struct {
	EntryPoints []string       `yaml:"entryPoints"`
	Rule        string         `yaml:"rule"`
	RuleSyntax  string         `yaml:"ruleSyntax"`
	Priority    int            `yaml:"priority"`
	Middlewares []string       `yaml:"middlewares"`
	Service     string         `yaml:"service"`
	TLS         map[string]any `yaml:"tls"`
}

// traefikMiddleware holds only forwardAuth: the guide uses no other kind.
type traefikMiddleware struct {
	ForwardAuth *traefikForwardAuth `yaml:"forwardAuth"`
}

type traefikForwardAuth struct {
	Address string `yaml:"address"`
	TLS     *struct {
		CA                 string `yaml:"ca"`
		Cert               string `yaml:"cert"`
		Key                string `yaml:"key"`
		InsecureSkipVerify bool   `yaml:"insecureSkipVerify"`
	} `yaml:"tls"`
	TrustForwardHeader       *bool    `yaml:"trustForwardHeader"`
	AuthResponseHeaders      []string `yaml:"authResponseHeaders"`
	AuthResponseHeadersRegex string   `yaml:"authResponseHeadersRegex"`
	AuthRequestHeaders       []string `yaml:"authRequestHeaders"`
	AddAuthCookiesToResponse []string `yaml:"addAuthCookiesToResponse"`
	HeaderField              string   `yaml:"headerField"`
	ForwardBody              bool     `yaml:"forwardBody"`
	MaxBodySize              *int64   `yaml:"maxBodySize"`
	MaxResponseBodySize      *int64   `yaml:"maxResponseBodySize"`
	PreserveLocationHeader   bool     `yaml:"preserveLocationHeader"`
	PreserveRequestMethod    bool     `yaml:"preserveRequestMethod"`
}

type traefikService struct {
	LoadBalancer *struct {
		Servers []struct {
			URL    string `yaml:"url"`
			Weight *int   `yaml:"weight"`
		} `yaml:"servers"`
		PassHostHeader *bool          `yaml:"passHostHeader"`
		HealthCheck    map[string]any `yaml:"healthCheck"`
		Sticky         map[string]any `yaml:"sticky"`
	} `yaml:"loadBalancer"`
}

// traefikStatic holds the static configuration's fields the guide may
// use: entry points (address, forwardedHeaders) and the file provider.
type traefikStatic struct {
	EntryPoints map[string]struct {
		Address          string `yaml:"address"`
		ForwardedHeaders *struct {
			TrustedIPs []string `yaml:"trustedIPs"`
			Insecure   bool     `yaml:"insecure"`
		} `yaml:"forwardedHeaders"`
	} `yaml:"entryPoints"`
	Providers struct {
		File *struct {
			Filename  string `yaml:"filename"`
			Directory string `yaml:"directory"`
			Watch     bool   `yaml:"watch"`
		} `yaml:"file"`
	} `yaml:"providers"`
}

// strict decodes the guide's block name into v, unknown keys refused.
func strict(t *testing.T, name string, v any) {
	t.Helper()
	doc, err := Guide("gateways-traefik.md")
	if err != nil {
		t.Fatal(err)
	}
	src, err := Block(doc, name)
	if err != nil {
		t.Fatal(err)
	}
	dec := yaml.NewDecoder(bytes.NewReader([]byte(src)))
	dec.KnownFields(true)
	if err := dec.Decode(v); err != nil {
		t.Fatalf("the guide's Traefik configuration %s has a field Traefik does not document: %v", name, err)
	}
}

// TestTraefikStaticShape checks the guide's static configuration: the
// entry point the routers name, and the file provider.
func TestTraefikStaticShape(t *testing.T) {
	var st traefikStatic
	strict(t, "traefik-static", &st)
	if ep, ok := st.EntryPoints["web"]; !ok || ep.Address == "" {
		t.Fatalf("no entry point web with an address: %+v", st.EntryPoints)
	}
	if f := st.Providers.File; f == nil || f.Filename == "" {
		t.Fatal("no file provider with a filename")
	}
}

// traefikConfig decodes the guide's dynamic configuration strictly.
func traefikConfig(t *testing.T) traefikDynamic {
	t.Helper()
	var c traefikDynamic
	strict(t, "traefik", &c)
	return c
}

var traefikMatcher = regexp.MustCompile("^(Path|PathPrefix)\\(`([^`]+)`\\)$")

// route returns the router Traefik picks for path: of those whose rule
// matches, the one of highest priority, a rule's length unless set.
func (c traefikDynamic) route(t *testing.T, path string) string {
	t.Helper()
	best, bestPrio := "", -1
	for name, r := range c.HTTP.Routers {
		m := traefikMatcher.FindStringSubmatch(r.Rule)
		if m == nil {
			t.Fatalf("router %s: rule %q is not Path or PathPrefix, which this check reads", name, r.Rule)
		}
		if m[1] == "Path" && path != m[2] || m[1] == "PathPrefix" && !strings.HasPrefix(path, m[2]) {
			continue
		}
		prio := r.Priority
		if prio == 0 {
			prio = len(r.Rule)
		}
		if prio > bestPrio {
			best, bestPrio = name, prio
		}
	}
	return best
}

// TestTraefikConfigShape checks the guide's dynamic configuration: it
// decodes into the documented fields; each path goes to the router meant
// for it, /healthz without ratekit; every forwardAuth asks /check with
// trustForwardHeader false; every router's entry points, middlewares and
// service exist.
func TestTraefikConfigShape(t *testing.T) {
	c := traefikConfig(t)
	for path, want := range map[string]string{"/": "app", "/orders/7": "app", "/login": "login", "/healthz": "healthz"} {
		if got := c.route(t, path); got != want {
			t.Errorf("%s goes to router %q, want %q", path, got, want)
		}
	}
	var st traefikStatic
	strict(t, "traefik-static", &st)
	for name, r := range c.HTTP.Routers {
		for _, ep := range r.EntryPoints {
			if _, ok := st.EntryPoints[ep]; !ok {
				t.Errorf("router %s: entry point %s is not in the static configuration", name, ep)
			}
		}
		if len(r.EntryPoints) == 0 {
			t.Errorf("router %s: no entry point", name)
		}
		if s, ok := c.HTTP.Services[r.Service]; !ok || s.LoadBalancer == nil || len(s.LoadBalancer.Servers) == 0 {
			t.Errorf("router %s: service %q is not a load balancer with servers", name, r.Service)
		}
		if (name == "healthz") != (len(r.Middlewares) == 0) {
			t.Errorf("router %s: middlewares %v; only /healthz goes without ratekit", name, r.Middlewares)
		}
		for _, m := range r.Middlewares {
			if _, ok := c.HTTP.Middlewares[m]; !ok {
				t.Errorf("router %s: no middleware %s", name, m)
			}
		}
	}
	for name, m := range c.HTTP.Middlewares {
		fa := m.ForwardAuth
		if fa == nil {
			t.Fatalf("middleware %s is not a forwardAuth", name)
		}
		u, err := url.Parse(fa.Address)
		if err != nil || u.Path != "/check" || u.Query().Get("domain") != "edge" {
			t.Errorf("middleware %s: address %q does not ask /check of domain edge", name, fa.Address)
		}
		// false, set: Traefik then drops the client's X-Forwarded-* and
		// writes X-Forwarded-For from the socket peer
		if fa.TrustForwardHeader == nil || *fa.TrustForwardHeader {
			t.Errorf("middleware %s: trustForwardHeader must be set to false", name)
		}
		// set, so that Traefik bounds what it reads of an answer (unset, it
		// reads any size and warns at start), and above ratekit-server's
		// longest answer to /check
		if fa.MaxResponseBodySize == nil || *fa.MaxResponseBodySize < 4096 {
			t.Errorf("middleware %s: maxResponseBodySize must be set, to at least 4096", name)
		}
	}
}

// traefikAsk sends the check Traefik's forwardAuth sends for a client
// request from peer, as its documentation describes it, to the replica at
// addr: a GET of the address, the client's headers, and X-Forwarded-Method,
// -Proto, -Host, -Uri and -For (the socket peer) set by Traefik.
func traefikAsk(t *testing.T, address, addr, peer string, clientHeader http.Header, trustForward bool) answer {
	t.Helper()
	u, err := url.Parse(address)
	if err != nil {
		t.Fatal(err)
	}
	u.Host = addr
	req, _ := http.NewRequest(http.MethodGet, u.String(), nil)
	req.Header = clientHeader.Clone()
	xff := peer
	if trustForward {
		if prior := req.Header.Values("X-Forwarded-For"); len(prior) > 0 {
			xff = strings.Join(prior, ", ") + ", " + peer
		}
	} else {
		for k := range req.Header {
			if strings.HasPrefix(k, "X-Forwarded-") {
				req.Header.Del(k)
			}
		}
	}
	req.Header.Set("X-Forwarded-For", xff)
	req.Header.Set("X-Forwarded-Method", "GET")
	req.Header.Set("X-Forwarded-Proto", "http")
	req.Header.Set("X-Forwarded-Host", "shop.example")
	req.Header.Set("X-Forwarded-Uri", "/orders?page=2")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return answer{status: resp.StatusCode, header: resp.Header}
}

// TestTraefikChecks sends what the guide's forwardAuth middlewares would
// send to two real replicas, in turn: the limits hold, denials are 429s
// with Retry-After and the headers (which Traefik returns to the client
// as they are), every header of authResponseHeaders is in an allowed
// answer, and a client's own X-Forwarded-For picks no bucket, with
// trustForwardHeader false or true.
func TestTraefikChecks(t *testing.T) {
	c := traefikConfig(t)
	e := startEdge(t, "gateways-traefik.md")
	replicas := []string{e.replicas[0].HTTP, e.replicas[1].HTTP}
	awaitWindow(10 * time.Second)
	for _, tc := range []struct {
		middleware string
		limit      int
		trust      bool
	}{
		{"ratekit", 10, false},
		{"ratekit-login", 3, false},
		{"ratekit", 10, true},
	} {
		fa := c.HTTP.Middlewares[tc.middleware].ForwardAuth
		peer := "198.51.100." + strconv.Itoa(int(clientIPs.Add(1)%250))
		for i := range tc.limit + 2 {
			forged := http.Header{"X-Forwarded-For": {"203.0.113." + strconv.Itoa(i)}, "Accept": {"*/*"}}
			a := traefikAsk(t, fa.Address, replicas[i%2], peer, forged, tc.trust)
			if i < tc.limit {
				if a.status != 204 {
					t.Fatalf("%s, check %d: %d; want 204", tc.middleware, i, a.status)
				}
				for _, h := range fa.AuthResponseHeaders {
					if a.header.Get(h) == "" {
						t.Errorf("%s: authResponseHeaders names %s, which an allowed answer lacks (%v)", tc.middleware, h, a.header)
					}
				}
				continue
			}
			checkDenied(t, a, tc.limit)
		}
	}
}
