package app

import (
	"fmt"

	"github.com/ratekit/ratekit/core"
	"github.com/ratekit/ratekit/keyfuncs"
)

// Rule names. Every app uses these, so apps of different frameworks that
// share a Redis share the limits: a storage key is
// "ratekit:<rule>:{<identity>}", whatever the framework.
const (
	DefaultRule = "default"
	StrictRule  = "strict"
)

// Routes every app serves.
const (
	RootPath    = "/"
	StrictPath  = "/strict"
	HealthzPath = "/healthz"
)

// Rules are the rule sets an app installs.
type Rules struct {
	// Default holds the default rule, for a middleware on every route but
	// /healthz.
	Default []core.Rule
	// Strict holds the strict rule, for a second middleware on /strict
	// alone. A request to /strict passes both middlewares; its response
	// describes both rules.
	Strict []core.Rule
}

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
// [StrictRule] of StrictLimit per Period, both keyed by [Config.KeyFunc].
func (c Config) Rules() (Rules, error) {
	key, err := c.KeyFunc()
	if err != nil {
		return Rules{}, err
	}
	def, strict := c.Limits()
	r := Rules{
		Default: []core.Rule{{Name: DefaultRule, Limit: def, Key: key}},
		Strict:  []core.Rule{{Name: StrictRule, Limit: strict, Key: key}},
	}
	if err := core.ValidateRules(append(r.Default, r.Strict...)); err != nil {
		return Rules{}, err
	}
	return r, nil
}
