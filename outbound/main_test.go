package outbound_test

import (
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	mustChild()
	goleak.VerifyTestMain(m)
}
