package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"strings"
	"text/tabwriter"

	"github.com/leashd/leash/client"
)

// verb is one command: its positional arguments, flags and action, and for its --help
// the synopsis (its line of Usage, without "leash ") and what it does.
type verb struct {
	args     string
	min, max int
	flags    func(*flag.FlagSet, *flags)
	run      func(context.Context, *command, []string, *flags) int
	synopsis string
	about    string
}

func noFlags(*flag.FlagSet, *flags) {}

func checkFlags(fs *flag.FlagSet, f *flags) {
	fs.StringVar(&f.algorithm, "algorithm", "", "fixed_window, sliding_window or token_bucket")
	fs.Int64Var(&f.limit, "limit", 0, "the limit (else the namespace's rule)")
	fs.Int64Var(&f.windowMS, "window-ms", 0, "the window in ms (else the namespace's rule)")
}

var verbs map[string]verb

// order is the verbs' order in the help texts (Usage's).
var order = []string{"limit", "reset", "lease acquire", "lease release", "lease renew", "rules list", "rules set",
	"rules delete", "stats", "webhook get", "webhook set", "webhook delete", "webhook test"}

func init() {
	verbs = map[string]verb{
		"limit": {"NAMESPACE KEY", 2, 2, func(fs *flag.FlagSet, f *flags) {
			checkFlags(fs, f)
			fs.Int64Var(&f.cost, "cost", 1, "units to spend (0 looks without spending)")
		}, runLimit,
			"limit NAMESPACE KEY [--algorithm A] [--limit N] [--window-ms MS] [--cost N]",
			"check KEY's counter in NAMESPACE and spend COST on it when allowed (POST /v1/limit)"},
		"reset": {"NAMESPACE KEY", 2, 2, func(fs *flag.FlagSet, f *flags) {
			fs.StringVar(&f.algorithm, "algorithm", "", "the counter's algorithm (else the rule's, else sliding_window)")
			fs.Int64Var(&f.windowMS, "window-ms", 0, "the counter's window in ms (else the rule's)")
		}, runReset,
			"reset NAMESPACE KEY [--algorithm A] [--window-ms MS]",
			"clear KEY's counter in NAMESPACE (POST /v1/limit/reset)"},
		"lease acquire": {"NAMESPACE KEY", 2, 2, func(fs *flag.FlagSet, f *flags) {
			fs.Int64Var(&f.limit, "limit", 0, "most leases held at once (else the concurrent rule)")
			fs.Int64Var(&f.windowMS, "window-ms", 0, "time-to-live in ms (else the concurrent rule)")
		}, runAcquire,
			"lease acquire NAMESPACE KEY [--limit N] [--window-ms MS]",
			"take one of KEY's concurrent slots and print its lease id (POST /v1/leases)"},
		"lease release": {"LEASE_ID", 1, 1, noFlags, runRelease,
			"lease release LEASE_ID",
			"give a lease back (DELETE /v1/leases/{id})"},
		"lease renew": {"LEASE_ID", 1, 1, func(fs *flag.FlagSet, f *flags) {
			fs.Int64Var(&f.windowMS, "window-ms", 0, "new time-to-live in ms (else the lease's own)")
		}, runRenew,
			"lease renew LEASE_ID [--window-ms MS]",
			"extend a lease still held (POST /v1/leases/{id}/renew)"},
		"rules list": {"NAMESPACE", 1, 1, noFlags, runRulesList,
			"rules list NAMESPACE",
			"show NAMESPACE's rate and concurrent rules (GET /v1/namespaces/{ns}/rules)"},
		"rules set": {"NAMESPACE", 1, 1, func(fs *flag.FlagSet, f *flags) {
			checkFlags(fs, f)
			fs.StringVar(&f.name, "name", "", "the rule's name")
			fs.Var(&f.overrides, "override", "KEY=LIMIT[:WINDOW_MS], a key's own limit; repeatable")
		}, runRulesSet,
			"rules set NAMESPACE --algorithm A --limit N --window-ms MS [--name NAME] [--override KEY=LIMIT[:WINDOW_MS]]...",
			"create or replace NAMESPACE's rate rule, or its concurrent rule with --algorithm concurrent_limit (POST /v1/namespaces/{ns}/rules)"},
		"rules delete": {"NAMESPACE rate|concurrent", 2, 2, noFlags, runRulesDelete,
			"rules delete NAMESPACE rate|concurrent",
			"delete one of NAMESPACE's rules (DELETE /v1/namespaces/{ns}/rules/{kind})"},
		"stats": {"NAMESPACE", 1, 1, noFlags, runStats,
			"stats NAMESPACE",
			"the last 30 days as a bar chart, the month against quota and hard cap (GET /v1/namespaces/{ns}/stats)"},
		"webhook get": {"no arguments", 0, 0, noFlags, runWebhookGet,
			"webhook get", "print the account's webhook URL (GET /v1/webhook)"},
		"webhook set": {"URL", 1, 1, noFlags, runWebhookSet,
			"webhook set URL", "set the account's webhook and print its signing secret, shown only now (PUT /v1/webhook)"},
		"webhook delete": {"no arguments", 0, 0, noFlags, runWebhookDelete,
			"webhook delete", "remove the account's webhook (DELETE /v1/webhook)"},
		"webhook test": {"no arguments", 0, 0, noFlags, runWebhookTest,
			"webhook test", "queue a test delivery to the webhook (POST /v1/webhook/test)"},
	}
	addAccountVerbs()
	addAuditVerbs()
	addBackupVerb()
}

