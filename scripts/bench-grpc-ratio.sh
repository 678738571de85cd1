#!/usr/bin/env bash
# Envoy gRPC load figures for docs/performance.md, in one run on this machine:
#   1. ghz ratio: envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit on leash's gRPC
#      listener (Redis store) vs an empty RateLimitService (scripts/emptyrls: answers OK, no
#      store), concurrency CONC, alternating ROUNDS times, then the median of each; each run
#      also reports the CPU per call of the server, redis-server and ghz, and how busy the
#      machine was
#      A second empty server answers every call with leash's own reply (scripts/emptyrls
#      -reply-like): ghz decodes the same reply from both, so its rate is the ceiling for a
#      server that gives leash's reply on this machine.
#   2. leash and redis-server CPU per decision at a fixed RATE/s for LOAD_DURATION (ghz --rps),
#      then the same on the memory store and on the empty server, for comparison
#   With PEER_BIN=/path/to/ratelimit (envoyproxy/ratelimit's service_cmd, built from its public
#   source outside this repository: `go build -o /tmp/peer/ratelimit ./src/service_cmd`), both
#   parts also run it, on the same redis-server with the same descriptor file and ghz flags
#   (its own defaults otherwise: a pool of 10 connections, no pipelining window), and print
#   leash's rate against it.
# Tools: redis-server and jq from Debian; ghz from the Go module proxy, pinned below. ghz reads
# the method from a protoset that scripts/rlsprotoset builds from the Go protos (the peer has no
# server reflection), so no .proto files are needed.
# Usage: make bench-grpc-ratio   (DURATION=10s CONC=50 ROUNDS=3 RATE=3000 LOAD_DURATION=20s to change;
#        PROFILE=1 also saves a 10 s CPU profile of leash on Redis under full load; exported
#        LEASH_ variables reach leash, e.g. LEASH_ENVOY_RESPONSE_HEADERS=false)
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/lib.sh
DURATION=${DURATION:-10s}
CONC=${CONC:-50}
ROUNDS=${ROUNDS:-3}
RATE=${RATE:-3000}
LOAD_DURATION=${LOAD_DURATION:-20s}
export REDIS_PORT=${REDIS_PORT:-16390}
need jq jq
need curl curl
[ -x bin/leash ] || { echo "bin/leash is missing: make build" >&2; exit 1; }

grpc_bench_setup

# start_leash_grpc STORE starts bin/leash with gRPC on 127.0.0.1:18081 and a config file that
# maps domain bench to account bench and loads the descriptor file; STORE is memory or redis.
start_leash_grpc() {
	local cfg=$out/leash-grpc-$1.yaml
	cat >"$cfg" <<YAML
accounts:
  - id: bench
    plan: scale
    api_keys: [bench]
envoy:
  config_paths: [$out/ratelimit-bench.yaml]
  domains:
    bench:
      account: bench
store:
  backend: $1
YAML
	[ "$1" = redis ] && printf '  redis:\n    url: redis://127.0.0.1:%s/0\n' "$REDIS_PORT" >>"$cfg"
	env LEASH_HTTP_ADDR=127.0.0.1:18080 LEASH_ADMIN_ADDR=127.0.0.1:19090 LEASH_GRPC_ADDR=127.0.0.1:18081 \
		LEASH_LOG_LEVEL=warn LEASH_ADMIN_PPROF="$([ -n "${PROFILE:-}" ] && echo true || echo false)" \
		./bin/leash serve --config "$cfg" >"$out/leash.log" 2>&1 &
	pids+=($!); leash_pid=$!
	wait_port 127.0.0.1:18081
}
stop_leash() { kill "$leash_pid"; wait "$leash_pid" 2>/dev/null || true; }

# start_peer starts envoyproxy/ratelimit ($PEER_BIN) on gRPC 127.0.0.1:18092 with the same
# descriptor file (its runtime folder layout: RUNTIME_ROOT/RUNTIME_SUBDIRECTORY/config) and
# the same redis-server.
start_peer() {
	mkdir -p "$out/peer-runtime/bench/config"
	cp "$out/ratelimit-bench.yaml" "$out/peer-runtime/bench/config/bench.yaml"
	env RUNTIME_ROOT="$out/peer-runtime" RUNTIME_SUBDIRECTORY=bench RUNTIME_WATCH_ROOT=false \
		USE_STATSD=false LOG_LEVEL=warn REDIS_SOCKET_TYPE=tcp REDIS_URL=127.0.0.1:"$REDIS_PORT" \
		HOST=127.0.0.1 PORT=18093 DEBUG_HOST=127.0.0.1 DEBUG_PORT=18094 GRPC_HOST=127.0.0.1 GRPC_PORT=18092 \
		"$PEER_BIN" >"$out/peer.log" 2>&1 &
	pids+=($!); peer_pid=$!
	wait_port 127.0.0.1:18092
}

start_emptyrls() {
	go build -o "$out/emptyrls" ./scripts/emptyrls
	"$out/emptyrls" -addr 127.0.0.1:18091 &
	pids+=($!); empty_pid=$!
	wait_port 127.0.0.1:18091
}

