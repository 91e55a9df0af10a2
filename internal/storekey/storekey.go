// Package storekey builds the storage keys of ratekit's limiters and
// validates their names: package core (rate limits) and package inflight
// (concurrency limits) lay out their keys alike, so that a Redis Cluster
// keeps every key of one identity in one slot, and both refuse the same
// names. core re-exports its errors and limits.
package storekey

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
)

// ErrInvalidIdentity is returned, wrapped, for an empty identity.
var ErrInvalidIdentity = errors.New("ratekit: invalid identity")

// ErrInvalidName is returned, wrapped, for a rule name or key prefix that
// cannot be part of a storage key.
var ErrInvalidName = errors.New("ratekit: invalid name")

// MaxIdentityLen is the longest identity kept as it is in a storage key;
// longer identities are replaced by a hash of themselves.
const MaxIdentityLen = 128

// MaxNameLen is the longest rule name or key prefix accepted.
const MaxNameLen = 128

// hashedMark starts every hashed identity. Raw identities that start with it
// are hashed too, so a hashed form can never be forged by a raw identity.
const hashedMark = '#'

// Key returns the storage key of identity under rule:
//
//	prefix + rule + ":{" + identity + "}"
//
// The identity sits in a Redis Cluster hash tag, so every key of one identity
// maps to one slot and can be checked in one script call. An identity that
// contains '{', '}' or a control byte, that starts with '#', or that is
// longer than [MaxIdentityLen] bytes is replaced by "#" and the hex SHA-256
// of itself: no input can steer the slot of its key or collide with another
// identity. Key returns an error wrapping [ErrInvalidIdentity] for an empty
// identity; prefix and rule are validated by the caller ([ValidateName]).
func Key(prefix, rule, identity string) (string, error) {
	if identity == "" {
		return "", fmt.Errorf("%w: empty identity for rule %q", ErrInvalidIdentity, rule)
	}
	return prefix + rule + ":{" + tagged(identity) + "}", nil
}

// OverrideSuffix ends the key of every per-identity override: the key of
// a storage key's override is the storage key and OverrideSuffix. A
// storage key ends with '}', so no storage key is an override key, and the
// two share the hash tag, so a Redis Cluster keeps them in one slot.
const OverrideSuffix = ":override"

// KeyAndOverride returns [Key] and the key of its override, Key +
// [OverrideSuffix], built in one allocation: key is a prefix of override.
func KeyAndOverride(prefix, rule, identity string) (key, override string, err error) {
	if identity == "" {
		return "", "", fmt.Errorf("%w: empty identity for rule %q", ErrInvalidIdentity, rule)
	}
	override = prefix + rule + ":{" + tagged(identity) + "}" + OverrideSuffix
	return override[:len(override)-len(OverrideSuffix)], override, nil
}

// tagged returns identity as it stands in a key's hash tag: itself, or
// its hash when it cannot stand as it is.
func tagged(identity string) string {
	if !needsHash(identity) {
		return identity
	}
	sum := sha256.Sum256([]byte(identity))
	var buf [1 + 2*sha256.Size]byte
	buf[0] = hashedMark
	hex.Encode(buf[1:], sum[:])
	return string(buf[:])
}

// needsHash reports whether identity cannot stand in a key as it is.
func needsHash(identity string) bool {
	if len(identity) > MaxIdentityLen || identity[0] == hashedMark {
		return true
	}
	for i := 0; i < len(identity); i++ {
		if c := identity[i]; c == '{' || c == '}' || c < 0x20 || c == 0x7f {
			return true
		}
	}
	return false
}

// ValidateName returns nil if s can serve as a key prefix or rule name: at
// most [MaxNameLen] bytes, without '{', '}' or control bytes (a brace would
// move the Cluster hash tag away from the identity), and not empty unless
// emptyOK. The error wraps [ErrInvalidName] and names what is wrong: what
// says what s is, such as "rule name".
func ValidateName(what, s string, emptyOK bool) error {
	switch {
	case s == "" && !emptyOK:
		return fmt.Errorf("%w: empty %s", ErrInvalidName, what)
	case len(s) > MaxNameLen:
		return fmt.Errorf("%w: %s longer than %d bytes", ErrInvalidName, what, MaxNameLen)
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; c == '{' || c == '}' || c < 0x20 || c == 0x7f {
			return fmt.Errorf("%w: %s %q contains %q", ErrInvalidName, what, s, c)
		}
	}
	return nil
}

// HashTag returns the part of key that Redis Cluster hashes: the text
// between the first '{' and the next '}', when not empty, else all of key.
// Keys that share a hash tag share a slot, and a store's lock stripe.
func HashTag(key string) string {
	for i := 0; i < len(key); i++ {
		if key[i] == '{' {
			for j := i + 1; j < len(key); j++ {
				if key[j] == '}' {
					if j > i+1 {
						return key[i+1 : j]
					}
					return key
				}
			}
			return key
		}
	}
	return key
}
