package rules_test

import (
	"context"
	"testing"

	"github.com/leashd/leash/testkit"

	"github.com/leashd/leash/engine"
	"github.com/leashd/leash/engine/rules"
	"github.com/leashd/leash/testkit/enginekit"
)

func TestRuleValidation(t *testing.T) {
	ctx := context.Background()
	f := enginekit.New(t, nil)
	acme := f.Accts["acme"]
	tests := []struct {
		name string
		req  rules.RuleRequest
		code engine.Code
	}{
		{"missing algorithm", rules.RuleRequest{Limit: testkit.Ptr(int64(1)), WindowMS: testkit.Ptr(int64(1))}, engine.CodeInvalidRequest},
		{"missing limit", rules.RuleRequest{Algorithm: testkit.Ptr("fixed_window"), WindowMS: testkit.Ptr(int64(1))}, engine.CodeInvalidRequest},
		{"negative window", rules.RuleRequest{Algorithm: testkit.Ptr("fixed_window"), Limit: testkit.Ptr(int64(1)), WindowMS: testkit.Ptr(int64(-1))}, engine.CodeInvalidRequest},
		{"limit 0", rules.RuleRequest{Algorithm: testkit.Ptr("fixed_window"), Limit: testkit.Ptr(int64(0)), WindowMS: testkit.Ptr(int64(1))}, engine.CodeInvalidRule},
		{"limit above max", rules.RuleRequest{Algorithm: testkit.Ptr("fixed_window"), Limit: testkit.Ptr(engine.MaxLimit + 1), WindowMS: testkit.Ptr(int64(1))}, engine.CodeInvalidRule},
		{"window above max", rules.RuleRequest{Algorithm: testkit.Ptr("fixed_window"), Limit: testkit.Ptr(int64(1)), WindowMS: testkit.Ptr(engine.MaxWindowMS + 1)}, engine.CodeInvalidRule},
		{"unknown algorithm", rules.RuleRequest{Algorithm: testkit.Ptr("x"), Limit: testkit.Ptr(int64(1)), WindowMS: testkit.Ptr(int64(1))}, engine.CodeUnknownAlgorithm},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := f.Eng.Rules.Put(ctx, acme, "n", &tc.req)
			enginekit.WantCode(t, err, tc.code)
		})
	}
	r, created, err := f.Eng.Rules.Put(ctx, acme, "n", &rules.RuleRequest{Algorithm: testkit.Ptr("token_bucket"), Limit: testkit.Ptr(engine.MaxLimit), WindowMS: testkit.Ptr(engine.MaxWindowMS), Name: testkit.Ptr("max")})
	if err != nil || !created || r.Namespace != "n" || r.Limit != engine.MaxLimit {
		t.Fatalf("PutRule at the bounds = %+v %v %v", r, created, err)
	}
}
