// Package rlqs serves Envoy's Rate Limit Quota Service
// (envoy.service.rate_limit_quota.v3.RateLimitQuotaService) over the engine: each proxy
// reports, over one stream, what it allowed and denied per bucket every reporting
// interval; Leash spends the allowed requests on the bucket's global counter (the one
// RateLimitService and POST /v1/limit use for the same key) and answers with quota
// assignments, each stream's share of the budget, which the proxy enforces locally
// (spec §14).
//
// A stream's first report names the domain, which picks the account as for
// RateLimitService. A bucket id is matched against the domain's descriptors by
// descriptors.MatchBucket; a bucket no descriptor matches falls back to the namespace's
// rate rule, and with neither it is ALLOW_ALL. The shares come from the demand every
// stream, on every instance, reported recently (engine.DemandStore), divided by Share.
package rlqs
