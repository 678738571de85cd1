package cli

import (
	"context"
	"flag"
	"fmt"
	"sort"
	"strings"
	"text/tabwriter"

	"github.com/leashd/leash/client"
)

// The audit log (spec §15.10): leash audit (the account's own) and leash admin audit.

func addAuditVerbs() {
	page := func(fs *flag.FlagSet, f *flags) {
		fs.Int64Var(&f.limit, "limit", 0, "entries per page, 1 to 1000 (default 100)")
		fs.StringVar(&f.cursor, "cursor", "", "the page after this cursor (printed by the previous page)")
	}
	verbs["audit"] = verb{"no arguments", 0, 0, page, runAudit(false),
		"audit [--limit N] [--cursor C]", "the account's audit log, newest first: who changed what (GET /v1/audit)"}
	verbs["admin audit"] = verb{"no arguments", 0, 0, func(fs *flag.FlagSet, f *flags) {
		page(fs, f)
		fs.StringVar(&f.account, "account", "", "only this account's changes")
	}, runAudit(true), "admin audit [--account ID] [--limit N] [--cursor C]",
		"the audit log of every account, or of one, newest first (GET /v1/admin/audit)"}
	order = append(order, "audit", "admin audit")
}

// auditTable formats entries as a table, details as key=value.
func auditTable(entries []client.AuditEntry) string {
	if len(entries) == 0 {
		return "no changes recorded\n"
	}
	var b strings.Builder
	tw := tabwriter.NewWriter(&b, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "TIME\tACTOR\tACTION\tACCOUNT\tTARGET\tDETAILS\tCLIENT\tREQUEST")
	for _, e := range entries {
		who := e.Actor.Type + " " + e.Actor.ID
		if e.Actor.KeyID != "" {
			who += " (" + e.Actor.KeyID + ")"
		}
		keys := make([]string, 0, len(e.Details))
		for k := range e.Details {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		det := make([]string, len(keys))
		for i, k := range keys {
			det[i] = k + "=" + e.Details[k]
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", e.Time, who, e.Action, e.Account, orDash(e.Target),
			orDash(strings.Join(det, " ")), orDash(e.Client), orDash(e.RequestID))
	}
	tw.Flush()
	return b.String()
}

func runAudit(admin bool) func(context.Context, *command, []string, *flags) int {
	return func(ctx context.Context, c *command, _ []string, f *flags) int {
		q := client.AuditQuery{Account: f.account, Limit: int(f.limit), Cursor: f.cursor}
		var page *client.AuditPage
		var err error
		if admin {
			page, err = c.c.AdminAudit(ctx, q)
		} else {
			page, err = c.c.Audit(ctx, q)
		}
		if err != nil {
			return c.fail(err)
		}
		if page.Entries == nil {
			page.Entries = []client.AuditEntry{}
		}
		text := auditTable(page.Entries)
		var next any
		if page.NextCursor != "" {
			text += "more: --cursor " + page.NextCursor + "\n"
			next = page.NextCursor
		}
		c.print(map[string]any{"entries": page.Entries, "next_cursor": next}, text)
		return ExitOK
	}
}
