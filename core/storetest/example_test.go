package storetest_test

import (
	"testing"

	"github.com/ratekit/ratekit/core"
	"github.com/ratekit/ratekit/core/storetest"
	"github.com/ratekit/ratekit/memorystore"
)

// newMemoryStore gives each case of the suite a memorystore.Store of its own, on
// its default clock, closed when the case ends.
func newMemoryStore(t *testing.T) core.Store {
	s, err := memorystore.New()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// A store's tests prove it against the whole contract with one call of Run
// in a test function, such as TestMemoryStore(t *testing.T) here. The
// memorystore.Store reads time.Now, which the suite fakes by running each case in
// a testing/synctest bubble.
func Example() {
	testMemoryStore := func(t *testing.T) {
		storetest.Run(t, newMemoryStore, storetest.WithSynctest())
	}
	_ = testMemoryStore
}
