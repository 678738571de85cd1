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
	return DirectoryWith(cfg, nil, devKeys...)
}

// DirectoryWith is Directory with operators added to the configured ones (the dev
// operator, spec §15.1).
func DirectoryWith(cfg *config.Config, extraOps []engine.OperatorSpec, devKeys ...[32]byte) (*engine.Directory, error) {
	if cfg.HasAccounts() {
		return cfg.Directory(extraOps...)
	}
	plan, ok := cfg.Plans["scale"]
	if !ok {
		return nil, errors.New("plan scale is missing")
	}
	ops, err := cfg.OperatorSpecs()
	if err != nil {
		return nil, err
	}
	return engine.NewDirectoryWith([]engine.AccountSpec{{ID: config.DevAccountID, Plan: plan, KeyHashes: devKeys}},
		engine.DirectoryOptions{Operators: append(ops, extraOps...), Plans: cfg.Plans})
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
	Problems int      // how many problems: len(Errors)
	Accounts int      // accounts of the configuration (1, dev, without any)
	Domains  []string // domains of the descriptor files, sorted
	// Replaced are the envoy.config_paths left unchecked because descriptor paths were
	// given in their place.
	Replaced []string
}

// Check loads the Leash config files configPaths (with environ's LEASH_ variables) and the
// descriptor files as `leash serve` would, and validates them together: every domain maps
// to an account whose plan has its algorithms (spec §9.16). The descriptor files are those
// of descriptorPaths when any are given, which replace envoy.config_paths (paths where the
// deployment mounts them, often not on the machine that checks), else envoy.config_paths.
// Each descriptor file is loaded on its own, so that a missing path or a broken file hides
// no other file's problems; the descriptor files are checked even when the config files
// fail. It opens no listener and contacts neither the store nor an xDS server.
func Check(configPaths, descriptorPaths, environ []string) Result {
	var res Result
	add := func(errs ...error) {
		for _, err := range errs {
			res.Errors = append(res.Errors, split(err)...)
		}
	}
	cfg, err := config.Load(configPaths, environ)
	if err != nil {
		add(err)
		_, errs := loadEach(descriptorPaths)
		add(errs...)
		res.Problems = len(res.Errors)
		return res
	}
	dir, err := Directory(cfg)
	if err != nil {
		add(fmt.Errorf("accounts: %w", err))
	} else {
		res.Accounts = len(dir.Accounts())
	}
	paths := cfg.Envoy.ConfigPaths
	if len(descriptorPaths) > 0 {
		paths, res.Replaced = descriptorPaths, cfg.Envoy.ConfigPaths
	}
	d, errs := loadEach(paths)
	add(errs...)
	ec := &domains.Config{Descriptors: d, Routing: Routing(cfg)}
	res.Domains = ec.Descriptors.Domains()
	if dir != nil {
		if err := ec.Validate(dir); err != nil {
			add(err)
		}
	}
	res.Problems = len(res.Errors)
	return res
}

// loadEach loads the descriptor files that paths name one file at a time: the files named,
// and a folder's files as descriptors.Load lists them (*.yaml and *.yml, not hidden, regular
// files or links to them, in name order), each file once. It returns the domains of the
// files that loaded, a domain defined twice kept from its first file, and every problem:
// a path that cannot be read, each file's own, and each duplicate domain.
func loadEach(paths []string) (*descriptors.Config, []error) {
	var errs []error
	var files []string
	for _, l := range descriptors.Files(paths) {
		if l.Err != nil {
			errs = append(errs, l.Err)
		} else {
			files = append(files, l.Name)
		}
	}
	var all *descriptors.Config
	for _, f := range files {
		c, err := descriptors.Load(f)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		merged, err := descriptors.Merge(all, c)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		all = merged
	}
	return all, errs
}

// split unwraps an errors.Join into its errors, and a config.Error into its lines: one
// problem each.
func split(err error) []error {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		var out []error
		for _, e := range j.Unwrap() {
			out = append(out, split(e)...)
		}
		return out
	}
	var ce *config.Error
	if errors.As(err, &ce) { // every problem, not the first 20 of the error's text
		out := make([]error, len(ce.Problems))
		for i, p := range ce.Problems {
			out[i] = errors.New("config: " + p)
		}
		return out
	}
	return []error{err}
}
