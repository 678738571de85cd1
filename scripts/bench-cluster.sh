#!/usr/bin/env bash
# How Redis Cluster scales: for each number of masters in MASTERS, a cluster of that many
# redis-server processes (no replicas) on loopback, the masters pinned to the CPUs of REDIS_CPUS
# in turn, one server on it, and HTTP POST /v1/limit (the algorithms of ALGS) and Envoy's
# ShouldRateLimit under each load of LOADS: decisions/s, server and Redis CPU per decision (Redis
# summed over the masters) and decisions per script call; prints one markdown table
# (docs/measuring.md says what each column means).
# Usage: make bench-cluster
#   MASTERS="1 3 6"  ALGS=sliding_window  LOADS=closed  DURATION=10s WARMUP=3s ROUNDS=1
#   REDIS_CPUS=1 SERVER_CPUS=0 LOAD_CPUS=0 GOMAXPROCS=  (e.g. REDIS_CPUS=1-6 on a many-core machine)
#   LEASH_BIN=bin/leash BASE_BIN=  (or BEFORE_BIN= AFTER_BIN=)  PEER_BIN=
set -euo pipefail
cd "$(dirname "$0")/.."
MASTERS=${MASTERS:-1 3 6}
ALGS=${ALGS:-sliding_window}
LOADS=${LOADS:-closed}
. scripts/lib.sh
TOPOLOGY=$(printf 'cluster:%s ' $MASTERS)
bench_matrix cluster "http grpc"
