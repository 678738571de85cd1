package cli

import (
	"context"
	"flag"
	"fmt"
	"strings"
	"text/tabwriter"

	"github.com/leashd/leash/client"
)

// The account's own keys (leash keys ...) and the admin API (leash admin ...), spec §15.
// The admin verbs read the operator key from --key or $LEASH_OPERATOR_KEY.

func addAccountVerbs() {
	add := func(name string, v verb) {
		verbs[name] = v
		order = append(order, name)
	}
	nameFlag := func(fs *flag.FlagSet, f *flags) {
		fs.StringVar(&f.name, "name", "", "a name for the key (at most 64 characters)")
	}
	add("keys list", verb{"no arguments", 0, 0, noFlags, runOwnKeys,
		"keys list", "list the account's API keys, without their secrets (GET /v1/keys)"})
	add("keys create", verb{"no arguments", 0, 0, nameFlag, runOwnCreateKey,
		"keys create [--name NAME]", "issue a new API key to the account and print it, shown only now (POST /v1/keys)"})
	add("keys revoke", verb{"KEY_ID", 1, 1, noFlags, runOwnRevokeKey,
		"keys revoke KEY_ID", "revoke one of the account's API keys (DELETE /v1/keys/{key_id})"})
	add("admin accounts create", verb{"ID", 1, 1, func(fs *flag.FlagSet, f *flags) {
		fs.StringVar(&f.plan, "plan", "", "the account's plan (required)")
	}, runAdminCreate, "admin accounts create ID --plan PLAN", "create an account (POST /v1/admin/accounts)"})
	add("admin accounts list", verb{"no arguments", 0, 0, func(fs *flag.FlagSet, f *flags) {
		fs.Int64Var(&f.limit, "limit", 0, "accounts per page, 1 to 1000 (default 100)")
		fs.StringVar(&f.cursor, "cursor", "", "the page after this cursor (printed by the previous page)")
	}, runAdminList, "admin accounts list [--limit N] [--cursor C]", "list accounts by id, one page (GET /v1/admin/accounts)"})
	add("admin accounts get", verb{"ID", 1, 1, noFlags, runAdminGet,
		"admin accounts get ID", "show one account (GET /v1/admin/accounts/{id})"})
	add("admin accounts set-plan", verb{"ID PLAN", 2, 2, noFlags, runAdminSetPlan,
		"admin accounts set-plan ID PLAN", "move an account to another plan (PATCH /v1/admin/accounts/{id})"})
	add("admin accounts suspend", verb{"ID", 1, 1, noFlags, runAdminSuspend(true),
		"admin accounts suspend ID", "suspend an account: its decisions, leases and rule writes are refused (PATCH /v1/admin/accounts/{id})"})
	add("admin accounts resume", verb{"ID", 1, 1, noFlags, runAdminSuspend(false),
		"admin accounts resume ID", "end an account's suspension (PATCH /v1/admin/accounts/{id})"})
	add("admin accounts delete", verb{"ID", 1, 1, noFlags, runAdminDelete,
		"admin accounts delete ID", "delete an account and its keys (DELETE /v1/admin/accounts/{id})"})
	add("admin keys issue", verb{"ACCOUNT", 1, 1, nameFlag, runAdminIssue,
		"admin keys issue ACCOUNT [--name NAME]", "issue an API key to ACCOUNT and print it, shown only now (POST /v1/admin/accounts/{id}/keys)"})
	add("admin keys list", verb{"ACCOUNT", 1, 1, noFlags, runAdminKeys,
		"admin keys list ACCOUNT", "list ACCOUNT's API keys, without their secrets (GET /v1/admin/accounts/{id}/keys)"})
	add("admin keys revoke", verb{"ACCOUNT KEY_ID", 2, 2, noFlags, runAdminRevoke,
		"admin keys revoke ACCOUNT KEY_ID", "revoke one of ACCOUNT's API keys (DELETE /v1/admin/accounts/{id}/keys/{key_id})"})
}