# start_likerls starts the empty server that answers with leash's reply (leash must be up).
start_likerls() {
	"$out/emptyrls" -addr 127.0.0.1:18095 -reply-like 127.0.0.1:18081 2>"$out/likerls.log" &
	pids+=($!); like_pid=$!
	wait_port 127.0.0.1:18095
}

# run ADDR OUT [ghz flags]: one ghz run writing its JSON report to OUT (without the
# per-call details and the request data); every call must be OK.
run() {
	local addr=$1 o=$2; shift 2
	( "$ghz" --insecure --protoset "$out/rls.protoset" --call envoy.service.ratelimit.v3.RateLimitService.ShouldRateLimit \
		-D "$out/rls-data.json" --duration-stop=wait -O json -o "$o.full" "$@" "$addr"
		times >"$o.times" ) # line 2: user and system CPU of ghz itself
	jq 'del(.details, .options.data)' "$o.full" >"$o" && rm "$o.full"
	jq -e '(.statusCodeDistribution | keys) == ["OK"] and ((.errorDistribution // {}) | length) == 0' "$o" >/dev/null || {
		echo "ghz against $addr saw errors:" >&2
		jq '{count, statusCodeDistribution, errorDistribution}' "$o" >&2
		exit 1
	}
}
rps() { jq '.rps' "$1"; }
# ghz_cpu OUT: seconds of CPU ghz used for that run ("1m2.5s 0m3.25s" from times).
ghz_cpu() { awk 'NR == 2 {t = 0; for (i = 1; i <= 2; i++) {split($i, a, /[ms]/); t += 60*a[1] + a[2]}; print t}' "$1.times"; }
ok() { jq '.statusCodeDistribution.OK' "$1"; }
pct() { jq --argjson p "$2" '.latencyDistribution[] | select(.percentage == $p) | .latency / 1e6' "$1"; }
median() { sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
# check_allowed: leash's own count of Envoy decisions must show no denial (OVER_LIMIT).
check_allowed() {
	local m
	m=$(curl -fsS http://127.0.0.1:19090/metrics)
	if grep -q '^leash_decisions_total{endpoint="envoy",outcome="denied"} [1-9]' <<<"$m"; then
		echo "leash answered OVER_LIMIT:" >&2; grep '^leash_decisions_total' <<<"$m" >&2; exit 1
	fi
	grep -q '^leash_decisions_total{endpoint="envoy",outcome="allowed"} [1-9]' <<<"$m" ||
		{ echo "leash counted no Envoy decision" >&2; exit 1; }
}

# saturate OUT ADDR PID [REDIS_PID]: one closed-loop ghz run; prints its rate, p50 and p99, the
# server's (+ redis-server's) CPU per call and how busy the whole machine was (/proc/stat).
saturate() {
	local o=$1 addr=$2 pid=$3 rpid=${4:-} s0 r0 m0 s1 r1 m1
	s0=$(cpu_ticks "$pid"); r0=$([ -n "$rpid" ] && cpu_ticks "$rpid" || echo 0); m0=$(machine)
	run "$addr" "$o" -c "$CONC" -z "$DURATION"
	s1=$(cpu_ticks "$pid"); r1=$([ -n "$rpid" ] && cpu_ticks "$rpid" || echo 0); m1=$(machine)
	awk -v rps="$(rps "$o")" -v n="$(ok "$o")" -v p50="$(pct "$o" 50)" -v p99="$(pct "$o" 99)" -v hz="$(getconf CLK_TCK)" \
		-v c=$((s1 - s0)) -v r=$((r1 - r0)) -v m0="$m0" -v m1="$m1" -v g="$(ghz_cpu "$o")" 'BEGIN {
		split(m0, a); split(m1, b)
		printf "%6.0f rps p50 %5.2f ms p99 %5.2f ms cpu %5.1f", rps, p50, p99, 1e6*c/hz/n
		if (r > 0) printf "+%.1f", 1e6*r/hz/n
		printf " µs/call, ghz %5.1f µs/call, machine %3.0f%% busy", 1e6*g/n, 100*(b[1]-a[1])/(b[1]-a[1]+b[2]-a[2]) }'
}
# machine prints the busy and idle ticks of all CPUs since boot.
machine() { awk '/^cpu / {print $2+$3+$4+$7+$8+$9, $5+$6}' /proc/stat; }

start_redis "$REDIS_PORT"
start_emptyrls
start_leash_grpc redis
start_likerls
peer_pid=
if [ -n "${PEER_BIN:-}" ]; then
	start_peer
	run 127.0.0.1:18092 "$out/grpc-warm.json" -c "$CONC" -z 3s
fi

echo "== 1. ghz -c $CONC -z $DURATION: leash (Redis store) vs empty RateLimitService, $ROUNDS rounds"
run 127.0.0.1:18081 "$out/grpc-warm.json" -c "$CONC" -z 3s # warm-up: connections, counters, GC heap
run 127.0.0.1:18091 "$out/grpc-warm.json" -c "$CONC" -z 3s
run 127.0.0.1:18095 "$out/grpc-warm.json" -c "$CONC" -z 3s
: >"$out/grpc-rounds.txt"
for i in $(seq "$ROUNDS"); do
	e_line=$(saturate "$out/grpc-empty-$i.json" 127.0.0.1:18091 "$empty_pid")
	k_line=$(saturate "$out/grpc-like-$i.json" 127.0.0.1:18095 "$like_pid")
	l_line=$(saturate "$out/grpc-leash-$i.json" 127.0.0.1:18081 "$leash_pid" "$redis_pid")
	printf 'round %d  empty: %s\n         empty, leash reply: %s\n         leash(redis): %s\n' "$i" "$e_line" "$k_line" "$l_line" | tee -a "$out/grpc-rounds.txt"
	if [ -n "$peer_pid" ]; then
		p_line=$(saturate "$out/grpc-peer-$i.json" 127.0.0.1:18092 "$peer_pid" "$redis_pid")
		printf '         peer(redis):  %s\n' "$p_line" | tee -a "$out/grpc-rounds.txt"
	fi
done
check_allowed
e=$(for i in $(seq "$ROUNDS"); do rps "$out/grpc-empty-$i.json"; done | median)
l=$(for i in $(seq "$ROUNDS"); do rps "$out/grpc-leash-$i.json"; done | median)
k=$(for i in $(seq "$ROUNDS"); do rps "$out/grpc-like-$i.json"; done | median)
awk -v l="$l" -v e="$e" 'BEGIN {printf "median: empty %.0f rps, leash(redis) %.0f rps, ratio %.1f%%\n", e, l, 100*l/e}'
awk -v l="$l" -v k="$k" -v e="$e" 'BEGIN {printf "median: empty answering leash'"'"'s reply %.0f rps (%.1f%% of empty), leash(redis) %.1f%% of it\n", k, 100*k/e, 100*l/k}'
if [ -n "$peer_pid" ]; then
	p=$(for i in $(seq "$ROUNDS"); do rps "$out/grpc-peer-$i.json"; done | median)
	awk -v l="$l" -v p="$p" 'BEGIN {printf "median: peer(redis) %.0f rps, leash/peer %.2fx\n", p, l/p}'
fi

if [ -n "${PROFILE:-}" ]; then
	echo "-- CPU profile of leash (Redis store) under ghz -c $CONC, 10 s: $out/leash-grpc.pprof"
	run 127.0.0.1:18081 "$out/grpc-profile.json" -c "$CONC" -z 14s &
	ghz_job=$!
	sleep 2
	curl -fsS -o "$out/leash-grpc.pprof" 'http://127.0.0.1:19090/debug/pprof/profile?seconds=10'
	wait "$ghz_job"
	go tool pprof -top -nodecount=25 bin/leash "$out/leash-grpc.pprof" 2>/dev/null | head -32
fi

echo "== 2. CPU per decision at $RATE/s for $LOAD_DURATION (ghz --rps)"
# cpu_per_decision NAME ADDR PID [REDIS_PID]: server (and redis-server) CPU over a fixed-rate run.
cpu_per_decision() {
	local name=$1 addr=$2 pid=$3 rpid=${4:-} hz s0 r0 s1 r1 n
	run "$addr" "$out/grpc-warm.json" -c "$CONC" --rps "$RATE" -z 3s # warm-up
	hz=$(getconf CLK_TCK)
	s0=$(cpu_ticks "$pid"); r0=$([ -n "$rpid" ] && cpu_ticks "$rpid" || echo 0)
	run "$addr" "$out/grpc-rate-$name.json" -c "$CONC" --rps "$RATE" -z "$LOAD_DURATION"
	s1=$(cpu_ticks "$pid"); r1=$([ -n "$rpid" ] && cpu_ticks "$rpid" || echo 0)
	n=$(ok "$out/grpc-rate-$name.json")
	awk -v s="$name" -v c=$((s1 - s0)) -v r=$((r1 - r0)) -v hz="$hz" -v n="$n" \
		-v rps="$(rps "$out/grpc-rate-$name.json")" -v p50="$(pct "$out/grpc-rate-$name.json" 50)" \
		-v p99="$(pct "$out/grpc-rate-$name.json" 99)" 'BEGIN {
		printf "%-13s %d calls at %.0f/s, p50 %.3f ms p99 %.3f ms  server cpu %.2fs = %.1f µs/call",
			s, n, rps, p50, p99, c/hz, 1e6*c/hz/n
		if (r > 0) printf "  redis-server cpu %.2fs = %.1f µs/call", r/hz, 1e6*r/hz/n
		printf "\n" }'
}
cpu_per_decision leash-redis 127.0.0.1:18081 "$leash_pid" "$redis_pid"
check_allowed
[ -n "$peer_pid" ] && cpu_per_decision peer-redis 127.0.0.1:18092 "$peer_pid" "$redis_pid"
stop_leash
start_leash_grpc memory
cpu_per_decision leash-memory 127.0.0.1:18081 "$leash_pid"
check_allowed
cpu_per_decision empty 127.0.0.1:18091 "$empty_pid"
