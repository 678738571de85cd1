package suggest

import "testing"

func TestClosest(t *testing.T) {
	verbs := []string{"limit", "reset", "lease", "rules", "stats", "webhook", "keys", "admin", "serve", "check-config", "version"}
	for _, tc := range []struct{ word, want string }{
		{"limts", "limit"},
		{"lmiit", "limit"},
		{"sevre", "serve"},
		{"rule", "rules"},
		{"chek-config", "check-config"},
		{"LIMIT", ""}, // the same word in another case is no typo to correct here
		{"xyz", ""},   // nothing near
		{"ab", ""},    // too short to guess
		{"webhooks", "webhook"},
		{"limit", ""}, // an exact match is not a suggestion
	} {
		if got := Closest(tc.word, verbs); got != tc.want {
			t.Errorf("Closest(%q) = %q, want %q", tc.word, got, tc.want)
		}
	}
	if got := Closest("LEASH_HTTP_ADRR", []string{"LEASH_HTTP_ADDR", "LEASH_GRPC_ADDR"}); got != "LEASH_HTTP_ADDR" {
		t.Errorf("env: %q", got)
	}
}
