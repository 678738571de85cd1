// Package rules is the capability that keeps each namespace's rules and their per-key
// overrides (spec §6): writing them with their checks, listing and deleting them. It
// reaches the store only through Port.
package rules

import (
	"context"
	"strconv"

	"github.com/leashd/leash/engine"
)

// Port is what rules need of a store: the RuleStore role.
type Port interface {
	// Rules is engine.RuleStore's.
	Rules(ctx context.Context, account, namespace string) (engine.Rules, error)
	// PutRule is engine.RuleStore's.
	PutRule(ctx context.Context, account, namespace string, r engine.Rule) (created bool, err error)
	// DeleteRule is engine.RuleStore's.
	DeleteRule(ctx context.Context, account, namespace string, kind engine.RuleKind) (deleted bool, err error)
	// RuleNamespaces is engine.RuleStore's.
	RuleNamespaces(ctx context.Context, account string) ([]engine.NamespaceRules, error)
}

// Auditor records a change in the audit log (spec §15.10).
type Auditor interface {
	// Record adds a change made by by.
	Record(ctx context.Context, by engine.Actor, ent engine.AuditEntry)
}

// Rules writes, reads and deletes namespaces' rules over a Port.
type Rules struct {
	store Port
	audit Auditor
}

// New returns the rules capability over store, recording changes in audit.
func New(store Port, audit Auditor) *Rules { return &Rules{store: store, audit: audit} }

// RuleRequest is the body of POST /v1/namespaces/{ns}/rules. A limit or window beyond
// int64 is passed as math.MaxInt64 (out of range: invalid_rule).
type RuleRequest struct {
	Algorithm *string
	Limit     *int64
	WindowMS  *int64
	Name      *string
	// Overrides are the rule's per-key overrides (spec §6.7), in the order sent; none
	// (nil or empty) clears them, as the rule is replaced whole.
	Overrides []OverrideRequest
}

// OverrideRequest is one entry of a rule's overrides as sent; nil fields are absent. A
// limit or window beyond int64 is passed as math.MaxInt64, as in RuleRequest.
type OverrideRequest struct {
	Key      *string
	Limit    *int64
	WindowMS *int64
}

// NamespaceRule is a rule together with the namespace it belongs to.
type NamespaceRule struct {
	Namespace string
	engine.Rule
}

