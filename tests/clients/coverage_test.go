package clients

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/leashd/leash/client"
)

// goOperations maps each operation of clients/api.json to the Go client's method that calls
// it (a method expression, so a method that goes away fails to compile).
var goOperations = map[string]any{
	"checkLimit":       (*client.Client).Limit,
	"resetLimit":       (*client.Client).Reset,
	"acquireLease":     (*client.Client).Acquire,
	"releaseLease":     (*client.Client).Release,
	"renewLease":       (*client.Client).RenewWindowMS,
	"listLeases":       (*client.Client).Leases,
	"listRules":        (*client.Client).Rules,
	"putRule":          (*client.Client).SetRule,
	"deleteRule":       (*client.Client).DeleteRule,
	"namespaceStats":   (*client.Client).Stats,
	"getWebhook":       (*client.Client).Webhook,
	"putWebhook":       (*client.Client).SetWebhook,
	"deleteWebhook":    (*client.Client).DeleteWebhook,
	"testWebhook":      (*client.Client).TestWebhook,
	"getOwnAccount":    (*client.Client).Account,
	"getUsage":         (*client.Client).Usage,
	"listNamespaces":   (*client.Client).Namespaces,
	"listOwnKeys":      (*client.Client).Keys,
	"issueOwnKey":      (*client.Client).CreateKey,
	"revokeOwnKey":     (*client.Client).RevokeKey,
	"createAccount":    (*client.Client).AdminCreateAccount,
	"listAccounts":     (*client.Client).AdminListAccounts,
	"getAccount":       (*client.Client).AdminGetAccount,
	"updateAccount":    (*client.Client).AdminUpdateAccount,
	"deleteAccount":    (*client.Client).AdminDeleteAccount,
	"issueAccountKey":  (*client.Client).AdminIssueKey,
	"listAccountKeys":  (*client.Client).AdminListKeys,
	"revokeAccountKey": (*client.Client).AdminRevokeKey,
	"getAccountUsage":  (*client.Client).AdminUsage,
	"listAudit":        (*client.Client).AdminAudit,
	"listOwnAudit":     (*client.Client).Audit,
}

// goSchema is how the Go client carries one schema: a type whose JSON tags are the fields,
// or, where the client takes or gives the fields in another form (options, arguments, a
// Lease or a DeniedError), the fields it covers and where.
type goSchema struct {
	typ    any
	fields []string
	where  string
}

