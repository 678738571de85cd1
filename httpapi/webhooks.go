package httpapi

import (
	"net/http"

	"github.com/leashd/leash/engine"
	"github.com/leashd/leash/wire"
)

// The webhook endpoints (spec §8.1). PUT and POST /test are gated by the plan before the
// body is read; GET and DELETE are not, so an account moved to a plan without webhooks
// can still see and remove what it configured (its events are no longer sent).

// getWebhook serves GET /v1/webhook: {url}, never the secret.
func getWebhook(x *exchange) {
	a := x.a
	u, err := a.eng.Webhooks.Get(x.r.Context(), x.acct)
	if err != nil {
		x.engineError(err)
		return
	}
	x.reply(http.StatusOK, &wire.Webhook{URL: u})
}

// putWebhook serves PUT /v1/webhook {url}: {url, secret}, the only time the secret is
// shown.
func putWebhook(x *exchange) {
	a := x.a
	var req wire.WebhookRequest
	if err := decodeBody(x.body.Bytes(), &req); err != nil {
		x.engineError(err)
		return
	}
	if !req.URL.Set {
		x.engineError(engine.Invalid("url is required"))
		return
	}
	w, err := a.eng.Webhooks.Put(x.r.Context(), x.acct, req.URL.Value)
	if err != nil {
		x.engineError(err)
		return
	}
	x.reply(http.StatusOK, &wire.Webhook{URL: w.URL, Secret: w.Secret})
}

// deleteWebhook serves DELETE /v1/webhook: 204, whether or not one was set.
func deleteWebhook(x *exchange) {
	a := x.a
	if err := a.eng.Webhooks.Delete(x.r.Context(), x.acct); err != nil {
		x.engineError(err)
		return
	}
	x.rw.Header()[RequestIDHeader] = []string{x.requestID()}
	x.rw.WriteHeader(http.StatusNoContent)
}

// testWebhook serves POST /v1/webhook/test (no body): 202 {event_id}.
func testWebhook(x *exchange) {
	a := x.a
	id, err := a.eng.Webhooks.Test(x.r.Context(), x.acct)
	if err != nil {
		x.engineError(err)
		return
	}
	x.reply(http.StatusAccepted, &wire.WebhookTestResult{EventID: id})
}
