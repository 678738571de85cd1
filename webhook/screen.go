package webhook

import (
	"context"
	"errors"

	"github.com/leashd/leash/engine"
	"github.com/leashd/leash/webhook/ssrf"
)

// Screen returns the engine's webhook URL screening under p (spec §8.2), looking host
// names up with r (nil: the system resolver). A URL p refuses is an
// *engine.URLRejectedError with ssrf's reason; a lookup cut off by ctx is ctx's error.
func Screen(p ssrf.Policy, r ssrf.Resolver) engine.URLScreen {
	return func(ctx context.Context, rawURL string) (string, error) {
		u, err := p.CheckURL(ctx, rawURL, r)
		if err != nil {
			if se, ok := errors.AsType[*ssrf.Error](err); ok {
				return "", &engine.URLRejectedError{Reason: se.Reason}
			}
			return "", err
		}
		return u.String(), nil
	}
}
