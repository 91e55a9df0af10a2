package inflight

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"

	"github.com/ratekit/ratekit/core"
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
	if err := validateName("rule name", rule, false); err != nil {
		return "", err
	}
	if identity == "" {
		return "", fmt.Errorf("%w: empty identity for rule %q", core.ErrInvalidIdentity, rule)
	}
	if needsHash(identity) {
		sum := sha256.Sum256([]byte(identity))
		identity = "#" + hex.EncodeToString(sum[:])
	}
	return l.prefix + rule + ":{" + identity + "}", nil
}

// needsHash reports whether identity cannot stand in a key as it is.
func needsHash(identity string) bool {
	if len(identity) > core.MaxIdentityLen || identity[0] == '#' {
		return true
	}
	for i := 0; i < len(identity); i++ {
		if c := identity[i]; c == '{' || c == '}' || c < 0x20 || c == 0x7f {
			return true
		}
	}
	return false
}

// validateName returns nil if s can serve as a key prefix or rule name, as
// core requires of its own: at most [core.MaxNameLen] bytes, without '{',
// '}' or control bytes, and not empty unless emptyOK.
func validateName(what, s string, emptyOK bool) error {
	switch {
	case s == "" && !emptyOK:
		return fmt.Errorf("%w: empty %s", core.ErrInvalidName, what)
	case len(s) > core.MaxNameLen:
		return fmt.Errorf("%w: %s longer than %d bytes", core.ErrInvalidName, what, core.MaxNameLen)
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; c == '{' || c == '}' || c < 0x20 || c == 0x7f {
			return fmt.Errorf("%w: %s %q contains %q", core.ErrInvalidName, what, s, c)
		}
	}
	return nil
}
