package keyfuncs_test

import (
	"fmt"
	"log"
	"net/http/httptest"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/ratekit/ratekit/core/adapter"
	"github.com/ratekit/ratekit/keyfuncs"
)

// The application runs behind a load balancer in 10.0.0.0/8 that appends
// the client's address to X-Forwarded-For. A client's own entries, further
// left, are ignored.
func ExampleIP() {
	trusted, err := keyfuncs.ParsePrefixes("10.0.0.0/8, fd00::/8") // e.g. from -trusted-proxies
	if err != nil {
		log.Fatal(err)
	}
	clientIP, err := keyfuncs.IP(keyfuncs.TrustedProxies(trusted...))
	if err != nil {
		log.Fatal(err)
	}

	r := httptest.NewRequest("GET", "/", nil)
	r.RemoteAddr = "10.0.0.5:52000" // the load balancer
	r.Header.Set("X-Forwarded-For", "1.2.3.4, 203.0.113.7")
	fmt.Println(clientIP(adapter.HTTPRequest(r)))

	// The same header straight from a client is not trusted.
	r.RemoteAddr = "198.51.100.9:41000"
	fmt.Println(clientIP(adapter.HTTPRequest(r)))

	// IPv6 clients are grouped by /64.
	r.RemoteAddr = "[2001:db8:1:2:a:b:c:d]:41000"
	fmt.Println(clientIP(adapter.HTTPRequest(r)))
	// Output:
	// ip:203.0.113.7 <nil>
	// ip:198.51.100.9 <nil>
	// ip:2001:db8:1:2::/64 <nil>
}

func ExampleAPIKey() {
	apiKey, err := keyfuncs.APIKey(
		keyfuncs.FromHeader("X-API-Key"),
		keyfuncs.FromAuthScheme("ApiKey"),
		keyfuncs.HashSecret([]byte("server-side secret")),
	)
	if err != nil {
		log.Fatal(err)
	}

	r := httptest.NewRequest("GET", "/", nil)
	r.Header.Set("X-API-Key", "sk_live_51HxYz")
	fmt.Println(apiKey(adapter.HTTPRequest(r)))

	// The same key in another place is the same identity.
	r = httptest.NewRequest("GET", "/", nil)
	r.Header.Set("Authorization", "ApiKey sk_live_51HxYz")
	fmt.Println(apiKey(adapter.HTTPRequest(r)))
	// Output:
	// apikey:a99b196e9711bb2aa42c76f836de16b2 <nil>
	// apikey:a99b196e9711bb2aa42c76f836de16b2 <nil>
}

// A signed-in user is limited as the user, a client with an API key by the
// key, anyone else by address. A forged or expired token counts as none.
func ExampleFirst() {
	user, err := keyfuncs.JWTHMAC([]byte("jwt signing secret, 32 bytes min"))
	if err != nil {
		log.Fatal(err)
	}
	apiKey, err := keyfuncs.APIKey()
	if err != nil {
		log.Fatal(err)
	}
	clientIP, err := keyfuncs.IP()
	if err != nil {
		log.Fatal(err)
	}
	key := keyfuncs.First(user, apiKey, clientIP)

	r := httptest.NewRequest("GET", "/", nil)
	r.RemoteAddr = "203.0.113.7:41000"
	r.Header.Set("Authorization", "Bearer not.a.token")
	fmt.Println(key(adapter.HTTPRequest(r)))

	r.Header.Set("X-API-Key", "sk_live_51HxYz")
	fmt.Println(key(adapter.HTTPRequest(r)))

	token, err := jwt.NewWithClaims(jwt.SigningMethodHS256, jwt.MapClaims{
		"sub": "42",
		"exp": time.Now().Add(time.Hour).Unix(),
	}).SignedString([]byte("jwt signing secret, 32 bytes min"))
	if err != nil {
		log.Fatal(err)
	}
	r.Header.Set("Authorization", "Bearer "+token)
	fmt.Println(key(adapter.HTTPRequest(r)))
	// Output:
	// ip:203.0.113.7 <nil>
	// apikey:e1baee4c34d327ff7b86b8f98a8e7ba8 <nil>
	// user:42 <nil>
}

// A stricter limit on the login route, per client.
func ExampleJoin() {
	clientIP, err := keyfuncs.IP()
	if err != nil {
		log.Fatal(err)
	}
	key := keyfuncs.Join(keyfuncs.Route(), clientIP)

	r := httptest.NewRequest("POST", "/login", nil)
	r.RemoteAddr = "203.0.113.7:41000"
	fmt.Println(key(adapter.HTTPRequestWithRoute(r, "POST /login")))
	// Output:
	// route:POST /login|ip:203.0.113.7 <nil>
}
