package webhook_test

import (
	"context"
	"errors"
	"net/netip"
	"strings"
	"testing"

	"github.com/leashd/leash/engine/webhooks"
	"github.com/leashd/leash/webhook"
	"github.com/leashd/leash/webhook/ssrf"
)

// slowResolver answers hooks.example.com with a public address; any other name blocks
// until the lookup's context ends.
type slowResolver struct{}

func (slowResolver) LookupNetIP(ctx context.Context, _, host string) ([]netip.Addr, error) {
	if host == "hooks.example.com" {
		return []netip.Addr{netip.MustParseAddr("93.184.216.34")}, nil
	}
	<-ctx.Done()
	return nil, ctx.Err()
}

// TestScreen: the engine's URL screening under an ssrf policy admits a URL in canonical
// form, refuses one with ssrf's reason as an *webhooks.URLRejectedError, and reports a
// lookup cut off by its context as that context's error, not as a refusal.
func TestScreen(t *testing.T) {
	screen := webhook.Screen(ssrf.Policy{}, slowResolver{})
	ctx := context.Background()
	got, err := screen(ctx, "https://Hooks.Example.COM./a")
	if err != nil || got != "https://hooks.example.com/a" {
		t.Fatalf("admitted URL = %q, %v; want https://hooks.example.com/a", got, err)
	}

	_, err = screen(ctx, "http://hooks.example.com/")
	re, ok := errors.AsType[*webhooks.URLRejectedError](err)
	if !ok || !strings.HasPrefix(re.Reason, "URL scheme must be https (for a local trial, webhooks.allow_http: true") {
		t.Fatalf("http URL: error %v, want a refusal saying the scheme must be https", err)
	}
	if _, err := webhook.Screen(ssrf.Policy{AllowHTTP: true}, slowResolver{})(ctx, "http://hooks.example.com/"); err != nil {
		t.Fatalf("http URL under AllowHTTP: %v", err)
	}

	cut, cancel := context.WithCancel(ctx)
	cancel()
	_, err = screen(cut, "https://slow.example.com/")
	if _, ok := errors.AsType[*webhooks.URLRejectedError](err); ok || !errors.Is(err, context.Canceled) {
		t.Fatalf("lookup cut off: error %v, want context.Canceled and no refusal", err)
	}
}
