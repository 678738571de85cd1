package webhook

import (
	"context"
	"errors"

	"github.com/leashd/leash/engine/webhooks"
	"github.com/leashd/leash/webhook/ssrf"
)

// Screen returns the engine's webhook URL screening under p (spec §8.2), looking host
// names up with r (nil: the system resolver). A URL p refuses is an
// *webhooks.URLRejectedError with ssrf's reason, and the setting that admits it for a local
// trial when one does; a lookup cut off by ctx is ctx's error.
func Screen(p ssrf.Policy, r ssrf.Resolver) webhooks.URLScreen {
	return func(ctx context.Context, rawURL string) (string, error) {
		u, err := p.CheckURL(ctx, rawURL, r)
		if err != nil {
			if se, ok := errors.AsType[*ssrf.Error](err); ok {
				return "", &webhooks.URLRejectedError{Reason: se.Reason + trialHint(se.Relax)}
			}
			return "", err
		}
		return u.String(), nil
	}
}

// trialHint names the setting that admits a rejected URL for a local trial (spec §8.2),
// or is "".
func trialHint(r ssrf.Relax) string {
	switch r {
	case ssrf.RelaxHTTP:
		return " (for a local trial, webhooks.allow_http: true admits http:// URLs; never in production)"
	case ssrf.RelaxPrivate:
		return " (for a local trial, webhooks.allow_private_targets: true admits loopback and private addresses; never in production)"
	case ssrf.RelaxNameAddress:
		return " (for a local trial, name the address instead, e.g. 127.0.0.1, with webhooks.allow_private_targets: true; never in production)"
	}
	return ""
}
