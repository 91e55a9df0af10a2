package examples_test

// Snippets of docs/rules-files.md and docs/quotas.md, checked like those of
// snippets_test.go.

import (
	"fmt"
	"log"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/ratekit/ratekit/core"
	"github.com/ratekit/ratekit/keyfuncs"
	"github.com/ratekit/ratekit/ruleconf"
)

// Rules from examples/rules.yaml, with key functions and a plan function
// the application names, reloaded on SIGHUP.
func Example_rulesFile() {
	secret := []byte("a secret of 32 bytes or more, from the environment")
	clientIP, err := keyfuncs.IP()
	if err != nil {
		log.Fatal(err)
	}
	user, err := keyfuncs.JWTHMAC(secret)
	if err != nil {
		log.Fatal(err)
	}
	// snippet:rulesfile
	plan, err := keyfuncs.JWTClaimHMAC(secret, "plan") // a verified token's "plan" claim, or ""
	if err != nil {
		log.Fatal(err)
	}
	reg := ruleconf.Registry{
		Keys:       map[string]core.KeyFunc{"ip": clientIP, "user": keyfuncs.First(user, clientIP)},
		DefaultKey: "ip", // for rules that name no key
		Plan:       plan, // for rules with plans
	}
	rules, err := ruleconf.Load("rules.yaml", reg)
	if err != nil {
		log.Fatal(err) // such as: rules.yaml:3: rule "strict": period: want a Go duration such as 1m or 30s, got "soon"
	}
	set, err := core.NewRuleSet(rules)
	if err != nil {
		log.Fatal(err)
	}
	// snippet:end

	// snippet:reload
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	go func() {
		for range hup {
			if err := ruleconf.Reload("rules.yaml", reg, set); err != nil {
				slog.Error("rules not reloaded, the current ones stay", "err", err)
			}
		}
	}()
	// snippet:end
	signal.Stop(hup)
	close(hup) // the reloading goroutine ends

	for _, r := range set.Rules() {
		fmt.Printf("%s: %v, per plan: %v\n", r.Name, r.Limit, r.LimitOf != nil)
	}
	// Output:
	// default: 10 per 1m0s (gcra, burst 10), per plan: true
	// strict: 2 per 1m0s (gcra, burst 2), per plan: false
}

// Per-plan limits written in code.
func Example_planLimits() {
	secret := []byte("a secret of 32 bytes or more, from the environment")
	clientIP, err := keyfuncs.IP()
	if err != nil {
		log.Fatal(err)
	}
	user, err := keyfuncs.JWTHMAC(secret)
	if err != nil {
		log.Fatal(err)
	}
	// snippet:plans
	plan, err := keyfuncs.JWTClaimHMAC(secret, "plan")
	if err != nil {
		log.Fatal(err)
	}
	limitOf, err := keyfuncs.PlanLimits(plan, map[string]core.Limit{
		"pro":  core.PerMinute(1000),
		"team": core.PerMinute(5000).WithBurst(500),
	})
	if err != nil {
		log.Fatal(err)
	}
	rules := []core.Rule{{
		Name:    "default",
		Limit:   core.PerMinute(100), // no plan, an unknown plan, an unverified token
		LimitOf: limitOf,
		Key:     keyfuncs.First(user, clientIP),
	}}
	// snippet:end
	_, err = core.NewRuleSet(rules)
	fmt.Println(err)
	// Output: <nil>
}
