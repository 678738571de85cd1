package memstore

import (
	"context"
	"fmt"

	"github.com/leashd/leash/engine"
	"github.com/leashd/leash/store/memstore/record"
)

// rulePair is a namespace's two rule slots; the rules are the store's own copies.
type rulePair struct {
	rate, concurrent *engine.Rule
}

// copyRule returns a copy of r that shares nothing with it.
func copyRule(r engine.Rule) *engine.Rule {
	c := r
	if r.Name != nil {
		name := *r.Name
		c.Name = &name
	}
	return &c
}

// rulesCopy backs the rules Rules returns, in one allocation.
type rulesCopy struct {
	rules [2]engine.Rule
	names [2]string
}

// Rules returns a namespace's rules; the caller owns the returned values.
func (s *tables) Rules(_ context.Context, account, namespace string) (engine.Rules, error) {
	if s.closed.Load() {
		return engine.Rules{}, ErrClosed
	}
	var buf [keyBufSize]byte
	k := appendRuleKey(buf[:0], account, namespace)
	sh, _ := s.shardOf(k)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	p := sh.rules[string(k)]
	if p == nil {
		return engine.Rules{}, nil
	}
	c := new(rulesCopy)
	var out engine.Rules
	for i, r := range [2]*engine.Rule{p.rate, p.concurrent} {
		if r == nil {
			continue
		}
		c.rules[i] = *r
		if r.Name != nil {
			c.names[i] = *r.Name
			c.rules[i].Name = &c.names[i]
		}
		if i == 0 {
			out.Rate = &c.rules[i]
		} else {
			out.Concurrent = &c.rules[i]
		}
	}
	return out, nil
}

// PutRule stores a copy of r in the slot of its kind; created is false when it replaced one.
func (s *tables) PutRule(_ context.Context, account, namespace string, r engine.Rule) (bool, error) {
	if s.closed.Load() {
		return false, ErrClosed
	}
	if r.Algorithm < engine.FixedWindow || r.Algorithm > engine.ConcurrentLimit {
		return false, errInvalidRule
	}
	var buf [keyBufSize]byte
	k := appendRuleKey(buf[:0], account, namespace)
	sh, _ := s.shardOf(k)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	p := sh.rules[string(k)]
	if p == nil {
		p = new(rulePair)
		sh.rules[string(k)] = p
	}
	slot := &p.rate
	if r.Algorithm.Kind() == engine.ConcurrentRule {
		slot = &p.concurrent
	}
	created := *slot == nil
	c := copyRule(r)
	if sh.j != nil {
		var b [recBufSize]byte
		if err := sh.j.Set(record.RuleKey(b[:0], string(k), r.Algorithm.Kind()), record.EncodeRule(c)); err != nil {
			if *slot == nil && p.concurrent == nil && p.rate == nil {
				delete(sh.rules, string(k))
			}
			return false, fmt.Errorf("memstore: put rule: %w", err)
		}
	}
	*slot = c
	return created, nil
}

// DeleteRule removes the rule of one kind; deleted reports whether one existed.
func (s *tables) DeleteRule(_ context.Context, account, namespace string, kind engine.RuleKind) (bool, error) {
	if s.closed.Load() {
		return false, ErrClosed
	}
	var buf [keyBufSize]byte
	k := appendRuleKey(buf[:0], account, namespace)
	sh, _ := s.shardOf(k)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	p := sh.rules[string(k)]
	if p == nil {
		return false, nil
	}
	slot := &p.rate
	if kind == engine.ConcurrentRule {
		slot = &p.concurrent
	}
	deleted := *slot != nil
	if deleted && sh.j != nil {
		var b [recBufSize]byte
		if err := sh.j.Delete(record.RuleKey(b[:0], string(k), kind)); err != nil {
			return false, fmt.Errorf("memstore: delete rule: %w", err)
		}
	}
	*slot = nil
	if p.rate == nil && p.concurrent == nil {
		delete(sh.rules, string(k))
	}
	return deleted, nil
}