func runLimit(ctx context.Context, c *command, a []string, f *flags) int {
	res, err := c.c.Limit(ctx, a[0], a[1], f.opts...)
	if err != nil {
		return c.fail(err)
	}
	if res.Allowed {
		c.print(res, fmt.Sprintf("allowed: %d of %d remaining, resets in %s\n", res.Remaining, res.Limit, ms(res.ResetMS)))
		return ExitOK
	}
	c.print(res, fmt.Sprintf("denied: limit %d, retry after %s\n", res.Limit, res.RetryAfter()))
	return ExitDenied
}

func runReset(ctx context.Context, c *command, a []string, f *flags) int {
	ok, err := c.c.Reset(ctx, a[0], a[1], f.opts...)
	if err != nil {
		return c.fail(err)
	}
	text := "reset\n"
	if !ok {
		text = "nothing to reset: the counter holds no state\n"
	}
	c.print(map[string]bool{"reset": ok}, text)
	return ExitOK
}

func runAcquire(ctx context.Context, c *command, a []string, f *flags) int {
	l, err := c.c.Acquire(ctx, a[0], a[1], f.opts...)
	var de *client.DeniedError
	if errors.As(err, &de) {
		c.print(map[string]any{"allowed": false, "active": de.Active, "limit": de.Limit, "reset_ms": de.Reset.Milliseconds()},
			fmt.Sprintf("denied: %d of %d held, next slot in %s\n", de.Active, de.Limit, de.Reset))
		return ExitDenied
	}
	if err != nil {
		return c.fail(err)
	}
	c.print(map[string]any{"allowed": true, "lease_id": l.ID, "active": l.Active, "limit": l.Limit, "reset_ms": l.TTL.Milliseconds()},
		fmt.Sprintf("%s\nacquired: %d of %d held, expires in %s unless renewed\n", l.ID, l.Active, l.Limit, l.TTL))
	return ExitOK
}

func runRelease(ctx context.Context, c *command, a []string, f *flags) int {
	r, err := c.c.Release(ctx, a[0])
	if err != nil {
		return c.fail(err)
	}
	text := fmt.Sprintf("released: %d still held\n", r.Active)
	if !r.Released {
		text = fmt.Sprintf("not held (expired or already released): %d held\n", r.Active)
	}
	c.print(r, text)
	return ExitOK
}

func runRenew(ctx context.Context, c *command, a []string, f *flags) int {
	var windowMS *int64 // a flag not given is not sent; a given one is, even 0 (spec §13.5)
	if f.set["window-ms"] {
		windowMS = &f.windowMS
	}
	r, err := c.c.RenewWindowMS(ctx, a[0], windowMS)
	if err != nil {
		return c.fail(err)
	}
	if !r.Renewed {
		c.print(r, fmt.Sprintf("not held (expired or released): %d held\n", r.Active))
		return ExitDenied
	}
	c.print(r, fmt.Sprintf("renewed: expires in %s, %d held\n", ms(r.ResetMS), r.Active))
	return ExitOK
}

