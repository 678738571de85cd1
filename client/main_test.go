package client_test

import (
	"os"
	"testing"

	"github.com/leashd/leash/client"
	"github.com/leashd/leash/testkit"
	"github.com/leashd/leash/testkit/leashproc"
)

var bin string

func TestMain(m *testing.M) { os.Exit(leashproc.Main(m, &bin)) }

// The accounts of the test server: one per plan the tests need.
const (
	keyScale  = "key-scale"    // plan scale: everything, no hard cap
	keyFree   = "key-free"     // plan free: no token_bucket, leases or webhooks
	keyCapped = "key-capped"   // hard cap 3 decisions a month
	keyOp     = "key-operator" // the operator "ops" (admin routes)
)

const testConfig = `
plans:
  capped: {algorithms: [fixed_window, sliding_window, token_bucket], concurrent_limit: true, webhooks: true, monthly_quota: 2, hard_cap: 3}
accounts:
  - {id: scale, plan: scale, api_keys: [key-scale]}
  - {id: free, plan: free, api_keys: [key-free]}
  - {id: capped, plan: capped, api_keys: [key-capped]}
operators:
  - {id: ops, api_keys: [key-operator]}
webhooks: {allow_http: true, allow_private_targets: true}
`

// startLeash runs a `leash serve` on the memory store with testConfig plus env.
func startLeash(t *testing.T, env ...string) *leashproc.Proc {
	t.Helper()
	return leashproc.Start(t, bin, []string{"--config", leashproc.Config(t, testConfig)}, append([]string{"LEASH_STORE_BACKEND=memory"}, env...)...)
}

// newClient is a client of p's /v1 with key.
func newClient(t *testing.T, url, key string) *client.Client {
	t.Helper()
	c, err := client.New(client.Options{BaseURL: url, APIKey: key})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestStdlibOnly: importing the client compiles no engine, store, grpc, viper,
// prometheus or k8s package; of this module, only package wire.
func TestStdlibOnly(t *testing.T) {
	testkit.StdlibOnly(t, "github.com/leashd/leash/client", "github.com/leashd/leash/wire")
}