// accountTable formats accounts as a table.
func accountTable(accts ...client.Account) string {
	var b strings.Builder
	tw := tabwriter.NewWriter(&b, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tPLAN\tSOURCE\tSTATE\tKEYS\tCREATED")
	for _, a := range accts {
		state := "active"
		if a.Suspended {
			state = "suspended"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%s\n", a.ID, a.Plan, a.Source, state, a.Keys, orDash(a.CreatedAt))
	}
	tw.Flush()
	return b.String()
}

// keyTable formats keys as a table.
func keyTable(keys []client.APIKey) string {
	if len(keys) == 0 {
		return "no keys\n"
	}
	var b strings.Builder
	tw := tabwriter.NewWriter(&b, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tNAME\tPREFIX\tSOURCE\tCREATED")
	for _, k := range keys {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", k.ID, orDash(k.Name), orDash(k.Prefix), k.Source, orDash(k.CreatedAt))
	}
	tw.Flush()
	return b.String()
}

func issued(k *client.IssuedKey) string {
	return fmt.Sprintf("key:  %s   (shown only now: it is not stored)\nid:   %s\n", k.Key, k.ID)
}

func runOwnKeys(ctx context.Context, c *command, a []string, f *flags) int {
	keys, err := c.c.Keys(ctx)
	if err != nil {
		return c.fail(err)
	}
	if keys == nil {
		keys = []client.APIKey{}
	}
	c.print(map[string]any{"keys": keys}, keyTable(keys))
	return ExitOK
}

func runOwnCreateKey(ctx context.Context, c *command, a []string, f *flags) int {
	k, err := c.c.CreateKey(ctx, f.name)
	if err != nil {
		return c.fail(err)
	}
	c.print(k, issued(k))
	return ExitOK
}

func runOwnRevokeKey(ctx context.Context, c *command, a []string, f *flags) int {
	if err := c.c.RevokeKey(ctx, a[0]); err != nil {
		return c.fail(err)
	}
	c.print(map[string]bool{"revoked": true}, "revoked\n")
	return ExitOK
}

func runAdminCreate(ctx context.Context, c *command, a []string, f *flags) int {
	if !f.set["plan"] {
		return c.usage("admin accounts create needs --plan")
	}
	acct, err := c.c.AdminCreateAccount(ctx, a[0], f.plan)
	if err != nil {
		return c.fail(err)
	}
	c.print(acct, accountTable(*acct))
	return ExitOK
}

func runAdminList(ctx context.Context, c *command, a []string, f *flags) int {
	page, err := c.c.AdminListAccounts(ctx, int(f.limit), f.cursor)
	if err != nil {
		return c.fail(err)
	}
	if page.Accounts == nil {
		page.Accounts = []client.Account{}
	}
	text := accountTable(page.Accounts...)
	if page.NextCursor != "" {
		text += "more: --cursor " + page.NextCursor + "\n"
	}
	var next any
	if page.NextCursor != "" {
		next = page.NextCursor
	}
	c.print(map[string]any{"accounts": page.Accounts, "next_cursor": next}, text)
	return ExitOK
}

func runAdminGet(ctx context.Context, c *command, a []string, f *flags) int {
	acct, err := c.c.AdminGetAccount(ctx, a[0])
	if err != nil {
		return c.fail(err)
	}
	c.print(acct, accountTable(*acct))
	return ExitOK
}

func runAdminSetPlan(ctx context.Context, c *command, a []string, f *flags) int {
	acct, err := c.c.AdminUpdateAccount(ctx, a[0], client.AccountUpdate{Plan: &a[1]})
	if err != nil {
		return c.fail(err)
	}
	c.print(acct, accountTable(*acct))
	return ExitOK
}

func runAdminSuspend(suspended bool) func(context.Context, *command, []string, *flags) int {
	return func(ctx context.Context, c *command, a []string, f *flags) int {
		acct, err := c.c.AdminUpdateAccount(ctx, a[0], client.AccountUpdate{Suspended: &suspended})
		if err != nil {
			return c.fail(err)
		}
		c.print(acct, accountTable(*acct))
		return ExitOK
	}
}

func runAdminDelete(ctx context.Context, c *command, a []string, f *flags) int {
	if err := c.c.AdminDeleteAccount(ctx, a[0]); err != nil {
		return c.fail(err)
	}
	c.print(map[string]bool{"deleted": true}, "deleted\n")
	return ExitOK
}

func runAdminIssue(ctx context.Context, c *command, a []string, f *flags) int {
	k, err := c.c.AdminIssueKey(ctx, a[0], f.name)
	if err != nil {
		return c.fail(err)
	}
	c.print(k, issued(k))
	return ExitOK
}

func runAdminKeys(ctx context.Context, c *command, a []string, f *flags) int {
	keys, err := c.c.AdminListKeys(ctx, a[0])
	if err != nil {
		return c.fail(err)
	}
	if keys == nil {
		keys = []client.APIKey{}
	}
	c.print(map[string]any{"keys": keys}, keyTable(keys))
	return ExitOK
}

func runAdminRevoke(ctx context.Context, c *command, a []string, f *flags) int {
	if err := c.c.AdminRevokeKey(ctx, a[0], a[1]); err != nil {
		return c.fail(err)
	}
	c.print(map[string]bool{"revoked": true}, "revoked\n")
	return ExitOK
}