func runRulesList(ctx context.Context, c *command, a []string, f *flags) int {
	rules, err := c.c.Rules(ctx, a[0])
	if err != nil {
		return c.fail(err)
	}
	if rules == nil {
		rules = []client.Rule{}
	}
	var b strings.Builder
	if len(rules) == 0 {
		b.WriteString("no rules\n")
	} else {
		tw := tabwriter.NewWriter(&b, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "KIND\tALGORITHM\tLIMIT\tWINDOW\tNAME\tOVERRIDES")
		for _, r := range rules {
			kind := client.RuleKindRate
			if r.Algorithm == client.ConcurrentLimit {
				kind = client.RuleKindConcurrent
			}
			fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\t%s\n", kind, r.Algorithm, r.Limit, ms(r.WindowMS), orDash(r.Name), overrides(r.Overrides))
		}
		tw.Flush()
	}
	c.print(map[string]any{"namespace": a[0], "rules": rules}, b.String())
	return ExitOK
}

func runRulesSet(ctx context.Context, c *command, a []string, f *flags) int {
	for _, need := range []string{"algorithm", "limit", "window-ms"} {
		if !f.set[need] {
			return c.usage("rules set needs --%s", need)
		}
	}
	r, created, err := c.c.SetRule(ctx, a[0], client.Rule{Algorithm: f.algorithm, Limit: f.limit, WindowMS: f.windowMS,
		Name: f.name, Overrides: f.overrides})
	if err != nil {
		return c.fail(err)
	}
	what := "replaced"
	if created {
		what = "created"
	}
	c.print(r, fmt.Sprintf("%s: %s %s, limit %d per %s\n", what, r.Namespace, r.Algorithm, r.Limit, ms(r.WindowMS)))
	return ExitOK
}

func runRulesDelete(ctx context.Context, c *command, a []string, f *flags) int {
	if a[1] != client.RuleKindRate && a[1] != client.RuleKindConcurrent {
		return c.usage("the rule kind is rate or concurrent, not %q", a[1])
	}
	ok, err := c.c.DeleteRule(ctx, a[0], a[1])
	if err != nil {
		return c.fail(err)
	}
	text := "deleted\n"
	if !ok {
		text = "no such rule\n"
	}
	c.print(map[string]bool{"deleted": ok}, text)
	return ExitOK
}

func runWebhookGet(ctx context.Context, c *command, a []string, f *flags) int {
	w, ok, err := c.c.Webhook(ctx)
	if err != nil {
		return c.fail(err)
	}
	if !ok {
		fmt.Fprintf(c.stderr, "leash %s: %s (404): no webhook is configured\n", c.verb, client.CodeWebhookNotFound)
		return ExitService
	}
	c.print(w, w.URL+"\n")
	return ExitOK
}

func runWebhookSet(ctx context.Context, c *command, a []string, f *flags) int {
	w, err := c.c.SetWebhook(ctx, a[0])
	if err != nil {
		return c.fail(err)
	}
	c.print(w, fmt.Sprintf("webhook: %s\nsecret:  %s   (shown only now: verify deliveries with it)\n", w.URL, w.Secret))
	return ExitOK
}

func runWebhookDelete(ctx context.Context, c *command, a []string, f *flags) int {
	if err := c.c.DeleteWebhook(ctx); err != nil {
		return c.fail(err)
	}
	c.print(map[string]bool{"deleted": true}, "deleted\n")
	return ExitOK
}

func runWebhookTest(ctx context.Context, c *command, a []string, f *flags) int {
	id, err := c.c.TestWebhook(ctx)
	if err != nil {
		return c.fail(err)
	}
	c.print(map[string]string{"event_id": id}, "queued "+id+"\n")
	return ExitOK
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func overrides(os []client.Override) string {
	if len(os) == 0 {
		return "-"
	}
	parts := make([]string, len(os))
	for i, o := range os {
		parts[i] = fmt.Sprintf("%q=%d", o.Key, o.Limit) // quoted: a key may hold '=' or ','
		if o.WindowMS != nil {
			parts[i] += "/" + ms(*o.WindowMS)
		}
	}
	return strings.Join(parts, ",")
}
