package core

import "github.com/ratekit/ratekit/internal/storekey"

// ErrInvalidIdentity is returned, wrapped, for an empty identity.
var ErrInvalidIdentity = storekey.ErrInvalidIdentity

// ErrInvalidName is returned, wrapped, for a rule name or key prefix that
// cannot be part of a storage key.
var ErrInvalidName = storekey.ErrInvalidName

// MaxIdentityLen is the longest identity kept as it is in a storage key;
// longer identities are replaced by a hash of themselves.
const MaxIdentityLen = storekey.MaxIdentityLen

// MaxNameLen is the longest rule name or key prefix accepted.
const MaxNameLen = storekey.MaxNameLen
