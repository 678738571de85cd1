// Package console holds the web console's test in a real browser: headless Chromium,
// driven with chromedp, against the built `leash serve` (spec §16).
package console

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"

	"github.com/leashd/leash/testkit/leashproc"
)

var binary string

func TestMain(m *testing.M) { os.Exit(leashproc.Main(m, &binary)) }

// Text an account writes through the API, wherever the API takes it. Run as code, each
// sets window.__xss and writes a console error, which fails the test either way.
const (
	xssImg    = `<img src=x onerror="window.__xss=1;console.error('xss')">`
	xssScript = `"><script>window.__xss=2;console.error('xss')</script>`
	xssURL    = `javascript:window.__xss=3`
)

const (
	operatorKey = "ops-key-console-test"
	configBody  = `
plans:
  tiny: {algorithms: [fixed_window, sliding_window, token_bucket], concurrent_limit: true, webhooks: true, monthly_quota: 10, hard_cap: 15}
  nohooks: {algorithms: [fixed_window], monthly_quota: 1000}
accounts:
  - {id: cfg, plan: pro, api_keys: [cfg-key-console-test]}
operators:
  - {id: ops, api_keys: [` + operatorKey + `]}
webhooks: {allow_http: true, allow_private_targets: true}
`
)

// shotDir is where the screenshots go (ignored by git).
func shotDir(t *testing.T) string {
	_, file, _, _ := runtime.Caller(0)
	dir := filepath.Join(filepath.Dir(file), "screenshots")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

// chromium finds the browser; without one the test skips, except in CI (CI=true), where
// it fails.
func chromium(t *testing.T) string {
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome", "google-chrome-stable"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	msg := "no Chromium on PATH (apt-get install chromium): the console's browser test cannot run"
	if os.Getenv("CI") == "true" {
		t.Fatal("CI: " + msg)
	}
	t.Skip("\n\n!!! SKIPPED: " + msg + "\n")
	return ""
}

// browser is one headless Chromium with a fresh profile; each tab has its own session
// storage, so each tab is one signed-in person.
type browser struct {
	t      *testing.T
	ctx    context.Context
	origin string

	mu       sync.Mutex
	problems []string
}

func newBrowser(t *testing.T, origin string) *browser {
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chromium(t)), chromedp.NoSandbox, chromedp.DisableGPU,
		chromedp.Flag("disable-background-networking", true), chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1280, 800))
	actx, cancel := chromedp.NewExecAllocator(context.Background(), opts...)
	t.Cleanup(cancel)
	ctx, cancelBrowser := chromedp.NewContext(actx)
	t.Cleanup(cancelBrowser)
	if err := chromedp.Do(ctx); err != nil { // start the browser
		t.Fatal(err)
	}
	b := &browser{t: t, ctx: ctx, origin: origin}
	t.Cleanup(func() {
		b.mu.Lock()
		defer b.mu.Unlock()
		for _, p := range b.problems {
			t.Error(p)
		}
	})
	return b
}

func (b *browser) problem(format string, args ...any) {
	b.mu.Lock()
	b.problems = append(b.problems, fmt.Sprintf(format, args...))
	b.mu.Unlock()
}

// tab is one browser tab; every console error, uncaught exception and request to
// another origin in it fails the test.
type tab struct {
	b    *browser
	t    *testing.T
	ctx  context.Context
	name string
}

func (b *browser) tab(name string) *tab { return b.tabTo(name, b.problem) }

// tabTo opens a tab whose problems go to report.
func (b *browser) tabTo(name string, report func(format string, args ...any)) *tab {
	ctx, cancel := chromedp.NewContext(b.ctx)
	b.t.Cleanup(cancel)
	tb := &tab{b: b, t: b.t, ctx: ctx, name: name}
	if err := chromedp.Listen(ctx, func(ev any) {
		if e, ok := ev.(*network.EventRequestWillBeSent); ok {
			u := e.Request.URL
			if !strings.HasPrefix(u, b.origin+"/") && !strings.HasPrefix(u, "data:") && u != "about:blank" {
				report("%s: request to another origin: %s", name, u)
			}
		}
	}); err != nil {
		b.t.Fatal(err)
	}
	go func() {
		for m, err := range chromedp.Console(ctx) {
			if err != nil {
				return
			}
			// The API's 4xx answers the console shows as results are logged by the
			// browser's network layer; anything else at error level is a fault.
			if m.IsException() || m.Type == chromedp.ConsoleError && m.Source != "network" {
				report("%s: browser console: %s (%s:%d)", name, m, m.URL, m.Line)
			}
		}
	}()
	tb.do(chromedp.Navigate(b.origin + "/console/"))
	return tb
}

