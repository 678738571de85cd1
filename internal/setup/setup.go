// Package setup builds what `leash serve` runs on from its loaded configuration: the
// account directory and the Envoy endpoint's configuration (descriptor files and domain
// routing). serve and check-config share it, so `leash check-config` accepts exactly what
// serve accepts (spec §9.16).
package setup

import (
	"errors"
	"fmt"
	"slices"

	"github.com/leashd/leash/adapter/descriptors"
	"github.com/leashd/leash/adapter/domains"
	"github.com/leashd/leash/config"
	"github.com/leashd/leash/engine"
)

// Directory builds the accounts: the config's, or with none the dev account on plan scale
// (spec §2.4) whose API keys have the given SHA-256 digests.
func Directory(cfg *config.Config, devKeys ...[32]byte) (*engine.Directory, error) {
	if cfg.HasAccounts() {
		return cfg.Directory()
	}
	plan, ok := cfg.Plans["scale"]
	if !ok {
		return nil, errors.New("plan scale is missing")
	}
	return engine.NewDirectory([]engine.AccountSpec{{ID: config.DevAccountID, Plan: plan, KeyHashes: devKeys}})
}

// Routing is the domain routing of cfg (envoy.domains, envoy.default_account and
// envoy.overdraft).
func Routing(cfg *config.Config) domains.Routing {
	r := domains.Routing{DefaultAccount: cfg.Envoy.DefaultAccount, Domains: make(map[string]string, len(cfg.Envoy.Domains)),
		Overdraft: cfg.Envoy.Overdraft}
	for d, v := range cfg.Envoy.Domains {
		r.Domains[d] = v.Account
		if v.Overdraft != nil {
			if r.DomainOverdraft == nil {
				r.DomainOverdraft = make(map[string]bool)
			}
			r.DomainOverdraft[d] = *v.Overdraft
		}
	}
	return r
}

// Envoy loads the descriptor files and folders of envoy.config_paths, then extra ones,
// with the domain routing. It does not check them against the accounts: Validate does.
func Envoy(cfg *config.Config, extra ...string) (*domains.Config, error) {
	ec := &domains.Config{Routing: Routing(cfg)}
	if paths := slices.Concat(cfg.Envoy.ConfigPaths, extra); len(paths) > 0 {
		d, err := descriptors.Load(paths...)
		if err != nil {
			return nil, err
		}
		ec.Descriptors = d
	}
	return ec, nil
}

// Result is what Check found.
type Result struct {
	Errors   []error  // every problem, one line each; none when the configuration is valid
	Accounts int      // accounts of the configuration (1, dev, without any)
	Domains  []string // domains of the descriptor files, sorted
}

// Check loads the Leash config files configPaths (with environ's LEASH_ variables) and the
// descriptor files of envoy.config_paths and descriptorPaths as `leash serve` would, and
// validates them together: every domain maps to an account whose plan has its algorithms.
// The descriptor files are checked on their own even when the config files fail.
func Check(configPaths, descriptorPaths, environ []string) Result {
	var res Result
	cfg, err := config.Load(configPaths, environ)
	if err != nil {
		res.Errors = append(res.Errors, split(err)...)
		if len(descriptorPaths) > 0 {
			if _, err := descriptors.Load(descriptorPaths...); err != nil {
				res.Errors = append(res.Errors, split(err)...)
			}
		}
		return res
	}
	dir, err := Directory(cfg)
	if err != nil {
		res.Errors = append(res.Errors, fmt.Errorf("accounts: %w", err))
	} else {
		res.Accounts = len(dir.Accounts())
	}
	ec, err := Envoy(cfg, descriptorPaths...)
	if err != nil {
		res.Errors = append(res.Errors, split(err)...)
		return res
	}
	res.Domains = ec.Descriptors.Domains()
	if dir != nil {
		if err := ec.Validate(dir); err != nil {
			res.Errors = append(res.Errors, split(err)...)
		}
	}
	return res
}

// split unwraps an errors.Join into its errors.
func split(err error) []error {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		var out []error
		for _, e := range j.Unwrap() {
			out = append(out, split(e)...)
		}
		return out
	}
	return []error{err}
}
