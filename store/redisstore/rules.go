package redisstore

import (
	"context"
	"errors"

	"github.com/leashd/leash/engine"
	"github.com/leashd/leash/store/redisstore/rules"
)

// Rules returns a namespace's rules, from the cache (package rules) when it is fresh.
func (s *RuleStore) Rules(ctx context.Context, account, namespace string) (engine.Rules, error) {
	if s.closed.Load() {
		return engine.Rules{}, errClosed
	}
	if r, ok := s.rules.Get(account, namespace); ok {
		return r, nil
	}
	ctx = s.opCtx(ctx)
	cmd, err := s.eval(ctx, s.scripts.RulesGet, []string{s.keys.Rules(account, namespace), s.keys.RulesVersion()})
	if err != nil {
		return engine.Rules{}, err
	}
	res, err := cmd.Slice()
	if err != nil {
		return engine.Rules{}, err
	}
	if len(res) != 3 {
		return engine.Rules{}, errors.New("redisstore: rules: malformed script reply")
	}
	ver, ok := res[0].(int64)
	if !ok {
		return engine.Rules{}, errors.New("redisstore: rules: malformed version")
	}
	var out engine.Rules
	if out.Rate, err = rules.Decode(res[1]); err != nil {
		return engine.Rules{}, err
	}
	if out.Concurrent, err = rules.Decode(res[2]); err != nil {
		return engine.Rules{}, err
	}
	s.rules.Observe(ver, false)
	s.rules.Put(account, namespace, out, ver)
	return out, nil
}

// PutRule stores r in its kind's slot and bumps the rules version (one script).
func (s *RuleStore) PutRule(ctx context.Context, account, namespace string, r engine.Rule) (bool, error) {
	b, err := rules.Encode(r)
	if err != nil {
		return false, err
	}
	res, err := s.run(ctx, s.scripts.RulesPut, []string{s.keys.Rules(account, namespace), s.keys.RulesVersion(), s.keys.RuleIndex(account)},
		r.Algorithm.Kind().String(), string(b), namespace)
	if err != nil {
		return false, err
	}
	if len(res) != 2 {
		return false, errors.New("redisstore: put rule: malformed script reply")
	}
	s.rules.Drop(account, namespace)
	s.rules.Observe(res[1], false)
	return res[0] == 1, nil
}

// DeleteRule removes the rule of one kind and bumps the rules version when one existed.
func (s *RuleStore) DeleteRule(ctx context.Context, account, namespace string, kind engine.RuleKind) (bool, error) {
	res, err := s.run(ctx, s.scripts.RulesDel, []string{s.keys.Rules(account, namespace), s.keys.RulesVersion(), s.keys.RuleIndex(account)},
		kind.String(), namespace)
	if err != nil {
		return false, err
	}
	if len(res) != 2 {
		return false, errors.New("redisstore: delete rule: malformed script reply")
	}
	s.rules.Drop(account, namespace)
	s.rules.Observe(res[1], false)
	return res[0] == 1, nil
}
