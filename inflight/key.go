package inflight

import (
	"github.com/ratekit/ratekit/internal/storekey"
)

// Key returns the storage key of identity under the named rule, as
// [core.Limiter.StorageKey] builds it: prefix + rule + ":{" + identity +
// "}". An identity that contains '{', '}' or a control byte, that starts
// with '#', or that is longer than [core.MaxIdentityLen] bytes is replaced
// by "#" and its hex SHA-256, so no input can steer its key's Cluster slot
// or collide with another identity. Key returns an error wrapping
// [core.ErrInvalidName] for a bad rule name and [core.ErrInvalidIdentity]
// for an empty identity.
func (l *Limiter) Key(rule, identity string) (string, error) {
	if err := storekey.ValidateName("rule name", rule, false); err != nil {
		return "", err
	}
	return storekey.Key(l.prefix, rule, identity)
}
