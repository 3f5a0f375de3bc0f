package verify

import (
	"testing"

	"go.uber.org/goleak"
)

// Every run stops its receiver, forwarder and the goroutines that wait on
// the command.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