var goSchemas = map[string]goSchema{
	"APIKey":                   {typ: client.APIKey{}},
	"Account":                  {typ: client.Account{}},
	"AccountPage":              {typ: client.AccountPage{}},
	"AccountUsage":             {typ: client.Usage{}},
	"AccountUsage.namespaces":  {typ: client.NamespaceUsage{}},
	"AuditEntry":               {typ: client.AuditEntry{}},
	"AuditEntry.actor":         {typ: client.AuditActor{}},
	"AuditPage":                {typ: client.AuditPage{}},
	"DayStats":                 {typ: client.DayUsage{}},
	"IssuedKey":                {typ: client.IssuedKey{}},
	"LeaseList":                {typ: client.LeaseList{}},
	"LeaseList.leases":         {typ: client.HeldLease{}},
	"LimitResult":              {typ: client.LimitResult{}},
	"MonthStats":               {typ: client.MonthUsage{}},
	"NamespaceList.namespaces": {typ: client.Namespace{}},
	"Override":                 {typ: client.Override{}},
	"OverrideRequest":          {typ: client.Override{}},
	"OwnAccount":               {typ: client.OwnAccount{}},
	"OwnAccount.plan_limits":   {typ: client.PlanLimits{}},
	"ReleaseResult":            {typ: client.ReleaseResult{}},
	"RenewResult":              {typ: client.RenewResult{}},
	"Rule":                     {typ: client.Rule{}},
	"RuleRequest":              {typ: client.Rule{}},
	"Stats":                    {typ: client.Stats{}},
	"UpdateAccountRequest":     {typ: client.AccountUpdate{}},
	"Webhook":                  {typ: client.Webhook{}},
	"WebhookWithSecret":        {typ: client.Webhook{}},

	"LimitRequest":         {fields: []string{"namespace", "key", "algorithm", "limit", "window_ms", "cost", "overdraft"}, where: "Limit's arguments and options (WithAlgorithm, WithLimit, WithWindowMS, WithCost, WithOverdraft)"},
	"LeaseRequest":         {fields: []string{"namespace", "key", "limit", "window_ms"}, where: "Acquire's arguments and options"},
	"LeaseDecision":        {fields: []string{"allowed", "lease_id", "active", "limit", "reset_ms"}, where: "Acquire's *Lease (ID, Active, Limit, TTL) or *DeniedError (Active, Limit, Reset)"},
	"RenewRequest":         {fields: []string{"window_ms"}, where: "RenewWindowMS's argument"},
	"ResetResult":          {fields: []string{"reset"}, where: "Reset's bool"},
	"DeleteResult":         {fields: []string{"deleted"}, where: "DeleteRule's bool"},
	"RuleList":             {fields: []string{"namespace", "rules"}, where: "Rules' argument and []Rule"},
	"NamespaceList":        {fields: []string{"namespaces"}, where: "Namespaces' []Namespace"},
	"KeyList":              {fields: []string{"keys"}, where: "Keys' and AdminListKeys' []APIKey"},
	"CreateAccountRequest": {fields: []string{"id", "plan"}, where: "AdminCreateAccount's arguments"},
	"IssueKeyRequest":      {fields: []string{"name"}, where: "CreateKey's and AdminIssueKey's name"},
	"WebhookRequest":       {fields: []string{"url"}, where: "SetWebhook's argument"},
	"WebhookTestResult":    {fields: []string{"event_id"}, where: "TestWebhook's eventID"},
	"Error":                {fields: []string{"error", "code"}, where: "*client.Error (Message, Code)"},
}

// jsonFields are the JSON member names of a struct type's fields.
func jsonFields(v any) []string {
	var out []string
	t := reflect.TypeOf(v)
	for i := range t.NumField() {
		name, _, _ := strings.Cut(t.Field(i).Tag.Get("json"), ",")
		if name != "" && name != "-" {
			out = append(out, name)
		}
	}
	return out
}

// TestGoClientCoversTheDocument: every operation and every field of clients/api.json (the
// summary of docs/openapi.yaml) is carried by the Go client, as the TypeScript and Python
// clients' coverage tests check theirs.
func TestGoClientCoversTheDocument(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(root(), "clients", "api.json"))
	if err != nil {
		t.Fatal(err)
	}
	var api struct {
		Operations []struct{ ID, Method, Path string }
		Schemas    map[string][]string
	}
	if err := json.Unmarshal(b, &api); err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, op := range api.Operations {
		ids = append(ids, op.ID)
		if goOperations[op.ID] == nil {
			t.Errorf("operation %s (%s %s) is not covered by the Go client: add its method to the client package and to goOperations", op.ID, op.Method, op.Path)
		}
	}
	for id := range goOperations {
		if !slices.Contains(ids, id) {
			t.Errorf("goOperations names %s, which the document does not have", id)
		}
	}
	var schemas []string
	for name := range api.Schemas {
		schemas = append(schemas, name)
	}
	sort.Strings(schemas)
	for _, name := range schemas {
		g, ok := goSchemas[name]
		if !ok {
			t.Errorf("schema %s is not covered by the Go client: add its type to the client package and to goSchemas", name)
			continue
		}
		have := g.fields
		if g.typ != nil {
			have = jsonFields(g.typ)
		}
		where := g.where
		if g.typ != nil {
			where = reflect.TypeOf(g.typ).String()
		}
		for _, f := range api.Schemas[name] {
			if !slices.Contains(have, f) {
				t.Errorf("%s.%s is not covered by the Go client (%s)", name, f, where)
			}
		}
	}
}
