// Package adapter holds Leash's Envoy edges, one package each, all above the engine:
//
//   - rls: Envoy's RateLimitService (envoy.service.ratelimit.v3) over gRPC, the gRPC
//     server that also hosts RLQS, and the peer's /json endpoint (spec §9);
//   - rlqs: Envoy's Rate Limit Quota Service, which divides each limit among the proxies
//     (spec §14);
//   - descriptors: the peer's descriptor files and xDS RateLimitConfig resources, parsed
//     and matched (spec §9.2–§9.4);
//   - domains: which account each Envoy domain counts against, the descriptor rules in
//     force, and the counter key a descriptor spends (spec §9.1, §9.8);
//   - xds: the SotW ADS client that receives RateLimitConfig from a management server
//     (spec §9.14).
//
// This package itself has no code.
package adapter
