package keyfuncs_test

import (
	"context"
	"fmt"
	"log"
	"net/http/httptest"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/ratekit/ratekit/core"
	"github.com/ratekit/ratekit/core/adapter"
	"github.com/ratekit/ratekit/keyfuncs"
	"github.com/ratekit/ratekit/memorystore"
)

// A verified token's "plan" claim picks the limit of a rule: pro users get
// 100 a minute; users without a plan, and clients whose token is forged
// (limited by their address), get the rule's 10.
func ExampleJWTClaimHMAC() {
	secret := []byte("a secret of 32 bytes or more, from the environment")
	user, err := keyfuncs.JWTHMAC(secret)
	if err != nil {
		log.Fatal(err)
	}
	plan, err := keyfuncs.JWTClaimHMAC(secret, "plan")
	if err != nil {
		log.Fatal(err)
	}
	limitOf, err := keyfuncs.PlanLimits(plan, map[string]core.Limit{"pro": core.PerMinute(100)})
	if err != nil {
		log.Fatal(err)
	}
	clientIP, err := keyfuncs.IP()
	if err != nil {
		log.Fatal(err)
	}
	rule := core.Rule{Name: "api", Limit: core.PerMinute(10), LimitOf: limitOf, Key: keyfuncs.First(user, clientIP)}

	store, err := memorystore.New()
	if err != nil {
		log.Fatal(err)
	}
	defer store.Close()
	limiter, err := core.NewLimiter(store)
	if err != nil {
		log.Fatal(err)
	}
	defer limiter.Close()

	exp := time.Now().Add(time.Hour).Unix()
	for _, signer := range []struct {
		user, plan string
		key        []byte
	}{
		{"alice", "pro", secret},
		{"bob", "", secret},
		{"mallory", "pro", []byte("a secret that is not the server's")},
	} {
		claims := jwt.MapClaims{"sub": signer.user, "exp": exp}
		if signer.plan != "" {
			claims["plan"] = signer.plan
		}
		token, err := jwt.NewWithClaims(jwt.SigningMethodHS256, claims).SignedString(signer.key)
		if err != nil {
			log.Fatal(err)
		}
		r := httptest.NewRequest("GET", "/", nil)
		r.Header.Set("Authorization", "Bearer "+token)
		req := adapter.HTTPRequest(r)
		d, err := limiter.Check(context.Background(), req, []core.Rule{rule})
		if err != nil {
			log.Fatal(err)
		}
		fmt.Printf("%s: plan %q, limit %v\n", signer.user, plan(req), d.Results[0].Limit)
	}
	// Output:
	// alice: plan "pro", limit 100 per 1m0s (gcra, burst 100)
	// bob: plan "", limit 10 per 1m0s (gcra, burst 10)
	// mallory: plan "", limit 10 per 1m0s (gcra, burst 10)
}
