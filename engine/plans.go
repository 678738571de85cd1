package engine

import (
	"crypto/sha256"
	"fmt"
	"maps"
	"regexp"
)

// AlgorithmSet is a set of algorithms, one bit each.
type AlgorithmSet uint8

// Has reports whether a is in the set.
func (s AlgorithmSet) Has(a Algorithm) bool { return s&(1<<a) != 0 }

// With returns the set plus a.
func (s AlgorithmSet) With(a Algorithm) AlgorithmSet { return s | 1<<a }

// Plan is what an account may use and how much (spec §2.3).
type Plan struct {
	Name            string
	Algorithms      AlgorithmSet
	ConcurrentLimit bool
	Webhooks        bool
	MonthlyQuota    int64
	// HardCap is the month ceiling; nil means none.
	HardCap *int64
}

// AllowsAlgorithm reports whether the plan permits a; concurrent_limit follows
// ConcurrentLimit.
func (p *Plan) AllowsAlgorithm(a Algorithm) bool {
	if a == ConcurrentLimit {
		return p.ConcurrentLimit
	}
	return p.Algorithms.Has(a)
}

// BuiltinPlans returns the plans every deployment starts with (spec §2.3).
func BuiltinPlans() map[string]Plan {
	rate2 := AlgorithmSet(0).With(FixedWindow).With(SlidingWindow)
	rate3 := rate2.With(TokenBucket)
	freeCap, proCap := int64(1_000_000), int64(100_000_000)
	return map[string]Plan{
		"free":  {Name: "free", Algorithms: rate2, MonthlyQuota: 100_000, HardCap: &freeCap},
		"pro":   {Name: "pro", Algorithms: rate3, ConcurrentLimit: true, Webhooks: true, MonthlyQuota: 10_000_000, HardCap: &proCap},
		"scale": {Name: "scale", Algorithms: rate3, ConcurrentLimit: true, Webhooks: true, MonthlyQuota: 1_000_000_000},
	}
}

// AccountSource says where an account or key comes from (spec §15.2).
type AccountSource string

// The sources of accounts and keys.
const (
	// SourceConfig: defined in the configuration; the admin API cannot change it.
	SourceConfig AccountSource = "config"
	// SourceAPI: created through the admin API and kept in the store.
	SourceAPI AccountSource = "api"
)

// Account is a tenant: everything it owns is invisible to every other account.
type Account struct {
	ID   string
	Plan Plan
	// Source is where the account is defined.
	Source AccountSource
	// Suspended accounts authenticate, but decisions, leases and rule writes are refused
	// with account_suspended (spec §15.6).
	Suspended bool
	// CreatedMS is when an API account was created (store clock); 0 for config accounts.
	CreatedMS int64
	// configKeys is how many keys the configuration lists for the account.
	configKeys int
}

// AccountSpec describes one account to NewDirectory.
type AccountSpec struct {
	ID   string
	Plan Plan
	// KeyHashes are the SHA-256 digests of the account's API keys.
	KeyHashes [][32]byte
}

// Operator is an identity that may use the admin API (spec §15.1); it is no account.
type Operator struct {
	ID string
}

// OperatorSpec describes one operator to NewDirectoryWith.
type OperatorSpec struct {
	ID string
	// KeyHashes are the SHA-256 digests of the operator's keys.
	KeyHashes [][32]byte
}

// DirectoryOptions are the parts of a Directory besides its accounts.
type DirectoryOptions struct {
	// Operators may use the admin API.
	Operators []OperatorSpec
	// Plans are the plans an API account may name; nil means BuiltinPlans().
	Plans map[string]Plan
}

