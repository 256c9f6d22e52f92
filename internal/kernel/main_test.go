package kernel_test

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package if any test leaves a goroutine behind: every
// run goroutine must have ended once its kernel is closed.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