// Put creates or replaces the namespace's rule of the algorithm's kind (spec §6.2).
func (s *Rules) Put(ctx context.Context, a *engine.Account, ns string, r *RuleRequest) (NamespaceRule, bool, error) {
	if err := engine.Active(a); err != nil {
		return NamespaceRule{}, false, err
	}
	if err := engine.CheckNamespace(ns); err != nil {
		return NamespaceRule{}, false, err
	}
	if r.Algorithm == nil {
		return NamespaceRule{}, false, engine.Invalid("algorithm is required")
	}
	if r.Limit == nil {
		return NamespaceRule{}, false, engine.Invalid("limit is required")
	}
	if r.WindowMS == nil {
		return NamespaceRule{}, false, engine.Invalid("window_ms is required")
	}
	if *r.Limit < 0 {
		return NamespaceRule{}, false, engine.Invalid(engine.RangeMessage("limit", 1, engine.MaxLimit))
	}
	if *r.WindowMS < 0 {
		return NamespaceRule{}, false, engine.Invalid(engine.RangeMessage("window_ms", 1, engine.MaxWindowMS))
	}
	if r.Name != nil && len(*r.Name) > engine.MaxRuleName {
		return NamespaceRule{}, false, engine.Invalid("name must be at most 256 bytes")
	}
	if r.Name != nil && engine.HasBidiControl(*r.Name) {
		return NamespaceRule{}, false, engine.Invalid(engine.MsgBidi)
	}
	if err := checkOverrideFields(r.Overrides); err != nil {
		return NamespaceRule{}, false, err
	}
	if *r.Limit < 1 || *r.Limit > engine.MaxLimit {
		return NamespaceRule{}, false, engine.NewError(engine.CodeInvalidRule, engine.RangeMessage("limit", 1, engine.MaxLimit))
	}
	if *r.WindowMS < 1 || *r.WindowMS > engine.MaxWindowMS {
		return NamespaceRule{}, false, engine.NewError(engine.CodeInvalidRule, engine.RangeMessage("window_ms", 1, engine.MaxWindowMS))
	}
	overrides, err := checkOverrideRanges(r.Overrides)
	if err != nil {
		return NamespaceRule{}, false, err
	}
	alg, ok := engine.ParseAlgorithm(*r.Algorithm)
	if !ok {
		return NamespaceRule{}, false, engine.NewError(engine.CodeUnknownAlgorithm, "algorithm must be one of fixed_window, sliding_window, token_bucket, concurrent_limit")
	}
	if !a.Plan.AllowsAlgorithm(alg) {
		return NamespaceRule{}, false, engine.NewError(engine.CodeAlgorithmNotOnPlan, "algorithm "+alg.String()+" is not available on plan "+a.Plan.Name)
	}
	rule := engine.Rule{Algorithm: alg, Limit: *r.Limit, WindowMS: *r.WindowMS, Name: r.Name, Overrides: overrides}
	created, err := s.store.PutRule(ctx, a.ID, ns, rule)
	if err != nil {
		return NamespaceRule{}, false, engine.Unavailable(err)
	}
	details := map[string]string{"algorithm": alg.String(), "limit": strconv.FormatInt(rule.Limit, 10),
		"window_ms": strconv.FormatInt(rule.WindowMS, 10), "overrides": strconv.Itoa(overrides.Len())}
	if rule.Name != nil {
		details["name"] = *rule.Name
	}
	s.audit.Record(ctx, engine.Actor{Account: a.ID}, engine.AuditEntry{Action: engine.AuditRuleSet, Account: a.ID, AccountCreatedMS: a.CreatedMS, Target: ns + "/" + alg.Kind().String(), Details: details})
	return NamespaceRule{Namespace: ns, Rule: rule}, created, nil
}

// List lists the namespace's rules: the rate rule first, then the concurrent rule.
func (s *Rules) List(ctx context.Context, a *engine.Account, ns string) ([]engine.Rule, error) {
	if err := engine.CheckNamespace(ns); err != nil {
		return nil, err
	}
	rules, err := s.store.Rules(ctx, a.ID, ns)
	if err != nil {
		return nil, engine.Unavailable(err)
	}
	out := make([]engine.Rule, 0, 2)
	for _, r := range []*engine.Rule{rules.Rate, rules.Concurrent} {
		if r != nil {
			out = append(out, *r)
		}
	}
	return out, nil
}

// Delete removes the namespace's rule of one kind; deleting none is not an error.
func (s *Rules) Delete(ctx context.Context, a *engine.Account, ns string, kind engine.RuleKind) (bool, error) {
	if err := engine.Active(a); err != nil {
		return false, err
	}
	if err := engine.CheckNamespace(ns); err != nil {
		return false, err
	}
	deleted, err := s.store.DeleteRule(ctx, a.ID, ns, kind)
	if err != nil {
		return false, engine.Unavailable(err)
	}
	if deleted {
		s.audit.Record(ctx, engine.Actor{Account: a.ID}, engine.AuditEntry{Action: engine.AuditRuleDeleted, Account: a.ID, AccountCreatedMS: a.CreatedMS, Target: ns + "/" + kind.String()})
	}
	return deleted, nil
}

// DeleteAll removes every rule of the account (a deleted account's, spec §15.6).
func (s *Rules) DeleteAll(ctx context.Context, account string) error {
	nss, err := s.store.RuleNamespaces(ctx, account)
	if err != nil {
		return err
	}
	for _, ns := range nss {
		for _, k := range []engine.RuleKind{engine.RateRule, engine.ConcurrentRule} {
			if _, err := s.store.DeleteRule(ctx, account, ns.Namespace, k); err != nil {
				return err
			}
		}
	}
	return nil
}
