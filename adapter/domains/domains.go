// Package domains is what both Envoy edges decide from: which account each Envoy domain
// counts against (Routing), the descriptor rules of every domain composed from files and
// xDS (Config, spec §9.1, §9.14), and the /v1 key of the counter a descriptor's entries
// spend (CounterKey, spec §9.8).
package domains

import (
	"errors"
	"fmt"
	"maps"
	"slices"

	"github.com/leashd/leash/adapter/descriptors"
	"github.com/leashd/leash/engine"
)

// Routing says which account each Envoy domain counts against (envoy.domains and
// envoy.default_account).
type Routing struct {
	Domains        map[string]string // domain → account id
	DefaultAccount string            // "" when none
	// Overdraft is envoy.overdraft, and DomainOverdraft a domain's own setting where it
	// has one (envoy.domains.<domain>.overdraft; spec §9.5).
	Overdraft       bool
	DomainOverdraft map[string]bool
}

// OverdraftOf says whether a domain's descriptors count the hits of an over-limit
// descriptor, unless a descriptor says otherwise (spec §4.12, §9.5).
func (r *Routing) OverdraftOf(domain string) bool {
	if o, ok := r.DomainOverdraft[domain]; ok {
		return o
	}
	return r.Overdraft
}

// AccountOf returns the account id a domain counts against, "" when none.
func (r *Routing) AccountOf(domain string) string {
	if id, ok := r.Domains[domain]; ok {
		return id
	}
	return r.DefaultAccount
}

// Config is what a reload replaces as one unit: the descriptor files and the routing.
type Config struct {
	Descriptors *descriptors.Config // nil: no descriptor files
	Routing     Routing
}

// Validate checks cfg against the accounts of dir: every domain of the descriptor files
// maps to an existing account, and every algorithm a file names is on that account's plan
// (spec §9.1, §9.3). Errors name the domain and the file; every problem is reported
// (errors.Join), one per line.
func (cfg *Config) Validate(dir *engine.Directory) error {
	var errs []error
	if id := cfg.Routing.DefaultAccount; id != "" {
		if _, ok := dir.Account(id); !ok {
			errs = append(errs, fmt.Errorf("envoy.default_account: no account %q", id))
		}
	}
	for _, d := range slices.Sorted(maps.Keys(cfg.Routing.Domains)) {
		if id := cfg.Routing.Domains[d]; !hasAccount(dir, id) {
			errs = append(errs, fmt.Errorf("envoy.domains.%s.account: no account %q", d, id))
		}
	}
	for _, d := range cfg.Descriptors.Domains() {
		id := cfg.Routing.AccountOf(d)
		if id == "" {
			errs = append(errs, fmt.Errorf("%s: domain %q maps to no account: set envoy.domains.%s.account or envoy.default_account",
				cfg.Descriptors.Where(d), d, d))
			continue
		}
		a, ok := dir.Account(id)
		if !ok {
			errs = append(errs, fmt.Errorf("%s: domain %q maps to account %q, which does not exist", cfg.Descriptors.Where(d), d, id))
			continue
		}
		for _, r := range cfg.Descriptors.Rules(d) {
			for _, l := range r.Limits {
				if !a.Plan.AllowsAlgorithm(l.Algorithm) {
					errs = append(errs, fmt.Errorf("%s: algorithm %s is not available on plan %s of account %q",
						r.Where(), l.Algorithm, a.Plan.Name, id))
				}
			}
		}
	}
	return errors.Join(errs...)
}

// Compose is the Config of the descriptor files' domains and the xDS domains (spec §9.14)
// with routing, validated against dir. A domain from both sources is refused as a domain
// in two files is; nil sources are allowed.
func Compose(files, xds *descriptors.Config, routing Routing, dir *engine.Directory) (*Config, error) {
	d, err := descriptors.Merge(files, xds)
	if err != nil {
		return nil, err
	}
	next := &Config{Descriptors: d, Routing: routing}
	if err := next.Validate(dir); err != nil {
		return nil, err
	}
	return next, nil
}

func hasAccount(dir *engine.Directory, id string) bool {
	_, ok := dir.Account(id)
	return ok
}
