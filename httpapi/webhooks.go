package httpapi

import (
	"net/http"

	"github.com/leashd/leash/engine"
)

// The webhook endpoints (spec §8.1). PUT and POST /test are gated by the plan before the
// body is read; GET and DELETE are not, so an account moved to a plan without webhooks
// can still see and remove what it configured (its events are no longer sent).

// webhookRequest is the body of PUT /v1/webhook.
type webhookRequest struct {
	URL optionalText `json:"url"`
}

// webhookReply is the reply of GET and PUT /v1/webhook; the secret only on PUT.
type webhookReply struct {
	URL    string `json:"url"`
	Secret string `json:"secret,omitzero"`
}

// getWebhook serves GET /v1/webhook: {url}, never the secret.
func (a *API) getWebhook(x *exchange) {
	u, err := a.eng.Webhook(x.r.Context(), x.acct)
	if err != nil {
		a.engineError(x, err)
		return
	}
	a.reply(x, http.StatusOK, &webhookReply{URL: u})
}

// putWebhook serves PUT /v1/webhook {url}: {url, secret}, the only time the secret is
// shown.
func (a *API) putWebhook(x *exchange) {
	var req webhookRequest
	if err := decodeBody(x.body.Bytes(), &req); err != nil {
		a.engineError(x, err)
		return
	}
	if !req.URL.set {
		a.engineError(x, engine.Invalid("url is required"))
		return
	}
	w, err := a.eng.PutWebhook(x.r.Context(), x.acct, req.URL.s)
	if err != nil {
		a.engineError(x, err)
		return
	}
	a.reply(x, http.StatusOK, &webhookReply{URL: w.URL, Secret: w.Secret})
}

// deleteWebhook serves DELETE /v1/webhook: 204, whether or not one was set.
func (a *API) deleteWebhook(x *exchange) {
	if err := a.eng.DeleteWebhook(x.r.Context(), x.acct); err != nil {
		a.engineError(x, err)
		return
	}
	x.w.Header()[RequestIDHeader] = []string{a.requestID(x)}
	x.WriteHeader(http.StatusNoContent)
}

// testWebhook serves POST /v1/webhook/test (no body): 202 {event_id}.
func (a *API) testWebhook(x *exchange) {
	id, err := a.eng.TestWebhook(x.r.Context(), x.acct)
	if err != nil {
		a.engineError(x, err)
		return
	}
	a.reply(x, http.StatusAccepted, &struct {
		EventID string `json:"event_id"`
	}{id})
}