var accountIDPattern = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]{0,63}$`)

// ValidAccountID reports whether id matches [a-z0-9][a-z0-9_-]{0,63}.
func ValidAccountID(id string) bool { return accountIDPattern.MatchString(id) }

// HashKey returns the SHA-256 of an API key, the form in which keys are looked up.
func HashKey(apiKey string) [32]byte { return sha256.Sum256([]byte(apiKey)) }

// Directory finds the account or operator a key belongs to. It is immutable; a config
// reload, or a change of the accounts in the store, builds a new one.
type Directory struct {
	byKey     map[[32]byte]keyOwner
	byID      map[string]*Account
	accounts  []*Account
	operators map[[32]byte]*Operator
	plans     map[string]Plan
	// config is the configuration's part (itself when built by NewDirectory*); a merged
	// directory keeps it so the store's accounts can be merged again.
	config *Directory
}

// keyOwner is the account a key belongs to and the key's id (key_… or config-N).
type keyOwner struct {
	acct *Account
	id   string
}

// NewDirectory checks specs (valid unique ids, no key shared by two accounts) and indexes them.
func NewDirectory(specs []AccountSpec) (*Directory, error) {
	return NewDirectoryWith(specs, DirectoryOptions{})
}

// NewDirectoryWith is NewDirectory with operators and the plans API accounts may name. No
// key may belong to two accounts, two operators, or an account and an operator.
func NewDirectoryWith(specs []AccountSpec, o DirectoryOptions) (*Directory, error) {
	d := &Directory{byKey: make(map[[32]byte]keyOwner), byID: make(map[string]*Account, len(specs)),
		operators: make(map[[32]byte]*Operator), plans: o.Plans}
	if d.plans == nil {
		d.plans = BuiltinPlans()
	}
	d.config = d
	for _, s := range specs {
		if !ValidAccountID(s.ID) {
			return nil, fmt.Errorf("account id %q must match [a-z0-9][a-z0-9_-]{0,63}", s.ID)
		}
		if d.byID[s.ID] != nil {
			return nil, fmt.Errorf("account id %q is defined twice", s.ID)
		}
		a := &Account{ID: s.ID, Plan: s.Plan, Source: SourceConfig, configKeys: len(s.KeyHashes)}
		d.byID[s.ID] = a
		for i, h := range s.KeyHashes {
			if other, dup := d.byKey[h]; dup {
				return nil, fmt.Errorf("account %q uses an API key already used by account %q", s.ID, other.acct.ID)
			}
			d.byKey[h] = keyOwner{a, fmt.Sprintf("config-%d", i+1)}
		}
		d.accounts = append(d.accounts, a)
	}
	seen := make(map[string]bool, len(o.Operators))
	for _, s := range o.Operators {
		if !ValidAccountID(s.ID) {
			return nil, fmt.Errorf("operator id %q must match [a-z0-9][a-z0-9_-]{0,63}", s.ID)
		}
		if seen[s.ID] {
			return nil, fmt.Errorf("operator id %q is defined twice", s.ID)
		}
		seen[s.ID] = true
		op := &Operator{ID: s.ID}
		for _, h := range s.KeyHashes {
			if o, dup := d.byKey[h]; dup {
				return nil, fmt.Errorf("operator %q uses an API key already used by account %q", s.ID, o.acct.ID)
			}
			if other, dup := d.operators[h]; dup {
				return nil, fmt.Errorf("operator %q uses a key already used by operator %q", s.ID, other.ID)
			}
			d.operators[h] = op
		}
	}
	return d, nil
}

// Lookup returns the account that owns apiKey.
func (d *Directory) Lookup(apiKey string) (*Account, bool) {
	o, ok := d.byKey[HashKey(apiKey)]
	return o.acct, ok
}

// LookupKey returns the account that owns apiKey and the key's id.
func (d *Directory) LookupKey(apiKey string) (a *Account, keyID string, ok bool) {
	o, ok := d.byKey[HashKey(apiKey)]
	return o.acct, o.id, ok
}

// LookupOperator returns the operator that owns key.
func (d *Directory) LookupOperator(key string) (*Operator, bool) {
	op, ok := d.operators[HashKey(key)]
	return op, ok
}

// Account returns the account with id.
func (d *Directory) Account(id string) (*Account, bool) {
	a, ok := d.byID[id]
	return a, ok
}

// Accounts returns every account: the configuration's in their order, then the store's
// by id.
func (d *Directory) Accounts() []*Account { return d.accounts }

// Config returns the configuration's part of d: d itself unless the store's accounts
// were merged into it.
func (d *Directory) Config() *Directory { return d.config }

// ConfigKeys is how many keys the configuration lists for the account (0 for one made
// through the admin API).
func (a *Account) ConfigKeys() int { return a.configKeys }

// Plans returns the plans accounts may name.
func (d *Directory) Plans() map[string]Plan { return d.plans }

// Merge returns the configuration part of d with the store's accounts and keys added. An
// API account whose id the configuration defines is left out and reported in conflicts;
// one naming a plan the configuration does not have is left out and reported in
// unknownPlan; a key whose hash some other key has is left out.
func (d *Directory) Merge(snap *AccountsSnapshot) (m *Directory, conflicts, unknownPlan []string) {
	c := d.config
	m = &Directory{byKey: make(map[[32]byte]keyOwner, len(c.byKey)+len(snap.Keys)),
		byID: make(map[string]*Account, len(c.byID)+len(snap.Accounts)), operators: c.operators, plans: c.plans, config: c}
	maps.Copy(m.byKey, c.byKey)
	maps.Copy(m.byID, c.byID)
	m.accounts = append(make([]*Account, 0, len(c.accounts)+len(snap.Accounts)), c.accounts...)
	for _, sa := range snap.Accounts {
		if m.byID[sa.ID] != nil {
			conflicts = append(conflicts, sa.ID)
			continue
		}
		plan, ok := c.plans[sa.Plan]
		if !ok {
			unknownPlan = append(unknownPlan, sa.ID)
			continue
		}
		a := &Account{ID: sa.ID, Plan: plan, Source: SourceAPI, Suspended: sa.Suspended, CreatedMS: sa.CreatedMS}
		m.byID[sa.ID] = a
		m.accounts = append(m.accounts, a)
	}
	for _, k := range snap.Keys {
		a := m.byID[k.Account]
		if a == nil || a.Source != SourceAPI {
			continue
		}
		if _, dup := m.byKey[k.Hash]; dup {
			continue
		}
		if _, dup := c.operators[k.Hash]; dup {
			continue
		}
		m.byKey[k.Hash] = keyOwner{a, k.ID}
	}
	return m, conflicts, unknownPlan
}

// WebhooksAllowed reports webhook_not_on_plan for plans without webhooks; the HTTP edge
// calls it before reading the body (spec §3.7).
func WebhooksAllowed(a *Account) error {
	if !a.Plan.Webhooks {
		return NewError(CodeWebhookNotOnPlan, "webhooks are not available on plan "+a.Plan.Name)
	}
	return nil
}

// Active refuses a suspended account's decisions, leases, rule writes, webhook writes and
// tests, and the keys it would issue itself, with account_suspended (spec §15.6).
func Active(a *Account) error {
	if a.Suspended {
		return NewError(CodeAccountSuspended, "account "+a.ID+" is suspended")
	}
	return nil
}

// LeasesAllowed reports concurrent_not_on_plan for plans without leases; the HTTP edge
// calls it before reading the body (spec §3.7).
func LeasesAllowed(a *Account) error {
	if !a.Plan.ConcurrentLimit {
		return NewError(CodeConcurrentNotOnPlan, "concurrency leases are not available on plan "+a.Plan.Name)
	}
	return nil
}