func (tb *tab) do(actions ...chromedp.Action[chromedp.Void]) {
	tb.t.Helper()
	ctx, cancel := context.WithTimeout(tb.ctx, 20*time.Second)
	defer cancel()
	if err := chromedp.Do(ctx, actions...); err != nil {
		tb.t.Fatalf("%s: %v", tb.name, err)
	}
}

// eval runs a JavaScript expression and decodes its value into T.
func eval[T any](tb *tab, js string, opts ...chromedp.EvaluateOption) T {
	tb.t.Helper()
	ctx, cancel := context.WithTimeout(tb.ctx, 20*time.Second)
	defer cancel()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[T](js, opts...))
	if err != nil {
		tb.t.Fatalf("%s: %s: %v", tb.name, js, err)
	}
	return v
}

// until waits up to 15 s for a JavaScript expression to be truthy.
func (tb *tab) until(what, js string) {
	tb.t.Helper()
	ctx, cancel := context.WithTimeout(tb.ctx, 15*time.Second)
	defer cancel()
	if _, err := chromedp.Run(ctx, chromedp.Poll[chromedp.Void](js, chromedp.WithPollingInterval(50*time.Millisecond))); err != nil {
		body := eval[string](tb, `document.querySelector('main').innerText`)
		tb.t.Fatalf("%s: waiting for %s (%s): %v\npage:\n%s", tb.name, what, js, err, body)
	}
}

func q(s string) string { b, _ := json.Marshal(s); return string(b) }

// fill sets the value of the input sel.
func (tb *tab) fill(sel, value string) {
	tb.t.Helper()
	tb.until("field "+sel, `document.querySelector(`+q(sel)+`)`)
	eval[bool](tb, `((e) => { e.focus(); e.value = `+q(value)+`; e.dispatchEvent(new Event('input', {bubbles: true})); return true })(document.querySelector(`+q(sel)+`))`)
}

// press clicks the button inside scope whose text is text.
func (tb *tab) press(scope, text string) {
	tb.t.Helper()
	js := `[...document.querySelectorAll(` + q(scope+" button") + `)].find(b => b.textContent.trim() === ` + q(text) + `)`
	tb.until("button "+text, js)
	eval[bool](tb, `(`+js+`).click(), true`)
}

// open opens a console route (#/...).
func (tb *tab) open(route string) {
	tb.t.Helper()
	eval[bool](tb, `location.hash = `+q(route)+`, true`)
}

// text is the visible text of the page's main element.
func (tb *tab) text() string { return eval[string](tb, `document.querySelector('main').innerText`) }

// shot saves a screenshot of the view at 1280x800 and 390x844, and checks that every
// input is labelled and no payload ran.
func (tb *tab) shot(view string) {
	tb.t.Helper()
	tb.safe(view)
	for _, size := range [][2]int64{{1280, 800}, {390, 844}} {
		var png []byte
		ctx, cancel := context.WithTimeout(tb.ctx, 20*time.Second)
		err := chromedp.Do(ctx, chromedp.EmulateViewport(size[0], size[1]),
			chromedp.Evaluate[chromedp.Void](`document.activeElement?.blur(), window.scrollTo(0, 0)`), chromedp.Sleep(150*time.Millisecond))
		if err == nil {
			png, err = chromedp.Run(ctx, chromedp.CaptureScreenshot())
		}
		cancel()
		if err != nil {
			tb.t.Fatalf("%s: screenshot %s: %v", tb.name, view, err)
		}
		name := filepath.Join(shotDir(tb.t), fmt.Sprintf("%s-%dx%d.png", view, size[0], size[1]))
		if err := os.WriteFile(name, png, 0o644); err != nil {
			tb.t.Fatal(err)
		}
		if size[0] == 390 {
			// usable at phone width: nothing wider than the screen but scrolling tables
			if w := eval[int](tb, `document.documentElement.scrollWidth`); w > 392 {
				tb.t.Errorf("%s: %s is %d px wide at 390 px", tb.name, view, w)
			}
		}
	}
	tb.do(chromedp.EmulateViewport(1280, 800))
}

// safe checks that no payload ran, that none became an element, and that every input
// and select has a label.
func (tb *tab) safe(view string) {
	tb.t.Helper()
	if v := eval[string](tb, `String(window.__xss)`); v != "undefined" {
		tb.t.Fatalf("%s: %s: a payload ran (window.__xss = %s)", tb.name, view, v)
	}
	if n := eval[int](tb, `document.querySelectorAll('main img, main script, main iframe, main [onerror]').length`); n != 0 {
		tb.t.Fatalf("%s: %s: %d elements came from markup in data", tb.name, view, n)
	}
	unlabelled := eval[[]string](tb, `[...document.querySelectorAll('input, select')].filter(i => i.labels.length === 0 && !i.getAttribute('aria-label')).map(i => i.outerHTML)`)
	if len(unlabelled) > 0 {
		tb.t.Errorf("%s: %s: inputs without a label: %v", tb.name, view, unlabelled)
	}
}

