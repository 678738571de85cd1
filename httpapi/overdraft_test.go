package httpapi_test

import (
	"testing"
	"time"
)

// TestOverdraftTokenBudget replays an AI gateway's token budget on POST /v1/limit (spec
// §4.12): 1000 tokens a minute, a check of 1, a charge of 5000 made after the response,
// then a check again. With "overdraft": true the charge is counted although it is denied,
// so the budget is spent until the window ends; without it the charge is lost.
func TestOverdraftTokenBudget(t *testing.T) {
	e := newEnv(t, nil) // t0 is minute-aligned
	ovd := func(key, extra string) string {
		b := `{"namespace":"ns","key":"` + key + `","algorithm":"fixed_window","limit":1000,"window_ms":60000`
		if extra != "" {
			b += "," + extra
		}
		return b + "}"
	}
	r := e.post(pLimit, keyAcme, ovd("ai-on", `"cost":0,"overdraft":true`)) // the check before the request
	mustBody(t, r, 200, `{"allowed":true,"limit":1000,"remaining":1000,"reset_ms":0}`)
	r = e.post(pLimit, keyAcme, ovd("ai-on", `"cost":1,"overdraft":true`))
	mustBody(t, r, 200, `{"allowed":true,"limit":1000,"remaining":999,"reset_ms":60000}`)
	r = e.post(pLimit, keyAcme, ovd("ai-on", `"cost":5000,"overdraft":true`))
	mustBody(t, r, 200, `{"allowed":false,"limit":1000,"remaining":0,"reset_ms":60000}`)
	wantHeaders(t, r, map[string]string{"Retry-After": "60"})
	e.clock.Advance(30 * time.Second)
	r = e.post(pLimit, keyAcme, ovd("ai-on", `"cost":1,"overdraft":true`))
	mustBody(t, r, 200, `{"allowed":false,"limit":1000,"remaining":0,"reset_ms":30000}`)
	r = e.post(pLimit, keyAcme, ovd("ai-on", `"cost":0`))
	mustBody(t, r, 200, `{"allowed":false,"limit":1000,"remaining":0,"reset_ms":30000}`)
	e.clock.Advance(30 * time.Second) // the next window
	r = e.post(pLimit, keyAcme, ovd("ai-on", `"cost":1,"overdraft":true`))
	mustBody(t, r, 200, `{"allowed":true,"limit":1000,"remaining":999,"reset_ms":60000}`)

	// Without overdraft (false, or absent) a cost above the limit is refused and a cost
	// above what is left spends nothing: the budget outlives the charge.
	r = e.post(pLimit, keyAcme, ovd("ai-off", `"cost":1,"overdraft":false`))
	mustBody(t, r, 200, `{"allowed":true,"limit":1000,"remaining":999,"reset_ms":60000}`)
	mustError(t, e.post(pLimit, keyAcme, ovd("ai-off", `"cost":5000`)), 400, "invalid_request", "cost")
	r = e.post(pLimit, keyAcme, ovd("ai-off", `"cost":1000`))
	mustBody(t, r, 200, `{"allowed":false,"limit":1000,"remaining":999,"reset_ms":60000}`)
	r = e.post(pLimit, keyAcme, ovd("ai-off", `"cost":1`))
	mustBody(t, r, 200, `{"allowed":true,"limit":1000,"remaining":998,"reset_ms":60000}`)

	// Bounds and types.
	mustError(t, e.post(pLimit, keyAcme, ovd("k", `"cost":2000000001,"overdraft":true`)), 400, "invalid_request", "cost")
	mustError(t, e.post(pLimit, keyAcme, ovd("k", `"overdraft":1`)), 400, "invalid_request", "overdraft")
	mustError(t, e.post(pLimit, keyAcme, ovd("k", `"overdraft":true,"overdraft":true`)), 400, "invalid_request", "duplicate")
}
