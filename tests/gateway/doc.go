// Package gateway runs the built leash as Envoy Gateway runs envoyproxy/ratelimit: the
// binary named ratelimit, started with the environment Envoy Gateway's ratelimit
// Deployment sets, descriptors pushed over xDS and a real Redis (spec §9.18).
package gateway