// api calls Leash directly with key.
func api(t *testing.T, p *leashproc.Proc, method, path, key, body string) (int, map[string]any) {
	t.Helper()
	return leashproc.Call(t, method, p.URL+path, key, body)
}

func mustAPI(t *testing.T, p *leashproc.Proc, want int, method, path, key, body string) map[string]any {
	t.Helper()
	code, out := api(t, p, method, path, key, body)
	if code != want {
		t.Fatalf("%s %s: %d %v, want %d", method, path, code, out, want)
	}
	return out
}

// signIn signs the tab in with key and waits for the view at hash.
func (tb *tab) signIn(key, hash string) {
	tb.t.Helper()
	tb.until("the sign-in form", `location.hash === '#/signin' && document.querySelector('input[name="key"]')`)
	tb.fill(`input[name="key"]`, key)
	tb.press("form.signin", "Sign in")
	tb.until("signed in at "+hash, `location.hash === `+q(hash)+` && document.querySelector('.page-head h1')`)
}

// typeIn signs the tab in from the keyboard alone: the key field has the focus when the
// page opens, Enter submits.
func (tb *tab) typeIn(key, hash string) {
	tb.t.Helper()
	tb.until("the focused key field", `location.hash === '#/signin' && document.activeElement?.name === 'key'`)
	tb.do(chromedp.KeyEvent(key + "\r"))
	tb.until("signed in at "+hash, `location.hash === `+q(hash)+` && document.querySelector('.page-head h1')`)
}

// keyboard presses Tab until focus comes round again and fails unless every link, button,
// input and select of the page was reached.
func (tb *tab) keyboard(view string) {
	tb.t.Helper()
	const controls = `[...document.querySelectorAll('a[href], button, input, select, [tabindex="0"]')].filter(e => !e.disabled && e.offsetParent !== null)`
	n := eval[int](tb, controls+`.length`)
	for range n + 5 {
		tb.do(chromedp.KeyEvent("\t"))
		eval[bool](tb, `document.activeElement && (document.activeElement.dataset.reached = '1'), true`)
	}
	if missed := eval[[]string](tb, controls+`.filter(e => e.dataset.reached !== '1').map(e => e.outerHTML.slice(0, 80))`); len(missed) > 0 {
		tb.t.Fatalf("%s: %s: Tab never reaches %v", tb.name, view, missed)
	}
}

// bannerState refreshes the page until the quota banner is in state.
func (tb *tab) bannerState(state string) {
	tb.t.Helper()
	ctx, cancel := context.WithTimeout(tb.ctx, 15*time.Second)
	defer cancel()
	js := `(document.querySelector('[data-testid="refresh"]')?.click(), document.querySelector('#quota-banner')?.dataset.state === ` + q(state) + `)`
	if _, err := chromedp.Run(ctx, chromedp.Poll[chromedp.Void](js, chromedp.WithPollingInterval(300*time.Millisecond))); err != nil {
		tb.t.Fatalf("%s: the banner never showed %q: %v\n%s", tb.name, state, err, tb.text())
	}
}

func hasText(tb *tab, sel, want string) string {
	return `(document.querySelector(` + q(sel) + `)?.textContent ?? '').includes(` + q(want) + `)`
}

// spend sends n checks for the tenant, the fifth and later on one key denied (each counts
// once in usage, allowed or not, spec §7.1).
func spend(t *testing.T, p *leashproc.Proc, key string, n int) {
	t.Helper()
	for range n {
		mustAPI(t, p, 200, "POST", "/v1/limit", key, `{"namespace":"load","key":"k","limit":4,"window_ms":600000}`)
	}
}

// monthTotal is the tenant's month total once the usage flushes have settled.
func monthTotal(t *testing.T, p *leashproc.Proc, key string) int {
	t.Helper()
	last, same := -1, 0
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(300 * time.Millisecond) {
		u := mustAPI(t, p, 200, "GET", "/v1/usage", key, "")
		n := int(u["month"].(map[string]any)["total"].(float64))
		if n == last {
			if same++; same == 5 { // unchanged over 1.5 s: every flush (1 s) is in
				return n
			}
		} else {
			last, same = n, 0
		}
	}
	t.Fatal("usage never settled")
	return 0
}

