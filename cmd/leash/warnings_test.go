package main

import (
	"slices"
	"strings"
	"testing"

	"github.com/leashd/leash/testkit/leashproc"
)

// TestTestOnlySettingsWarn: each setting spec §10.2 documents as for tests only logs one
// warning at start-up when it is on, naming the setting; with them off there is none.
func TestTestOnlySettingsWarn(t *testing.T) {
	warned := func(p *leashproc.Proc) []string {
		var settings []string
		for _, r := range p.Logs() {
			if msg, _ := r["msg"].(string); r["level"] == "WARN" && strings.Contains(msg, "tests only") {
				setting, _ := r["setting"].(string)
				settings = append(settings, setting)
			}
		}
		return settings
	}
	on := leashproc.Start(t, binary, nil, "LEASH_WEBHOOKS_ALLOW_HTTP=true", "LEASH_WEBHOOKS_ALLOW_PRIVATE_TARGETS=true")
	if got, want := warned(on), []string{"webhooks.allow_http", "webhooks.allow_private_targets"}; !slices.Equal(got, want) {
		t.Errorf("warnings with both on: %q, want %q", got, want)
	}
	off := leashproc.Start(t, binary, nil)
	if got := warned(off); len(got) != 0 {
		t.Errorf("warnings with both off: %q", got)
	}
}
