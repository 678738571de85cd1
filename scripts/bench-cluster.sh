#!/usr/bin/env bash
# Redis Cluster figures for docs/performance.md: for each number of masters in MASTERS, a
# cluster of that many redis-server processes (no replicas) on loopback, one leash on it
# (gRPC, store.redis.cluster_addrs), and:
#   1. ghz -c CONC -z DURATION on ShouldRateLimit (10,000 counters spread over every slot):
#      decisions/s, leash's CPU and all redis-servers' CPU per decision, and how the
#      decisions spread over the masters (commandstats)
#   2. one master's ceiling with no leash in the path: redis-benchmark EVALSHA of the check
#      script against that master alone, 1 and 16 deep (what a shard can decide per second
#      when its core is Redis's alone; a hot key's ceiling is this, on its one master)
# Tools: redis-server, redis-cli, redis-benchmark and jq from Debian; ghz (installed by
# scripts/bench-grpc.sh into .bench/bin, or installed here).
# Usage: make bench-cluster   (MASTERS="1 3 6" DURATION=10s CONC=50 to change)
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/lib.sh
MASTERS=${MASTERS:-1 3 6}
DURATION=${DURATION:-10s}
CONC=${CONC:-50}
BASE_PORT=${BASE_PORT:-17300}
need jq jq
need redis-cli redis-tools
need redis-benchmark redis-tools
[ -x bin/leash ] || { echo "bin/leash is missing: make build" >&2; exit 1; }
grpc_bench_setup
script="$(cat engine/redisstore/lua/prelude.lua engine/redisstore/lua/decide.lua engine/redisstore/lua/spend.lua)"

# start_cluster N: N masters on BASE_PORT.., slots split evenly; sets ports and rpids.
start_cluster() {
	local n=$1 p dir
	ports=(); rpids=()
	for i in $(seq 0 $((n - 1))); do
		p=$((BASE_PORT + i)); dir=$out/cluster-$n/$p
		rm -rf "$dir"; mkdir -p "$dir"
		(cd "$dir" && exec redis-server --bind 127.0.0.1 --port "$p" --cluster-enabled yes \
			--cluster-config-file nodes.conf --save '' --appendonly no --loglevel warning) >"$dir/log" 2>&1 &
		pids+=($!); rpids+=($!); ports+=("$p")
		wait_port "127.0.0.1:$p"
	done
	if [ "$n" -eq 1 ]; then
		redis-cli -p "${ports[0]}" CLUSTER ADDSLOTSRANGE 0 16383 >/dev/null
	else
		redis-cli --cluster create $(printf '127.0.0.1:%s ' "${ports[@]}") --cluster-replicas 0 --cluster-yes >/dev/null
	fi
	for _ in $(seq 100); do
		redis-cli -p "${ports[0]}" CLUSTER INFO | grep -q 'cluster_state:ok' && return 0
		sleep 0.1
	done
	echo "cluster of $n did not become ok" >&2; exit 1
}
stop_cluster() { for p in "${rpids[@]}"; do kill "$p" 2>/dev/null || true; wait "$p" 2>/dev/null || true; done; }
redis_ticks() { local t=0; for p in "${rpids[@]}"; do t=$((t + $(cpu_ticks "$p"))); done; echo "$t"; }

start_leash_cluster() {
	local cfg=$out/leash-cluster.yaml
	{
		printf 'accounts:\n  - {id: bench, plan: scale, api_keys: [bench]}\n'
		printf 'envoy:\n  config_paths: [%s]\n  domains: {bench: {account: bench}}\n' "$PWD/$out/ratelimit-bench.yaml"
		printf 'store:\n  backend: redis\n  redis:\n    cluster_addrs: [%s]\n' "$(printf '"127.0.0.1:%s",' "${ports[@]}" | sed 's/,$//')"
	} >"$cfg"
	env LEASH_HTTP_ADDR=127.0.0.1:18080 LEASH_ADMIN_ADDR=127.0.0.1:19090 LEASH_GRPC_ADDR=127.0.0.1:18081 \
		LEASH_LOG_LEVEL=warn ./bin/leash serve --config "$cfg" >"$out/leash.log" 2>&1 &
	pids+=($!); leash_pid=$!
	wait_port 127.0.0.1:18081
}

ghz_run() {
	"$ghz" --insecure --protoset "$out/rls.protoset" --call envoy.service.ratelimit.v3.RateLimitService.ShouldRateLimit \
		-D "$out/rls-data.json" --duration-stop=wait -O json "$@" 127.0.0.1:18081 | jq 'del(.details, .options.data)'
}

for n in $MASTERS; do
	start_cluster "$n"
	start_leash_cluster
	ghz_run -c "$CONC" -z 3s >/dev/null # warm-up
	for p in "${ports[@]}"; do redis-cli -p "$p" CONFIG RESETSTAT >/dev/null; done
	hz=$(getconf CLK_TCK); l0=$(cpu_ticks "$leash_pid"); r0=$(redis_ticks)
	ghz_run -c "$CONC" -z "$DURATION" >"$out/cluster-$n.json"
	l1=$(cpu_ticks "$leash_pid"); r1=$(redis_ticks)
	jq -e '(.statusCodeDistribution | keys) == ["OK"]' "$out/cluster-$n.json" >/dev/null ||
		{ echo "errors against the cluster of $n:" >&2; jq '.statusCodeDistribution, .errorDistribution' "$out/cluster-$n.json" >&2; exit 1; }
	calls=$(jq '.statusCodeDistribution.OK' "$out/cluster-$n.json")
	spread=$(for p in "${ports[@]}"; do
		redis-cli -p "$p" INFO commandstats | awk -F'[=,:]' '/^cmdstat_evalsha:/ {print $3}'; done | paste -sd/)
	batch=$(for p in "${ports[@]}"; do redis-cli -p "$p" INFO stats | awk -F: '/^total_reads_processed/ {print $2}' | tr -d '\r'; done |
		awk -v c="$calls" '{t += $1} END {printf "%.1f", c / t}')
	awk -v n="$n" -v rps="$(jq .rps "$out/cluster-$n.json")" -v p99="$(jq '.latencyDistribution[] | select(.percentage == 99) | .latency / 1e6' "$out/cluster-$n.json")" \
		-v l=$((l1 - l0)) -v r=$((r1 - r0)) -v hz="$hz" -v c="$calls" -v spread="$spread" -v batch="$batch" 'BEGIN {
		printf "%d master(s): %6.0f decisions/s p99 %5.2f ms  leash %5.1f µs + redis %4.1f µs CPU per decision  %s decisions per read  EVALSHA per master %s\n",
			n, rps, p99, 1e6*l/hz/c, 1e6*r/hz/c, batch, spread }'
	kill "$leash_pid"; wait "$leash_pid" 2>/dev/null || true
	if [ "$n" = "$(echo "$MASTERS" | awk '{print $1}')" ]; then
		sha=$(redis-cli -p "${ports[0]}" SCRIPT LOAD "$script")
		for P in 1 16; do
			printf '   one master alone, redis-benchmark EVALSHA -c 50 -P %2d: ' "$P"
			# Every key in one slot ({bench}): the whole cluster is this one master's.
			redis-benchmark -p "${ports[0]}" -c 50 -n 300000 -r 10000 -P "$P" -q \
				EVALSHA "$sha" 1 '{bench}:__rand_int__:f:60000' t 1000 f 1000000000 60000 1 | tr '\r' '\n' | tail -1 | sed 's/.*1: //'
		done
	fi
	stop_cluster
done
