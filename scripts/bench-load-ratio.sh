#!/usr/bin/env bash
# Redis-store load figures for docs/performance.md, in one run on this machine:
#   1. wrk ratio: POST /v1/limit on the Redis store vs an empty Go handler (scripts/bench-http.sh)
#   2. redis-benchmark's raw EVALSHA rate for the same check script (no leash in the path)
#   3. leash and redis CPU per decision at a fixed offered rate (vegeta, RATE/s for LOAD_DURATION)
# Tools: wrk and redis-benchmark from Debian; vegeta from the Go module proxy, pinned below.
# Usage: make bench-load-ratio   (RATE=3000 LOAD_DURATION=20s REDIS_PORT=16390 to change)
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/lib.sh
RATE=${RATE:-3000}
LOAD_DURATION=${LOAD_DURATION:-20s}
export REDIS_PORT=${REDIS_PORT:-16390}
VEGETA_VERSION=v12.12.0
need redis-benchmark redis-tools
need redis-cli redis-tools
[ -x bin/leash ] || { echo "bin/leash is missing: make build" >&2; exit 1; }

if [ -z "${SKIP_WRK:-}" ]; then
	echo "== 1. wrk: leash on Redis vs empty handler"
	STORE=redis scripts/bench-http.sh
fi

vegeta=$out/bin/vegeta
if [ ! -x "$vegeta" ]; then
	echo "installing vegeta $VEGETA_VERSION into $out/bin"
	(d=$(mktemp -d) && cd "$d" && go mod init scratch >/dev/null 2>&1 &&
		GOBIN="$out/bin" GOFLAGS=-mod=mod go install "github.com/tsenart/vegeta/v12@$VEGETA_VERSION")
fi

start_redis "$REDIS_PORT"
start_leash redis

echo "== 2. redis-benchmark: EVALSHA of the check script (fixed_window, 10,000 keys)"
sha=$(redis-cli -p "$REDIS_PORT" SCRIPT LOAD "$(cat store/redisstore/lua/prelude.lua store/redisstore/lua/decide.lua store/redisstore/lua/spend.lua)")
for P in 1 16; do
	printf 'pipeline %2d: ' "$P"
	redis-benchmark -p "$REDIS_PORT" -c 50 -n 300000 -r 10000 -P "$P" -q \
		EVALSHA "$sha" 1 '{bench:__rand_int__}:f:60000' t 1000 f 1000000000 60000 1 | tr '\r' '\n' | tail -1
done
# Merged: one EVALSHA deciding 16 counters, as the pipe sends when 16 Spend requests wait to
# be written together (respipe's Merge).
keys=() args=()
for i in $(seq 16); do keys+=("{bench:__rand_int__}:f:6000$i"); args+=(f 1000000000 "6000$i" 1); done
printf 'merged 16:   '
redis-benchmark -p "$REDIS_PORT" -c 50 -n 40000 -r 10000 -q EVALSHA "$sha" 16 "${keys[@]}" t 1000 "${args[@]}" |
	tr '\r' '\n' | tail -1 | sed -E 's/.*: ([0-9.]+) requests per second.*/\1/' | awk '{printf "%.0f calls/s = %.0f decisions/s\n", $1, 16 * $1}'
printf 'pipeline  1: '
redis-benchmark -p "$REDIS_PORT" -c 50 -n 300000 -q PING | tr '\r' '\n' | tail -1

echo "== 3. CPU per decision at $RATE/s for $LOAD_DURATION (vegeta)"
: >"$out/targets.json"
for i in $(seq 0 999); do
	b=$(printf '{"namespace":"bench","key":"user-%d","limit":1000000000,"window_ms":60000}' "$i" | base64 -w0)
	printf '{"method":"POST","url":"http://127.0.0.1:18080/v1/limit","body":"%s","header":{"Authorization":["Bearer bench"],"Content-Type":["application/json"]}}\n' "$b" >>"$out/targets.json"
done
# cpu_per_decision STORE: leash (and redis-server) CPU over a fixed-rate run.
cpu_per_decision() {
	"$vegeta" attack -format=json -targets="$out/targets.json" -rate="$RATE/s" -duration=3s >/dev/null # warm-up
	local hz l0 r0 l1 r1 n
	hz=$(getconf CLK_TCK)
	l0=$(cpu_ticks "$leash_pid"); r0=$([ "$1" = redis ] && cpu_ticks "$redis_pid" || echo 0)
	"$vegeta" attack -format=json -targets="$out/targets.json" -rate="$RATE/s" -duration="$LOAD_DURATION" >"$out/attack-$1.bin"
	l1=$(cpu_ticks "$leash_pid"); r1=$([ "$1" = redis ] && cpu_ticks "$redis_pid" || echo 0)
	"$vegeta" report "$out/attack-$1.bin" | tee "$out/attack-$1.txt"
	n=$("$vegeta" report -type=json "$out/attack-$1.bin" | sed -n 's/.*"status_codes":{"200":\([0-9]*\)}.*/\1/p')
	[ -n "$n" ] || { echo "not every request answered 200" >&2; exit 1; }
	awk -v s="$1" -v l=$((l1 - l0)) -v r=$((r1 - r0)) -v hz="$hz" -v n="$n" 'BEGIN {
		printf "%s store: decisions %d  leash cpu %.2fs = %.1f µs/decision  redis-server cpu %.2fs = %.1f µs/decision\n",
			s, n, l/hz, 1e6*l/hz/n, r/hz, 1e6*r/hz/n }'
}
cpu_per_decision redis
echo "-- the same on the memory store, for comparison"
kill "$leash_pid"; wait "$leash_pid" 2>/dev/null || true
start_leash memory
cpu_per_decision memory
