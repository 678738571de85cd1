package engine

import (
	"crypto/sha256"
	"fmt"
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

// Account is a tenant: everything it owns is invisible to every other account.
type Account struct {
	ID   string
	Plan Plan
}

// AccountSpec describes one account to NewDirectory.
type AccountSpec struct {
	ID   string
	Plan Plan
	// KeyHashes are the SHA-256 digests of the account's API keys.
	KeyHashes [][32]byte
}

var accountIDPattern = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]{0,63}$`)

// ValidAccountID reports whether id matches [a-z0-9][a-z0-9_-]{0,63}.
func ValidAccountID(id string) bool { return accountIDPattern.MatchString(id) }

// HashKey returns the SHA-256 of an API key, the form in which keys are looked up.
func HashKey(apiKey string) [32]byte { return sha256.Sum256([]byte(apiKey)) }

// Directory finds the account an API key belongs to. It is immutable; a config reload
// builds a new one.
type Directory struct {
	byKey    map[[32]byte]*Account
	accounts []*Account
}

// NewDirectory checks specs (valid unique ids, no key shared by two accounts) and indexes them.
func NewDirectory(specs []AccountSpec) (*Directory, error) {
	d := &Directory{byKey: make(map[[32]byte]*Account)}
	seen := make(map[string]bool, len(specs))
	for _, s := range specs {
		if !ValidAccountID(s.ID) {
			return nil, fmt.Errorf("account id %q must match [a-z0-9][a-z0-9_-]{0,63}", s.ID)
		}
		if seen[s.ID] {
			return nil, fmt.Errorf("account id %q is defined twice", s.ID)
		}
		seen[s.ID] = true
		a := &Account{ID: s.ID, Plan: s.Plan}
		for _, h := range s.KeyHashes {
			if other, dup := d.byKey[h]; dup {
				return nil, fmt.Errorf("account %q uses an API key already used by account %q", s.ID, other.ID)
			}
			d.byKey[h] = a
		}
		d.accounts = append(d.accounts, a)
	}
	return d, nil
}

// Lookup returns the account that owns apiKey.
func (d *Directory) Lookup(apiKey string) (*Account, bool) {
	a, ok := d.byKey[HashKey(apiKey)]
	return a, ok
}

// Account returns the account with id.
func (d *Directory) Account(id string) (*Account, bool) {
	for _, a := range d.accounts {
		if a.ID == id {
			return a, true
		}
	}
	return nil, false
}

// Accounts returns every account, in configuration order.
func (d *Directory) Accounts() []*Account { return d.accounts }