// TestConsoleInBrowser drives every view of the console in headless Chromium, as a
// tenant and as an operator, against a real leash serve; see the list.
func TestConsoleInBrowser(t *testing.T) {
	start := time.Now()
	p := leashproc.Start(t, binary, []string{"--config", leashproc.Config(t, configBody)})
	deliveries := make(chan string, 16)
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		deliveries <- r.Header.Get("Leash-Event-Type")
		w.WriteHeader(http.StatusNoContent)
	}))
	defer hook.Close()

	// The operator makes the tenant: account acme on plan tiny (quota 10, hard cap 15).
	mustAPI(t, p, 201, "POST", "/v1/admin/accounts", operatorKey, `{"id":"acme","plan":"tiny"}`)
	key := mustAPI(t, p, 201, "POST", "/v1/admin/accounts/acme/keys", operatorKey, `{"name":"first"}`)["key"].(string)

	b := newBrowser(t, p.URL)
	ta := b.tab("tenant")

	// Sign-in: a refused key is explained in words; the key lives in session storage.
	ta.until("the sign-in form", `document.querySelector('input[name="key"]')`)
	ta.shot("signin")
	ta.fill(`input[name="key"]`, "lsh_no-such-key")
	ta.press("form.signin", "Sign in")
	ta.until("the refusal in words", hasText(ta, `[data-testid="signin-msg"]`, "does not know this key"))
	ta.signIn(key, "#/overview")
	if got := eval[string](ta, `sessionStorage.getItem('leash.console.key') + '|' + localStorage.length + '|' + document.cookie`); got != key+"|0|" {
		t.Fatalf("the key is kept as %q, want in session storage only", got)
	}
	ta.bannerState("normal")
	ta.until("plan and cap in the banner", hasText(ta, "#quota-banner", "tiny")+` && `+hasText(ta, "#quota-banner", "Hard cap: 15"))

	// A namespace: a rate rule created in place, the API's messages beside the fields.
	ta.open("#/ns/api")
	rate := `form[data-kind="rate"]`
	ta.fill(rate+` input[name="limit"]`, "0")
	ta.fill(rate+` input[name="window_ms"]`, "60000")
	ta.press(rate, "Create rule")
	beside := func(input, want string) string {
		return `(() => { const i = document.querySelector(` + q(input) + `); return i.getAttribute('aria-invalid') === 'true' && document.getElementById(i.getAttribute('aria-describedby')).textContent.includes(` + q(want) + `) })()`
	}
	ta.until("the limit's message beside it", beside(rate+` input[name="limit"]`, "limit must be an integer from 1 to"))
	ta.fill(rate+` input[name="limit"]`, "5")
	ta.fill(rate+` input[name="name"]`, xssScript)
	ta.press(rate, "Add override")
	ta.fill(rate+` input[name="override-key"]`, xssImg)
	ta.fill(rate+` input[name="override-limit"]`, "0")
	ta.press(rate, "Create rule")
	ta.until("the override's message beside it", beside(rate+` input[name="override-limit"]`, "overrides[0].limit"))
	ta.fill(rate+` input[name="override-limit"]`, "2")
	ta.press(rate, "Create rule")
	ta.until("the rule created", hasText(ta, `[data-testid="rules-status"]`, "Rule created"))
	readRate := func() map[string]any {
		rules := mustAPI(t, p, 200, "GET", "/v1/namespaces/api/rules", key, "")["rules"].([]any)
		if len(rules) == 0 {
			t.Fatal("no rule read back")
		}
		return rules[0].(map[string]any)
	}
	r := readRate()
	if r["name"] != xssScript || r["limit"] != 5.0 || r["window_ms"] != 60000.0 {
		t.Fatalf("rule read back: %v", r)
	}
	if o := r["overrides"].([]any)[0].(map[string]any); o["key"] != xssImg || o["limit"] != 2.0 {
		t.Fatalf("override read back: %v", o)
	}
	// Edited in place: the override's limit.
	ta.until("the saved rule in the form", hasText(ta, rate+" h3", xssScript))
	ta.fill(rate+` input[name="override-limit"]`, "3")
	ta.press(rate, "Save rule")
	ta.until("the rule saved", hasText(ta, `[data-testid="rules-status"]`, "Rule saved"))
	if o := readRate()["overrides"].([]any)[0].(map[string]any); o["limit"] != 3.0 {
		t.Fatalf("edited override read back: %v", o)
	}

	// The concurrent rule with an override, then leases of a key.
	conc := `form[data-kind="concurrent"]`
	ta.fill(conc+` input[name="limit"]`, "4")
	ta.fill(conc+` input[name="window_ms"]`, "60000")
	ta.press(conc, "Add override")
	ta.fill(conc+` input[name="override-key"]`, xssURL)
	ta.fill(conc+` input[name="override-limit"]`, "2")
	ta.press(conc, "Create rule")
	ta.until("the concurrent rule", hasText(ta, `[data-testid="rules-status"]`, "Rule created")+` && document.querySelector('form[data-kind="concurrent"] h3').textContent.includes('set')`)
	mustAPI(t, p, 200, "POST", "/v1/leases", key, fmt.Sprintf(`{"namespace":"api","key":%s}`, q(xssURL)))
	ta.fill(`form[aria-labelledby="leases-h"] input[name="key"]`, xssURL)
	ta.press(`form[aria-labelledby="leases-h"]`, "Show leases")
	ta.until("the key's leases", hasText(ta, `[data-testid="leases-result"]`, "1 active of 2 allowed")+` && `+hasText(ta, `[data-testid="leases-result"]`, xssURL))

	// Try a check, under the rule and under the override; reset a key.
	check := `form[aria-labelledby="check-h"]`
	ta.fill(check+` input[name="key"]`, "user-1")
	ta.press(check, "Check")
	ta.until("an allowed verdict", `document.querySelector('[data-testid="check-result"] .verdict')?.dataset.allowed === 'true' && `+hasText(ta, `[data-testid="check-result"]`, "Remaining4"))
	ta.fill(check+` input[name="key"]`, xssImg)
	ta.press(check, "Check")
	ta.until("the override's verdict", hasText(ta, `[data-testid="check-result"]`, "Limit3"))
	reset := `form[aria-labelledby="reset-h"]`
	ta.fill(reset+` input[name="key"]`, "user-1")
	ta.press(reset, "Reset")
	ta.until("the reset", hasText(ta, `[data-testid="reset-result"]`, "Counter reset"))
	ta.press(reset, "Reset")
	ta.until("nothing left to reset", hasText(ta, `[data-testid="reset-result"]`, "Nothing to reset"))
	ta.keyboard("namespace")
	ta.shot("namespace")

	// Deleted in place.
	ta.press(conc, "Delete rule")
	ta.until("the rule deleted", hasText(ta, `[data-testid="rules-status"]`, "Rule deleted"))
	if rules := mustAPI(t, p, 200, "GET", "/v1/namespaces/api/rules", key, "")["rules"].([]any); len(rules) != 1 {
		t.Fatalf("after deleting the concurrent rule: %v", rules)
	}

	// A namespace named with markup: the API refuses it; the page shows the name as text.
	mustAPI(t, p, 400, "GET", "/v1/namespaces/"+url.PathEscape(xssImg)+"/rules", key, "")
	ta.open("#/ns/" + url.PathEscape(xssImg))
	ta.until("the refusal and the name as text", hasText(ta, ".page-head h1", xssImg)+` && document.querySelector('[data-testid="page-error"]').textContent !== ''`)
	ta.safe("namespace-markup")

	// The webhook: a javascript: URL refused beside the field; the secret shown once.
	ta.open("#/webhook")
	ta.until("the webhook form", `document.querySelector('input[name="url"]')`)
	ta.fill(`input[name="url"]`, xssURL)
	ta.press(`form[aria-labelledby="wh-set"]`, "Save webhook")
	ta.until("the URL's refusal beside it", beside(`input[name="url"]`, ""))
	hookURL := hook.URL + `/hook?q="><script>window.__xss=4</script>`
	ta.fill(`input[name="url"]`, hookURL)
	ta.press(`form[aria-labelledby="wh-set"]`, "Save webhook")
	ta.until("the secret", `/^whsec_/.test(document.querySelector('[data-testid="webhook-secret"]')?.textContent ?? '')`)
	secret := eval[string](ta, `document.querySelector('[data-testid="webhook-secret"]').textContent`)
	ta.until("the warning", hasText(ta, ".once", "will not show this secret again"))
	ta.press(".once", "Copy")
	ta.until("copied or selected", `document.querySelector('.once .status').textContent !== ''`)
	got := mustAPI(t, p, 200, "GET", "/v1/webhook", key, "")
	if _, ok := got["secret"]; ok {
		t.Fatal("GET /v1/webhook shows the secret")
	}
	ta.until("the URL as text", hasText(ta, `[data-testid="webhook-url"]`, got["url"].(string)))
	ta.shot("webhook")
	ta.press(`[data-testid="webhook-current"]`, "Send a test event")
	ta.until("the test queued", hasText(ta, `[data-testid="webhook-status"]`, "queued"))
	select {
	case ev := <-deliveries:
		if ev != "webhook.test" {
			t.Fatalf("delivered %q", ev)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the test event was not delivered")
	}
	ta.open("#/keys")
	ta.until("the keys page", `document.querySelector('[data-testid="keys"]')`)
	ta.open("#/webhook")
	ta.until("the webhook again", `document.querySelector('[data-testid="webhook-url"]')`)
	if n := eval[int](ta, `document.querySelectorAll('[data-testid="webhook-secret"]').length + (document.body.innerText.includes(`+q(secret)+`) ? 1 : 0)`); n != 0 {
		t.Fatal("the secret is shown a second time")
	}
	ta.press(`[data-testid="webhook-current"]`, "Remove webhook")
	ta.until("the webhook removed", hasText(ta, `[data-testid="webhook-current"]`, "No webhook is set"))
	mustAPI(t, p, 404, "GET", "/v1/webhook", key, "")

	// API keys: one created (shown once) and revoked; the API refuses it.
	ta.open("#/keys")
	ta.until("this session's key listed", hasText(ta, `[data-testid="keys"]`, "this session"))
	ta.fill(`form[aria-labelledby="key-new"] input[name="name"]`, xssImg)
	ta.press(`form[aria-labelledby="key-new"]`, "Create key")
	ta.until("the new key", `/^lsh_/.test(document.querySelector('[data-testid="new-key"]')?.textContent ?? '')`)
	newKey := eval[string](ta, `document.querySelector('[data-testid="new-key"]').textContent`)
	ta.until("its name as text", hasText(ta, `[data-testid="keys"]`, xssImg))
	ta.shot("keys")
	acct := mustAPI(t, p, 200, "GET", "/v1/account", newKey, "")
	if acct["id"] != "acme" {
		t.Fatalf("the new key is %v's", acct["id"])
	}
	keyID := eval[string](ta, `[...document.querySelectorAll('[data-testid="keys"] tr[data-key-id]')].find(r => r.textContent.includes(`+q(xssImg)+`)).dataset.keyId`)
	row := `tr[data-key-id="` + keyID + `"]`
	ta.press(row, "Revoke")
	ta.press(row, "Confirm revoke")
	ta.until("the key revoked", hasText(ta, `[data-testid="keys-status"]`, "revoked"))
	mustAPI(t, p, 401, "GET", "/v1/account", newKey, "")
	// A key named with markup that stays, for the operator's view.
	mustAPI(t, p, 201, "POST", "/v1/keys", key, fmt.Sprintf(`{"name":%s}`, q(xssScript)))

	// The operator: accounts with usage, sortable; an account created, re-planned,
	// suspended and resumed; keys issued.
	to := b.tab("operator")
	to.signIn(operatorKey, "#/admin")
	to.until("the accounts", hasText(to, `[data-testid="accounts"]`, "acme")+` && `+hasText(to, `[data-testid="accounts"]`, "cfg"))
	to.until("sorted by usage", `(document.querySelector('button[data-sort="usage"]').click(), document.querySelector('button[data-sort="usage"]').closest('th').getAttribute('aria-sort') === 'ascending')`)
	eval[bool](to, `document.querySelector('button[data-sort="usage"]').click(), true`)
	to.until("acme first, most used", `document.querySelector('button[data-sort="usage"]').closest('th').getAttribute('aria-sort') === 'descending' && document.querySelector('[data-testid="accounts"] tbody tr').dataset.account === 'acme'`)
	to.shot("admin-accounts")
	to.fill(`input[name="id"]`, "beta")
	to.fill(`input[name="plan"]`, "gold")
	to.press(`form[aria-labelledby="acct-new"]`, "Create account")
	to.until("the unknown plan beside its field", beside(`input[name="plan"]`, "gold"))
	to.fill(`input[name="plan"]`, "nohooks")
	to.press(`form[aria-labelledby="acct-new"]`, "Create account")
	to.until("beta's page", `location.hash === '#/admin/beta' && document.querySelector('input[name="key-name"]')`)
	to.press(`form[aria-labelledby="issue-h"]`, "Issue a key")
	to.until("beta's key", `/^lsh_/.test(document.querySelector('[data-testid="new-key"]')?.textContent ?? '')`)
	betaKey := eval[string](to, `document.querySelector('[data-testid="new-key"]').textContent`)

	tb := b.tab("beta")
	tb.typeIn(betaKey, "#/overview")
	tb.keyboard("overview")
	tb.until("no hard cap said", `document.querySelector('[data-testid="no-cap"]')`)
	tb.open("#/webhook")
	tb.until("no webhooks on the plan", `document.querySelector('[data-testid="no-webhooks"]') && !document.querySelector('input[name="url"]')`)
	tb.shot("webhook-not-on-plan")
	mustAPI(t, p, 403, "PUT", "/v1/webhook", betaKey, `{"url":"https://example.com/"}`)

	to.fill(`input[name="plan"]`, "tiny")
	to.press(`form[aria-labelledby="plan-h"]`, "Change plan")
	to.until("the plan changed", hasText(to, `[data-testid="account-status"]`, "Plan changed to tiny"))
	tb.until("the webhook gate open", `(document.querySelector('[data-testid="refresh"]').click(), !document.querySelector('[data-testid="no-webhooks"]') && !!document.querySelector('input[name="url"]') && !document.querySelector('[data-testid="no-cap"]'))`)
	to.press(".controls", "Suspend account")
	to.until("suspended", hasText(to, `[data-testid="suspended"]`, "Suspended"))
	if code, out := api(t, p, "POST", "/v1/limit", betaKey, `{"namespace":"n","key":"k","limit":5,"window_ms":1000}`); code != 403 || out["code"] != "account_suspended" {
		t.Fatalf("a suspended account's check: %d %v", code, out)
	}
	// Suspended: a banner above the quota banner, in the tenant's view and on the
	// operator's page of the account; the tenant cannot issue itself a key.
	const suspendedFirst = `(() => { const s = document.querySelector('#suspended-banner'), q = document.querySelector('#quota-banner'); return !!s && !!q && !!(s.compareDocumentPosition(q) & Node.DOCUMENT_POSITION_FOLLOWING); })()`
	to.until("the operator's suspension banner", suspendedFirst)
	to.shot("admin-account")
	tb.open("#/overview")
	tb.until("the tenant's suspension banner above the quota banner", `(document.querySelector('[data-testid="refresh"]').click(), `+suspendedFirst+`)`)
	tb.shot("overview-suspended")
	mustAPI(t, p, 403, "POST", "/v1/keys", betaKey, "")
	to.press(".controls", "Resume account")
	to.until("resumed", hasText(to, `[data-testid="suspended"]`, "Active")+` && !document.querySelector('#suspended-banner')`)
	tb.until("the tenant's suspension banner gone", `(document.querySelector('[data-testid="refresh"]').click(), !document.querySelector('#suspended-banner') && !!document.querySelector('#quota-banner'))`)
	mustAPI(t, p, 200, "POST", "/v1/limit", betaKey, `{"namespace":"n","key":"k","limit":5,"window_ms":1000}`)
	// The tenant's markup in the operator's browser: acme's key names, as text.
	to.open("#/admin/acme")
	to.until("acme's keys, names as text", hasText(to, `[data-testid="account-keys"]`, xssScript))
	to.safe("admin-account-acme")
	// The operator revokes beta's key: the tenant's tab is signed out, saying why.
	to.open("#/admin/beta")
	to.until("beta's keys", `document.querySelector('[data-testid="account-keys"] tr[data-key-id]')`)
	to.press(`[data-testid="account-keys"] tr[data-key-id]`, "Revoke")
	to.press(`[data-testid="account-keys"] tr[data-key-id]`, "Confirm revoke")
	to.until("beta's key revoked", hasText(to, `[data-testid="account-status"]`, "revoked"))
	tb.until("beta signed out, told why", `(document.querySelector('[data-testid="refresh"]')?.click(), location.hash === '#/signin' && sessionStorage.getItem('leash.console.key') === null && (document.querySelector('[data-testid="signin-msg"]')?.textContent ?? '').includes('refused your key'))`)

	// Activity: the tenant's own audit log says who did each change (its key or the
	// operator), with names as text; the operator's shows every account's, or one's.
	ta.open("#/activity")
	logged := func(action, who string) string {
		return `[...document.querySelectorAll('[data-testid="activity"] tr[data-action="` + action + `"]')].some(r => r.querySelector('[data-testid="actor"]').textContent.includes(` + q(who) + `))`
	}
	ta.until("the tenant's activity", logged("account.created", "operator ops")+` && `+logged("key.issued", "operator ops")+` && `+
		logged("rule.set", "account acme with key key_")+` && `+logged("webhook.set", "account acme")+` && `+logged("key.revoked", "account acme")+` && `+
		`!document.querySelector('[data-testid="activity"] tr[data-action="account.suspended"]')`)
	ta.until("a rule's name as text", hasText(ta, `[data-testid="activity"]`, xssScript))
	ta.until("the banners above", `!!document.querySelector('#quota-banner')`)
	ta.keyboard("activity")
	ta.shot("activity")
	to.open("#/activity")
	to.until("every account's activity", logged("account.suspended", "operator ops")+` && `+logged("account.resumed", "operator ops")+` && `+
		logged("account.plan_changed", "operator ops")+` && `+logged("rule.set", "account acme")+` && `+hasText(to, `[data-testid="activity"]`, "beta"))
	to.shot("admin-activity")
	to.fill(`input[name="account"]`, "beta")
	to.press(`form[aria-label="Show one account's activity"]`, "Show")
	to.until("beta's activity only", `location.hash === '#/activity/beta' && `+logged("account.suspended", "operator ops")+` && `+
		`![...document.querySelectorAll('[data-testid="activity"] tr')].some(r => r.textContent.includes('acme'))`)
	to.safe("admin-activity-beta")

	// The banner: normal, near (80 %), over the quota, hard cap reached with the time
	// requests resume.
	ta.open("#/overview")
	ta.until("the namespaces", hasText(ta, `[data-testid="namespaces"]`, "api")+` && document.querySelector('[data-testid="namespaces"] svg.spark')`)
	total := monthTotal(t, p, key)
	if total >= 8 {
		t.Fatalf("the tenant has spent %d before the banner steps", total)
	}
	ta.bannerState("normal")
	spend(t, p, key, 8-total)
	ta.bannerState("near")
	ta.until("the near state in words", hasText(ta, "#quota-banner", "Near the monthly quota")+` && `+hasText(ta, "#quota-banner", "80 %"))
	// The overview's render time: from a reload to the banner and the namespaces shown.
	t0 := time.Now()
	ta.do(chromedp.Reload())
	ta.until("the overview rendered", `document.querySelector('#quota-banner') && document.querySelector('[data-testid="namespaces"]')`)
	wall := time.Since(t0)
	inPage := eval[float64](ta, `performance.now()`)
	t.Logf("overview rendered %v after a reload (in-page %.0f ms after navigation start, within a poll of 50 ms)", wall.Round(time.Millisecond), inPage)
	ta.shot("overview")
	spend(t, p, key, 3)
	ta.bannerState("over")
	ta.until("over in words", hasText(ta, "#quota-banner", "requests are still served"))
	ta.shot("overview-over-quota")
	spend(t, p, key, 4)
	ta.bannerState("capped")
	next := time.Now().UTC().AddDate(0, 1, 0)
	resume := fmt.Sprintf("%04d-%02d-01 00:00 UTC", next.Year(), next.Month())
	if now := time.Now().UTC(); now.Day() > 28 { // AddDate(0,1,0) may skip a short month
		resume = time.Date(now.Year(), now.Month()+1, 1, 0, 0, 0, 0, time.UTC).Format("2006-01-02 15:04") + " UTC"
	}
	ta.until("the resume time", hasText(ta, `[data-testid="resume"]`, resume))
	mustAPI(t, p, 429, "POST", "/v1/limit", key, `{"namespace":"load","key":"k","limit":1000,"window_ms":60000}`)
	ta.shot("overview-hard-cap")

	// Sign-out forgets the key.
	ta.press("#nav", "Sign out")
	ta.until("signed out", `location.hash === '#/signin' && sessionStorage.getItem('leash.console.key') === null`)
	p.NoCrash(t)
	t.Logf("browser test took %v", time.Since(start).Round(time.Millisecond))
}

