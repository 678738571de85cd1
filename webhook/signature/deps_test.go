package signature

import (
	"testing"

	"github.com/leashd/leash/testkit"
)

// TestStdlibOnly: a receiver importing this package compiles no engine, store or grpc.
func TestStdlibOnly(t *testing.T) {
	testkit.StdlibOnly(t, "github.com/leashd/leash/webhook/signature")
}
