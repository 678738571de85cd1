#!/usr/bin/env bash
# HTTP load ratio: wrk at 50 connections against an empty Go handler (the ceiling) and
# against leash's POST /v1/limit, alternating ROUNDS times in one run with the same request
# script, then the median of each. The machine is shared, so only the ratio is meaningful.
# Usage: make bench-http (memory store) or STORE=redis scripts/bench-http.sh;
#        DURATION=10s CONNS=50 THREADS=1 ROUNDS=3 to change.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/lib.sh
STORE=${STORE:-memory}
DURATION=${DURATION:-10s}
CONNS=${CONNS:-50}
THREADS=${THREADS:-1}
ROUNDS=${ROUNDS:-3}
REDIS_PORT=${REDIS_PORT:-16390}
need wrk wrk
[ -x bin/leash ] || { echo "bin/leash is missing: make build" >&2; exit 1; }

[ "$STORE" = redis ] && start_redis "$REDIS_PORT"
start_empty
start_leash "$STORE"

# 10,000 keys so the run is not one hot counter; the limit is high so every check is allowed.
# The empty handler gets the same requests (it reads and ignores the body).
cat > "$out/limit.lua" <<'LUA'
local n = 0
local hdr = {["Authorization"]="Bearer bench", ["Content-Type"]="application/json"}
request = function()
  n = n + 1
  local body = '{"namespace":"bench","key":"user-' .. (n % 10000) .. '","limit":1000000000,"window_ms":60000}'
  return wrk.format("POST", "/v1/limit", hdr, body)
end
LUA

run() { wrk -t"$THREADS" -c"$CONNS" -d"$DURATION" --latency -s "$out/limit.lua" "$1"; }
rps() { awk '/Requests\/sec/ {print $2}' "$1"; }
p99() { awk '$1 == "99%" {print $2}' "$1"; }
median() { sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }

run http://127.0.0.1:18080/v1/limit >/dev/null # warm-up: connections, counters, GC heap
: >"$out/rounds.txt"
for i in $(seq "$ROUNDS"); do
	run http://127.0.0.1:18090/ >"$out/empty-$i.txt"
	run http://127.0.0.1:18080/v1/limit >"$out/leash-$i.txt"
	grep -q '^Non-2xx' "$out/leash-$i.txt" && { echo "leash answered non-2xx:" >&2; cat "$out/leash-$i.txt" >&2; exit 1; }
	printf 'round %d  empty %9s rps p99 %-8s  leash(%s) %9s rps p99 %-8s\n' "$i" \
		"$(rps "$out/empty-$i.txt")" "$(p99 "$out/empty-$i.txt")" "$STORE" \
		"$(rps "$out/leash-$i.txt")" "$(p99 "$out/leash-$i.txt")" | tee -a "$out/rounds.txt"
done
e=$(for i in $(seq "$ROUNDS"); do rps "$out/empty-$i.txt"; done | median)
l=$(for i in $(seq "$ROUNDS"); do rps "$out/leash-$i.txt"; done | median)
echo "median: empty $e rps, leash($STORE) $l rps, ratio $(awk -v l="$l" -v e="$e" 'BEGIN{printf "%.1f%%", 100*l/e}')"
