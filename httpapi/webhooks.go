package httpapi

import (
	"net/http"

	"github.com/go-json-experiment/json/jsontext"
	"github.com/leashd/leash/engine"
)

// The webhook endpoints (spec §8.1). PUT and POST /test are gated by the plan before the
// body is read; GET and DELETE are not, so an account moved to a plan without webhooks
// can still see and remove what it configured (its events are no longer sent).

// getWebhook serves GET /v1/webhook: {url}, never the secret.
func (a *API) getWebhook(c *call) {
	u, err := a.eng.Webhook(c.r.Context(), c.acct)
	if err != nil {
		a.engineError(c, err)
		return
	}
	o := append(c.out[:0], `{"url":`...)
	o, _ = jsontext.AppendQuote(o, u)
	o = append(o, '}')
	c.out = o
	a.writeJSON(c, http.StatusOK, o)
}

// putWebhook serves PUT /v1/webhook {url}: {url, secret}, the only time the secret is
// shown.
func (a *API) putWebhook(c *call) {
	var raw string
	if err := a.decodeWebhook(c, &raw); err != nil {
		a.engineError(c, err)
		return
	}
	w, err := a.eng.PutWebhook(c.r.Context(), c.acct, raw)
	if err != nil {
		a.engineError(c, err)
		return
	}
	o := append(c.out[:0], `{"url":`...)
	o, _ = jsontext.AppendQuote(o, w.URL)
	o = append(o, `,"secret":`...)
	o, _ = jsontext.AppendQuote(o, w.Secret)
	o = append(o, '}')
	c.out = o
	a.writeJSON(c, http.StatusOK, o)
}

func (a *API) decodeWebhook(c *call, url *string) error {
	p := &c.p
	if err := p.begin(&c.body, a.decodeOpts); err != nil {
		return err
	}
	present := false
	for {
		name, done, err := p.next()
		if err != nil {
			return err
		}
		if done {
			if err := p.finish(); err != nil {
				return err
			}
			if !present {
				return engine.Invalid("url is required")
			}
			return nil
		}
		switch string(name) {
		case "url":
			present, err = p.str(fURL, "url", url)
		default:
			err = unknown(name)
		}
		if err != nil {
			return err
		}
	}
}

// deleteWebhook serves DELETE /v1/webhook: 204, whether or not one was set.
func (a *API) deleteWebhook(c *call) {
	if err := a.eng.DeleteWebhook(c.r.Context(), c.acct); err != nil {
		a.engineError(c, err)
		return
	}
	c.w.Header()[RequestIDHeader] = []string{a.requestID(c)}
	c.WriteHeader(http.StatusNoContent)
}

// testWebhook serves POST /v1/webhook/test (no body): 202 {event_id}.
func (a *API) testWebhook(c *call) {
	id, err := a.eng.TestWebhook(c.r.Context(), c.acct)
	if err != nil {
		a.engineError(c, err)
		return
	}
	o := append(c.out[:0], `{"event_id":`...)
	o, _ = jsontext.AppendQuote(o, id)
	o = append(o, '}')
	c.out = o
	a.writeJSON(c, http.StatusAccepted, o)
}
