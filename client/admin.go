package client

import (
	"context"
	"net/http"
	"net/url"
	"strconv"

	"github.com/leashd/leash/wire"
)

// Accounts and keys at runtime (spec §15). The Admin methods need a client whose APIKey
// is an operator key; the Own methods an account's API key.

// Account is an account as the admin routes show it (wire.Account, a null created_at
// read as "").
type Account struct {
	ID        string `json:"id"`
	Plan      string `json:"plan"`
	Source    string `json:"source"` // "config" or "api"
	Suspended bool   `json:"suspended"`
	// CreatedAt is RFC 3339 in UTC; "" for a configured account.
	CreatedAt string `json:"created_at"`
	// Keys is how many API keys the account has.
	Keys int `json:"keys"`
}

// AccountPage is one page of AdminListAccounts (wire.AccountPage); NextCursor is "" on
// the last page.
type AccountPage struct {
	Accounts   []Account `json:"accounts"`
	NextCursor string    `json:"next_cursor"`
}

// APIKey is an API key without its secret (wire.APIKey, a null created_at read as "").
type APIKey struct {
	ID        string `json:"id"`
	Name      string `json:"name"`
	Prefix    string `json:"prefix"`
	CreatedAt string `json:"created_at"`
	Source    string `json:"source"`
}

// IssuedKey is a key just issued (wire.APIKey); Key is shown only in this answer.
type IssuedKey struct {
	ID        string `json:"id"`
	Name      string `json:"name"`
	Key       string `json:"key"`
	Prefix    string `json:"prefix"`
	CreatedAt string `json:"created_at"`
}

// AccountUpdate is the body of AdminUpdateAccount (wire.UpdateAccountRequest); nil
// fields are left as they are.
type AccountUpdate struct {
	Plan      *string `json:"plan,omitempty"`
	Suspended *bool   `json:"suspended,omitempty"`
}

// PlanLimits are what an account's plan allows (GET /v1/account).
type PlanLimits = wire.PlanLimits

// OwnAccount is the calling account (GET /v1/account).
type OwnAccount = wire.OwnAccount

// issueKey is the body of a key issue: no name is none.
func issueKey(name string) wire.IssueKeyRequest {
	if name == "" {
		return wire.IssueKeyRequest{}
	}
	return wire.IssueKeyRequest{Name: wire.Some(name)}
}

// AdminCreateAccount creates an account: POST /v1/admin/accounts. Never retried.
func (c *Client) AdminCreateAccount(ctx context.Context, id, plan string) (*Account, error) {
	var out Account
	_, err := c.call(ctx, http.MethodPost, "/v1/admin/accounts",
		wire.CreateAccountRequest{ID: wire.Some(id), Plan: wire.Some(plan)}, false, &out)
	if err != nil {
		return nil, err
	}
	return &out, nil
}

