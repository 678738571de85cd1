#!/usr/bin/env bash
# Redis CPU per decision on HTTP POST /v1/limit, per algorithm, under closed-loop load (wrk)
# and at fixed offered rates (vegeta), on one redis-server and on a 3-master Redis Cluster, with
# Redis, the server and the load tool pinned to CPU sets; prints one markdown table
# (docs/measuring.md says what each column means).
# Usage: make bench-load
#   TOPOLOGY="single cluster:3"  ALGS="fixed_window sliding_window token_bucket"
#   LOADS="closed 3000 20000"  DURATION=10s WARMUP=3s ROUNDS=1  KEYS=10000
#   REDIS_CPUS=1 SERVER_CPUS=0 LOAD_CPUS=0 GOMAXPROCS=  WRK_THREADS=2 WRK_CONNS=256
#   LEASH_BIN=bin/leash BASE_BIN=  (or BEFORE_BIN= AFTER_BIN=): more than one binary in one run
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/lib.sh
TOPOLOGY=${TOPOLOGY:-single cluster:3}
ALGS=${ALGS:-fixed_window sliding_window token_bucket}
bench_matrix load http
