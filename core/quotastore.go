package core

import (
	"errors"
	"fmt"
)

// ErrNotSupported is returned, wrapped, by a store asked for something it
// cannot do: a [LeasingStore] over a store that is not a [QuotaStore] or
// [ResetWatcher], or reset watching over a Redis client without pub/sub.
var ErrNotSupported = errors.New("ratekit: not supported by this store")

// validateKeys checks the keys of a Reset.
func validateKeys(keys []string) error {
	for _, k := range keys {
		if k == "" {
			return fmt.Errorf("%w: empty storage key", ErrInvalidIdentity)
		}
	}
	return nil
}
