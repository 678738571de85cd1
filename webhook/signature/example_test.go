package signature_test

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"time"

	"github.com/leashd/leash/webhook/signature"
)

// A webhook receiver: it verifies Leash-Signature over the raw body before trusting the
// delivery, and answers 2xx to acknowledge it (anything else is retried).
func ExampleVerify() {
	const secret = "whsec_example" // as PUT /v1/webhook returned it

	receiver := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
		if err != nil {
			http.Error(w, "cannot read", http.StatusBadRequest)
			return
		}
		if err := signature.Verify(secret, r.Header.Get(signature.Header), body, 5*time.Minute); err != nil {
			http.Error(w, "bad signature", http.StatusBadRequest)
			return
		}
		// Leash-Event-Id is the idempotency key: delivery is at least once.
		fmt.Println("verified", r.Header.Get("Leash-Event-Id"))
		w.WriteHeader(http.StatusNoContent)
	}))
	defer receiver.Close()

	// Two deliveries as Leash sends them: one signed with the secret, one tampered with.
	body := `{"id":"evt_1","type":"webhook.test","created_at":"2026-11-26T12:00:00Z","account":"acme","data":{}}`
	sig := signature.Sign(secret, time.Now(), []byte(body))
	for _, sent := range []string{body, strings.Replace(body, "acme", "evil", 1)} {
		req, _ := http.NewRequest(http.MethodPost, receiver.URL, strings.NewReader(sent))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Leash-Event-Id", "evt_1")
		req.Header.Set("Leash-Event-Type", "webhook.test")
		req.Header.Set(signature.Header, sig)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			panic(err)
		}
		resp.Body.Close()
		fmt.Println(resp.StatusCode)
	}
	// Output:
	// verified evt_1
	// 204
	// 400
}
