package core

import "fmt"

// validateKeys checks the keys of a Reset.
func validateKeys(keys []string) error {
	for _, k := range keys {
		if k == "" {
			return fmt.Errorf("%w: empty storage key", ErrInvalidIdentity)
		}
	}
	return nil
}
