package reliability

import (
	"log/slog"
	"os"
	"testing"

	"github.com/leashd/leash/store/redisstore"
	"github.com/leashd/leash/testkit/leashproc"
)

// binary is the race-enabled leash the tests run.
var binary string

func TestMain(m *testing.M) {
	// The tests' own go-redis clients (samplers) must not print every failed dial.
	redisstore.RouteDriverLogs(slog.New(slog.DiscardHandler))
	os.Exit(leashproc.Main(m, &binary))
}
