#!/usr/bin/env bash
# Redis CPU per decision on Envoy's ShouldRateLimit (one descriptor, a fixed window), under
# closed-loop load and at fixed offered rates (ghz, ghz --rps), on one redis-server and on a
# 3-master Redis Cluster, with Redis, the server and the load tool pinned to CPU sets; also for
# envoyproxy/ratelimit when PEER_BIN names its binary (built from its public source outside this
# repository: `go build -o /tmp/peer/ratelimit ./src/service_cmd`); prints one markdown table
# (docs/measuring.md says what each column means).
# Usage: make bench-grpc
#   TOPOLOGY="single cluster:3"  LOADS="closed 3000 20000"  DURATION=10s WARMUP=3s ROUNDS=1
#   REDIS_CPUS=1 SERVER_CPUS=0 LOAD_CPUS=0 GOMAXPROCS=  GHZ_CONC=256 GHZ_CONNS=8  KEYS=10000
#   LEASH_BIN=bin/leash BASE_BIN=  (or BEFORE_BIN= AFTER_BIN=)  PEER_BIN=
# The older ratio against an empty RateLimitService is scripts/bench-grpc-ratio.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/lib.sh
TOPOLOGY=${TOPOLOGY:-single cluster:3}
bench_matrix grpc grpc
