// Package reliability holds Leash's process-level reliability tests: each starts the built
// `leash serve` (package leashproc) and drives it under load, faults and restarts as its
// users would (docs/reliability.md lists every property and its test). The short variants
// run in `make test`; RELIABILITY_LONG=1 (`make reliability-long`) stretches every phase.
package reliability