// TestConsoleRoutes shows the console on by default, under its Content-Security-Policy,
// and gone with console.enabled: false; and, in the browser, that the policy stops a call
// to another origin and that the test's console watch sees it.
func TestConsoleRoutes(t *testing.T) {
	on := leashproc.Start(t, binary, nil, "LEASH_DEV_API_KEY=dev-key")
	res, err := http.Get(on.URL + "/console/")
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != 200 || !strings.Contains(res.Header.Get("Content-Security-Policy"), "connect-src 'self'") {
		t.Fatalf("GET /console/: %d, CSP %q", res.StatusCode, res.Header.Get("Content-Security-Policy"))
	}
	off := leashproc.Start(t, binary, nil, "LEASH_DEV_API_KEY=dev-key", "LEASH_CONSOLE_ENABLED=false")
	for _, path := range []string{"/console/", "/console", "/console/js/app.js"} {
		if code, out := api(t, off, "GET", path, "", ""); code != 404 || out["code"] != "not_found" {
			t.Errorf("console off: GET %s: %d %v", path, code, out)
		}
	}

	b := newBrowser(t, on.URL)
	var mu sync.Mutex
	var seen []string
	probe := b.tabTo("probe", func(format string, args ...any) {
		mu.Lock()
		seen = append(seen, fmt.Sprintf(format, args...))
		mu.Unlock()
	})
	probe.until("the sign-in form", `document.querySelector('input[name="key"]')`)
	refused := eval[bool](probe, `fetch('http://127.0.0.1:9/elsewhere').then(() => false, () => true)`, chromedp.EvalAwaitPromise)
	if !refused {
		t.Fatal("a call to another origin was not refused")
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		mu.Lock()
		got := strings.Join(seen, "\n")
		mu.Unlock()
		if strings.Contains(got, "Content Security Policy") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the console watch saw no policy violation; it saw:\n%s", got)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
