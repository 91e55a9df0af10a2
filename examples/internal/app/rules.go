package app

import (
	"crypto/subtle"
	"fmt"
	"net/http"
	"slices"

	"github.com/ratekit/ratekit/core"
	"github.com/ratekit/ratekit/keyfuncs"
	"github.com/ratekit/ratekit/ruleconf"
)

// Rule names. Every app uses these, so apps of different frameworks that
// share a Redis share the limits: a storage key is
// "ratekit:<rule>:{<identity>}", whatever the framework.
const (
	DefaultRule = "default"
	StrictRule  = "strict"
	LoginRule   = "login"
	// AdminRule counts the wrong tokens of the admin routes.
	AdminRule = "admin"
)

// Routes every app serves.
const (
	RootPath    = "/"
	StrictPath  = "/strict"
	HealthzPath = "/healthz"
	// LoginPath answers POST with 204 when the PasswordHeader holds the
	// password, 401 otherwise; only the 401s spend the login rule.
	LoginPath = "/login"
)

// PasswordHeader carries the password of POST /login.
const PasswordHeader = "X-Password"

// Rules are the rule sets an app installs.
type Rules struct {
	// Default holds the default rule, for a middleware on every route but
	// /healthz, /metrics and the admin routes. A set, so that SIGHUP can
	// replace it.
	Default *core.RuleSet
	// Strict holds the strict rule, for a second middleware on /strict
	// alone. A request to /strict passes both middlewares; its response
	// describes both rules.
	Strict *core.RuleSet
	// Login holds the login rule, for a middleware on POST /login that
	// counts only the answers [CountsAsFailure] picks.
	Login []core.Rule
	// Admin holds the admin rule, for a middleware on the admin routes
	// that counts only their 401s, the answers to wrong tokens: the login
	// limit, per client IP.
	Admin []core.Rule
	// Password is what POST /login accepts.
	Password string
}

// LoginStatus returns the status of the answer to POST /login with the
// given password: 204 for the right one, 401 otherwise.
func (r Rules) LoginStatus(password string) int {
	if subtle.ConstantTimeCompare([]byte(password), []byte(r.Password)) == 1 {
		return http.StatusNoContent
	}
	return http.StatusUnauthorized
}

// CountsAsFailure reports whether an answer of POST /login spends the
// login rule: only a 401 does.
func CountsAsFailure(status int) bool { return status == http.StatusUnauthorized }

// KeyFunc returns the key function of the configured key mode.
func (c Config) KeyFunc() (core.KeyFunc, error) {
	ip, err := keyfuncs.IP(keyfuncs.TrustedProxies(c.TrustedProxies...))
	if err != nil {
		return nil, err
	}
	switch c.KeyMode {
	case KeyIP:
		return ip, nil
	case KeyAPIKey:
		apiKey, err := keyfuncs.APIKey() // X-API-Key, hashed
		if err != nil {
			return nil, err
		}
		// Without a key, the client's IP: a request never goes unlimited
		// for want of a key.
		return keyfuncs.First(apiKey, ip), nil
	case KeyJWT:
		user, err := keyfuncs.JWTHMAC([]byte(c.JWTSecret)) // HS256 only
		if err != nil {
			return nil, err
		}
		return keyfuncs.First(user, ip), nil
	}
	return nil, fmt.Errorf("unknown key mode %q", c.KeyMode)
}

// Rules returns the apps' rules: [DefaultRule] of Limit per Period and
// [StrictRule] of StrictLimit per Period, both keyed by [Config.KeyFunc],
// or both from RulesFile; and [LoginRule] and [AdminRule], each of
// LoginLimit per Period, keyed by client IP.
func (c Config) Rules() (Rules, error) {
	def, strict, err := c.RateRules()
	if err != nil {
		return Rules{}, err
	}
	r := Rules{Password: c.LoginPassword}
	if r.Default, err = core.NewRuleSet(def); err != nil {
		return Rules{}, err
	}
	if r.Strict, err = core.NewRuleSet(strict); err != nil {
		return Rules{}, err
	}
	ip, err := keyfuncs.IP(keyfuncs.TrustedProxies(c.TrustedProxies...))
	if err != nil {
		return Rules{}, err
	}
	login := core.Limit{Rate: c.LoginLimit, Period: c.Period, Burst: c.LoginLimit, Algorithm: c.Algorithm}
	r.Login = []core.Rule{{Name: LoginRule, Limit: login, Key: ip}}
	r.Admin = []core.Rule{{Name: AdminRule, Limit: login, Key: ip}}
	if _, err := core.NewRuleSet(append(slices.Clone(r.Login), r.Admin...)); err != nil {
		return Rules{}, err
	}
	return r, nil
}

// RateRules returns the default and strict rules, from RulesFile when it is
// set, else from the flags.
func (c Config) RateRules() (def, strict []core.Rule, err error) {
	key, err := c.KeyFunc()
	if err != nil {
		return nil, nil, err
	}
	if c.RulesFile != "" {
		return c.fileRules(key)
	}
	dl, sl := c.Limits()
	def = []core.Rule{{Name: DefaultRule, Limit: dl, Key: key}}
	strict = []core.Rule{{Name: StrictRule, Limit: sl, Key: key}}
	if _, err := core.NewRuleSet(append(slices.Clone(def), strict...)); err != nil {
		return nil, nil, err
	}
	return def, strict, nil
}

// Reload rereads RulesFile into r's sets: both are replaced, or neither.
func (c Config) Reload(r Rules) error {
	def, strict, err := c.RateRules()
	if err != nil {
		return err
	}
	if err := r.Default.Replace(def); err != nil {
		return err
	}
	return r.Strict.Replace(strict)
}

// fileRules loads the default and strict rules of RulesFile, each keyed by
// key unless the file names another of the key modes, and, in jwt mode,
// the default rule's plan limits picked by a verified token's "plan"
// claim.
func (c Config) fileRules(key core.KeyFunc) (def, strict []core.Rule, err error) {
	reg := ruleconf.Registry{Keys: map[string]core.KeyFunc{c.KeyMode: key}, DefaultKey: c.KeyMode}
	reg.Plan = func(core.Request) string { return "" }
	if c.KeyMode == KeyJWT {
		if reg.Plan, err = keyfuncs.JWTClaimHMAC([]byte(c.JWTSecret), PlanClaim); err != nil {
			return nil, nil, err
		}
	}
	rules, err := ruleconf.Load(c.RulesFile, reg)
	if err != nil {
		return nil, nil, err
	}
	if def, err = ruleconf.Select(rules, DefaultRule); err != nil {
		return nil, nil, fmt.Errorf("%s: %w", c.RulesFile, err)
	}
	if strict, err = ruleconf.Select(rules, StrictRule); err != nil {
		return nil, nil, fmt.Errorf("%s: %w", c.RulesFile, err)
	}
	return def, strict, nil
}

// PlanClaim is the claim of a verified token that names its plan, in jwt
// mode: it picks the default rule's per-plan limit of a rules file.
const PlanClaim = "plan"
