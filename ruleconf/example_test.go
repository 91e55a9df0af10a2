package ruleconf_test

import (
	"errors"
	"fmt"
	"log"
	"os"
	"path/filepath"

	"github.com/ratekit/ratekit/core"
	"github.com/ratekit/ratekit/keyfuncs"
	"github.com/ratekit/ratekit/ruleconf"
)

// The application names its key functions and its plan function once; a
// document refers to them by name.
func ExampleParse() {
	clientIP, err := keyfuncs.IP()
	if err != nil {
		log.Fatal(err)
	}
	secret := []byte("a secret of 32 bytes or more, from the environment")
	user, err := keyfuncs.JWTHMAC(secret)
	if err != nil {
		log.Fatal(err)
	}
	plan, err := keyfuncs.JWTClaimHMAC(secret, "plan")
	if err != nil {
		log.Fatal(err)
	}
	reg := ruleconf.Registry{
		Keys:       map[string]core.KeyFunc{"ip": clientIP, "user": keyfuncs.First(user, clientIP)},
		DefaultKey: "ip",
		Plan:       plan,
	}

	rules, err := ruleconf.Parse([]byte(`
rules:
  default: {limit: 10, period: 1m, key: user, plans: {pro: 100, team: {limit: 1000, period: 1h}}}
  strict:  {limit: 2, period: 1m, algorithm: sliding-counter}
`), reg)
	if err != nil {
		log.Fatal(err)
	}
	for _, r := range rules {
		fmt.Printf("%s: %v, per plan: %v\n", r.Name, r.Limit, r.LimitOf != nil)
	}
	// Output:
	// default: 10 per 1m0s (gcra, burst 10), per plan: true
	// strict: 2 per 1m0s (sliding-counter), per plan: false
}

// An error says where the document is wrong, and wraps core's sentinel
// errors where one applies.
func ExampleError() {
	reg := ruleconf.Registry{Keys: map[string]core.KeyFunc{"ip": keyfuncs.Static("everyone")}, DefaultKey: "ip"}
	_, err := ruleconf.Parse([]byte(`
rules:
  default: {limit: 10, period: 1m}
  strict:  {limit: 0, period: 1m}
`), reg)
	fmt.Println(err)

	var e *ruleconf.Error
	if errors.As(err, &e) {
		fmt.Println(e.Line, e.Rule, errors.Is(err, core.ErrInvalidLimit))
	}
	// Output:
	// ruleconf: line 4: rule "strict": ratekit: invalid limit: rate 0 out of range [1, 1073741824]
	// 4 strict true
}

// Reload swaps in a file's rules, or keeps the current ones when the file
// is bad; an application calls it on SIGHUP.
func ExampleReload() {
	dir, err := os.MkdirTemp("", "ruleconf")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "rules.yaml")
	reg := ruleconf.Registry{Keys: map[string]core.KeyFunc{"ip": keyfuncs.Static("everyone")}, DefaultKey: "ip"}
	write := func(doc string) {
		if err := os.WriteFile(path, []byte(doc), 0o600); err != nil {
			log.Fatal(err)
		}
	}

	write("rules: {default: {limit: 10}}")
	rules, err := ruleconf.Load(path, reg)
	if err != nil {
		log.Fatal(err)
	}
	set, err := core.NewRuleSet(rules) // what the middleware reads at each request
	if err != nil {
		log.Fatal(err)
	}

	write("rules: {default: {limit: 20}}")
	fmt.Println(ruleconf.Reload(path, reg, set), set.Rules()[0].Limit)

	write("rules: {default: {limit: twenty}}")
	fmt.Println(ruleconf.Reload(path, reg, set) != nil, set.Rules()[0].Limit)
	// Output:
	// <nil> 20 per 1m0s (gcra, burst 20)
	// true 20 per 1m0s (gcra, burst 20)
}