// AdminListAccounts lists one page of accounts: GET /v1/admin/accounts. limit 0 is the
// service's default (100); cursor "" is the first page. Retried when safe.
func (c *Client) AdminListAccounts(ctx context.Context, limit int, cursor string) (*AccountPage, error) {
	q := url.Values{}
	if limit != 0 {
		q.Set("limit", strconv.Itoa(limit))
	}
	if cursor != "" {
		q.Set("cursor", cursor)
	}
	path := "/v1/admin/accounts"
	if len(q) > 0 {
		path += "?" + q.Encode()
	}
	var out AccountPage
	if _, err := c.call(ctx, http.MethodGet, path, nil, true, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// AdminGetAccount returns one account: GET /v1/admin/accounts/{id}.
func (c *Client) AdminGetAccount(ctx context.Context, id string) (*Account, error) {
	var out Account
	if _, err := c.call(ctx, http.MethodGet, "/v1/admin/accounts/"+escape(id), nil, true, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// AdminUpdateAccount re-plans, suspends or resumes an account: PATCH
// /v1/admin/accounts/{id}. Retried when safe (it sets, so a repeat changes nothing more).
func (c *Client) AdminUpdateAccount(ctx context.Context, id string, u AccountUpdate) (*Account, error) {
	var out Account
	if _, err := c.call(ctx, http.MethodPatch, "/v1/admin/accounts/"+escape(id), u, true, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// AdminDeleteAccount deletes an account and its keys: DELETE /v1/admin/accounts/{id}.
func (c *Client) AdminDeleteAccount(ctx context.Context, id string) error {
	_, err := c.call(ctx, http.MethodDelete, "/v1/admin/accounts/"+escape(id), nil, false, nil)
	return err
}

// AdminIssueKey issues a key to an account: POST /v1/admin/accounts/{id}/keys. Never
// retried (a repeat would issue a second key).
func (c *Client) AdminIssueKey(ctx context.Context, account, name string) (*IssuedKey, error) {
	var out IssuedKey
	if _, err := c.call(ctx, http.MethodPost, "/v1/admin/accounts/"+escape(account)+"/keys", issueKey(name), false, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// AdminListKeys lists an account's keys: GET /v1/admin/accounts/{id}/keys.
func (c *Client) AdminListKeys(ctx context.Context, account string) ([]APIKey, error) {
	return c.keys(ctx, "/v1/admin/accounts/"+escape(account)+"/keys")
}

// AdminRevokeKey revokes one key of an account: DELETE /v1/admin/accounts/{id}/keys/{key_id}.
func (c *Client) AdminRevokeKey(ctx context.Context, account, keyID string) error {
	_, err := c.call(ctx, http.MethodDelete, "/v1/admin/accounts/"+escape(account)+"/keys/"+escape(keyID), nil, false, nil)
	return err
}

// Account returns the calling account and its plan's limits: GET /v1/account.
func (c *Client) Account(ctx context.Context) (*OwnAccount, error) {
	var out OwnAccount
	if _, err := c.call(ctx, http.MethodGet, "/v1/account", nil, true, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// Keys lists the calling account's keys: GET /v1/keys.
func (c *Client) Keys(ctx context.Context) ([]APIKey, error) {
	return c.keys(ctx, "/v1/keys")
}

// keys reads a key list (wire.KeyList).
func (c *Client) keys(ctx context.Context, path string) ([]APIKey, error) {
	var out wire.KeyList
	if _, err := c.call(ctx, http.MethodGet, path, nil, true, &out); err != nil {
		return nil, err
	}
	keys := make([]APIKey, len(out.Keys))
	for i, k := range out.Keys {
		keys[i] = APIKey{ID: k.ID, Name: k.Name, Prefix: k.Prefix, Source: k.Source}
		if k.CreatedAt != nil {
			keys[i].CreatedAt = *k.CreatedAt
		}
	}
	return keys, nil
}

// CreateKey issues a new key to the calling account: POST /v1/keys. Never retried.
func (c *Client) CreateKey(ctx context.Context, name string) (*IssuedKey, error) {
	var out IssuedKey
	if _, err := c.call(ctx, http.MethodPost, "/v1/keys", issueKey(name), false, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// RevokeKey revokes one of the calling account's keys: DELETE /v1/keys/{key_id}.
func (c *Client) RevokeKey(ctx context.Context, keyID string) error {
	_, err := c.call(ctx, http.MethodDelete, "/v1/keys/"+escape(keyID), nil, false, nil)
	return err
}

// NamespaceUsage is one namespace's totals over the last 30 UTC days.
type NamespaceUsage = wire.NamespaceUsage

// Usage is an account across all its namespaces (GET /v1/usage): its month, each
// namespace with usage in the last 30 UTC days, and those days summed over namespaces.
type Usage = wire.AccountUsage

// Namespace is one namespace of Namespaces: its rules and its last 30 days' totals.
type Namespace = wire.Namespace

// HeldLease is one lease of a Leases answer.
type HeldLease = wire.HeldLease

// LeaseList is who holds one key's leases (GET /v1/namespaces/{ns}/leases). Limit is what
// an acquisition without inline values would resolve now; nil without a concurrent rule.
type LeaseList = wire.LeaseList

// Usage returns the calling account's usage across its namespaces: GET /v1/usage.
func (c *Client) Usage(ctx context.Context) (*Usage, error) {
	var out Usage
	if _, err := c.call(ctx, http.MethodGet, "/v1/usage", nil, true, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// AdminUsage returns an account's usage: GET /v1/admin/accounts/{id}/usage.
func (c *Client) AdminUsage(ctx context.Context, account string) (*Usage, error) {
	var out Usage
	if _, err := c.call(ctx, http.MethodGet, "/v1/admin/accounts/"+escape(account)+"/usage", nil, true, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// Namespaces lists the calling account's namespaces with a rule or recent usage: GET
// /v1/namespaces.
func (c *Client) Namespaces(ctx context.Context) ([]Namespace, error) {
	var out wire.NamespaceList
	if _, err := c.call(ctx, http.MethodGet, "/v1/namespaces", nil, true, &out); err != nil {
		return nil, err
	}
	return out.Namespaces, nil
}

// Leases lists the leases held on (namespace, key): GET /v1/namespaces/{ns}/leases?key=K.
func (c *Client) Leases(ctx context.Context, namespace, key string) (*LeaseList, error) {
	var out LeaseList
	path := "/v1/namespaces/" + escape(namespace) + "/leases?" + url.Values{"key": {key}}.Encode()
	if _, err := c.call(ctx, http.MethodGet, path, nil, true, &out); err != nil {
		return nil, err
	}
	return &out, nil
}
