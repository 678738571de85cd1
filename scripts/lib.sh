# Shared helpers for the load scripts (sourced, not run, from the repository root or from the
# root of a bundle made by scripts/device-bundle.sh). Every process started here is recorded in
# pids and stopped on exit. Tools are looked up in ./bin (a bundle's tools), then $out/bin (ghz
# and vegeta installed by these scripts), then PATH. BENCH_OUT moves the scratch folder (default
# .bench).
root=$PWD
out=${BENCH_OUT:-.bench}
mkdir -p "$out/bin"
out=$(cd "$out" && pwd)
export PATH="$root/bin:$out/bin:$PATH"
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; }
trap cleanup EXIT

need() { command -v "$1" >/dev/null || { echo "$1 is missing: apt-get install -y $2" >&2; exit 1; }; }

# need_go_tool NAME MODULE@VERSION installs a Go tool into $out/bin unless NAME is found.
need_go_tool() {
	command -v "$1" >/dev/null && return 0
	command -v go >/dev/null || { echo "$1 is missing and there is no go to install $2" >&2; exit 1; }
	echo "installing $2 into $out/bin" >&2
	(d=$(mktemp -d) && cd "$d" && go mod init scratch >/dev/null 2>&1 &&
		GOBIN="$out/bin" CGO_ENABLED=0 GOFLAGS=-mod=mod go install -ldflags='-s -w' "$2") >&2
}

# wait_port HOST:PORT waits up to 10 s for a listener.
wait_port() {
	for _ in $(seq 100); do
		(exec 3<>"/dev/tcp/${1%:*}/${1#*:}") 2>/dev/null && return 0
		sleep 0.1
	done
	echo "nothing listens on $1" >&2; exit 1
}

# start_redis PORT starts a throwaway redis-server (no persistence) on loopback.
start_redis() {
	need redis-server redis-server
	redis-server --bind 127.0.0.1 --port "$1" --save '' --appendonly no --daemonize no --loglevel warning >"$out/redis.log" 2>&1 &
	pids+=($!); redis_pid=$!
	wait_port "127.0.0.1:$1"
}

# start_leash STORE starts bin/leash on 127.0.0.1:18080 with the dev key "bench";
# STORE is memory, disk (a fresh directory under $out, sync interval $DISK_SYNC, default
# 1s) or redis (then REDIS_PORT must be set).
start_leash() {
	local env=(LEASH_DEV_API_KEY=bench LEASH_HTTP_ADDR=127.0.0.1:18080 LEASH_ADMIN_ADDR=127.0.0.1:19090
		LEASH_GRPC_ADDR= LEASH_LOG_LEVEL=warn)
	case "$1" in
	redis) env+=(LEASH_STORE_BACKEND=redis "LEASH_STORE_REDIS_URL=redis://127.0.0.1:$REDIS_PORT") ;;
	disk)
		rm -rf "$out/leash-data"
		env+=(LEASH_STORE_BACKEND=disk "LEASH_STORE_DISK_PATH=$out/leash-data" "LEASH_STORE_DISK_SYNC_INTERVAL=${DISK_SYNC:-1s}") ;;
	*) env+=(LEASH_STORE_BACKEND=memory) ;;
	esac
	env "${env[@]}" ./bin/leash serve >"$out/leash.log" 2>&1 &
	pids+=($!); leash_pid=$!
	wait_port 127.0.0.1:18080
}

start_empty() {
	go build -o "$out/emptyserver" ./scripts/emptyserver
	"$out/emptyserver" -addr 127.0.0.1:18090 &
	pids+=($!)
	wait_port 127.0.0.1:18090
}

# cpu_ticks PID prints utime+stime of a process in clock ticks (/proc/PID/stat fields 14, 15).
cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }

# grpc_bench_setup installs ghz (pinned) into $out/bin, sets ghz to it, and writes what the gRPC
# load scripts send: the protoset of the RateLimitService (scripts/rlsprotoset), the descriptor
# file of domain bench and the request data.
GHZ_VERSION=v0.93.0
grpc_bench_setup() {
	need_go_tool ghz "github.com/bojand/ghz/cmd/ghz@$GHZ_VERSION"
	ghz=$(command -v ghz)

	if [ -f "$root/share/rls.protoset" ]; then # a bundle's, made by scripts/device-bundle.sh
		cp "$root/share/rls.protoset" "$out/rls.protoset"
	else
		go run ./scripts/rlsprotoset >"$out/rls.protoset"
	fi

	# Domain "bench" counts against account "bench"; descriptor user=<any> has a limit so high
	# that every check is allowed (one fixed-window counter per user value).
	cat >"$out/ratelimit-bench.yaml" <<-'YAML'
	domain: bench
	descriptors:
	  - key: user
	    rate_limit:
	      unit: minute
	      requests_per_unit: 1000000000
	YAML
	# 10,000 user values so the run is not one hot counter. ghz sends a JSON array round robin,
	# converting each element once and reusing it (no per-request templating).
	seq 0 9999 | awk 'BEGIN {printf "["} NR > 1 {printf ","}
		{printf "{\"domain\":\"bench\",\"descriptors\":[{\"entries\":[{\"key\":\"user\",\"value\":\"user-%d\"}]}]}", $1}
		END {print "]"}' >"$out/rls-data.json"
}

# ---- Redis CPU per decision (scripts/bench-load.sh, bench-grpc.sh, bench-cluster.sh) ----
#
# bench_defaults sets what the variables below leave unset (called by bench_matrix, so the older
# scripts keep their own defaults).
bench_defaults() {
	# CPU sets, as taskset -c lists. The defaults suit a 2-core machine: Redis alone on CPU 1, the
	# server and the load tool together on CPU 0. A Cluster's masters take the CPUs of REDIS_CPUS
	# in turn (master i on its i-th CPU, wrapping). GOMAXPROCS, if set, reaches the server only
	# (unset, Go sizes it from the CPU set).
	local default_redis_cpus='' default_other_cpus=''
	if [ "$(nproc --all)" -ge 2 ]; then default_redis_cpus=1 default_other_cpus=0; fi
	REDIS_CPUS=${REDIS_CPUS-$default_redis_cpus}
	SERVER_CPUS=${SERVER_CPUS-$default_other_cpus}
	LOAD_CPUS=${LOAD_CPUS-$default_other_cpus}
	server_gomaxprocs=${GOMAXPROCS:-}
	unset GOMAXPROCS
	# Load shapes: wrk's threads and connections for closed-loop HTTP, ghz's concurrency and
	# connections for gRPC (closed loop and fixed rate), the number of distinct keys, and the
	# length of each run and of the warm-up before it.
	WRK_THREADS=${WRK_THREADS:-2}
	WRK_CONNS=${WRK_CONNS:-256}
	GHZ_CONC=${GHZ_CONC:-256}
	GHZ_CONNS=${GHZ_CONNS:-8}
	VEGETA_WORKERS=${VEGETA_WORKERS:-256} # at most this many requests in flight at a fixed rate, as ghz -c
	KEYS=${KEYS:-10000}
	LIMIT=${LIMIT:-1000000000} # every check allowed: the limit of each key per minute
	DURATION=${DURATION:-10s}
	WARMUP=${WARMUP:-3s}
	# LOADS: closed (closed loop) and offered rates per second; ROUNDS: times through every binary.
	LOADS=${LOADS:-closed 3000 20000}
	ROUNDS=${ROUNDS:-1}
	REDIS_PORT=${REDIS_PORT:-16390}
	CLUSTER_PORT=${CLUSTER_PORT:-17300}
	IDLE=${IDLE:-2s} # how long Redis's idle CPU is measured, per topology
}
VEGETA_VERSION=v12.12.0

# pin CPUS sets pinned to the prefix that runs a command on the CPU set CPUS (taskset -c,
# which execs the command: $! stays its pid), or to nothing when CPUS is empty.
pin() {
	pinned=()
	[ -z "$1" ] || pinned=(taskset -c "$1")
}
# nth_cpu LIST I: the I-th CPU (from 0, wrapping) of a taskset list such as 1,3-5.
nth_cpu() {
	[ -n "$1" ] || return 0
	tr ',' '\n' <<<"$1" | awk -F- '{hi = $2 == "" ? $1 : $2; for (c = $1; c <= hi; c++) print c}' |
		awk -v i="$2" '{a[NR - 1] = $1} END {print a[i % NR]}'
}

# binaries: "label=path" of each server to measure, in order: BEFORE_BIN and AFTER_BIN (labels
# before, after), or BASE_BIN (base) and LEASH_BIN (leash, default bin/leash); PEER_BIN
# (envoyproxy/ratelimit, label peer) is added by the gRPC scripts only.
binaries() {
	if [ -n "${BEFORE_BIN:-}${AFTER_BIN:-}" ]; then
		[ -n "${BEFORE_BIN:-}" ] && echo "before=$BEFORE_BIN"
		[ -n "${AFTER_BIN:-}" ] && echo "after=$AFTER_BIN"
	else
		[ -n "${BASE_BIN:-}" ] && echo "base=$BASE_BIN"
		echo "leash=${LEASH_BIN:-bin/leash}"
	fi
	return 0
}
check_binaries() {
	local b
	for b in $(binaries) ${PEER_BIN:+peer=$PEER_BIN}; do
		[ -x "${b#*=}" ] || { echo "${b%%=*}: ${b#*=} is missing or not executable (make build)" >&2; exit 1; }
	done
}

# start_topology TOPOLOGY starts Redis: single (one redis-server on REDIS_PORT) or cluster:N
# (N masters, no replicas, on CLUSTER_PORT and up). Sets redis_ports and redis_pids.
start_topology() {
	need redis-server redis-server
	need redis-cli redis-tools
	local n=1 cluster= i p dir
	case $1 in
	single) ;;
	cluster:[0-9]*) cluster=1 n=${1#cluster:} ;;
	*) echo "unknown topology $1 (single or cluster:N)" >&2; exit 1 ;;
	esac
	redis_ports=() redis_pids=()
	for ((i = 0; i < n; i++)); do
		if [ -n "$cluster" ]; then p=$((CLUSTER_PORT + i)); else p=$REDIS_PORT; fi
		dir=$out/redis-$p
		rm -rf "$dir" && mkdir -p "$dir"
		pin "$(nth_cpu "$REDIS_CPUS" "$i")"
		"${pinned[@]}" redis-server --bind 127.0.0.1 --port "$p" --dir "$dir" --save '' --appendonly no \
			--loglevel warning ${cluster:+--cluster-enabled yes --cluster-config-file nodes.conf} >"$dir/log" 2>&1 &
		pids+=($!) redis_pids+=($!) redis_ports+=("$p")
		wait_port "127.0.0.1:$p"
	done
	[ -n "$cluster" ] || return 0
	if [ "$n" -eq 1 ]; then
		redis-cli -p "${redis_ports[0]}" CLUSTER ADDSLOTSRANGE 0 16383 >/dev/null
	else
		redis-cli --cluster create $(printf '127.0.0.1:%s ' "${redis_ports[@]}") --cluster-replicas 0 --cluster-yes >/dev/null
	fi
	local ok
	for _ in $(seq 100); do
		ok=1
		for p in "${redis_ports[@]}"; do redis-cli -p "$p" CLUSTER INFO | grep -q 'cluster_state:ok' || ok=; done
		[ -n "$ok" ] && return 0
		sleep 0.1
	done
	echo "the cluster of $n did not become ok" >&2; exit 1
}
stop_topology() {
	local p
	for p in "${redis_pids[@]}"; do kill "$p" 2>/dev/null || true; wait "$p" 2>/dev/null || true; done
}
flush_redis() { local p; for p in "${redis_ports[@]}"; do redis-cli -p "$p" FLUSHALL >/dev/null; done; }

# redis_stats prints "CPU-seconds script-calls script-µs" summed over every Redis of the
# topology: used_cpu_sys + used_cpu_user (INFO cpu) and the calls and usec of EVALSHA, EVAL
# and FCALL (INFO commandstats).
redis_stats() {
	local p
	for p in "${redis_ports[@]}"; do redis-cli -p "$p" INFO cpu; redis-cli -p "$p" INFO commandstats; done |
		awk -F'[:,=]' '/^used_cpu_(sys|user):/ {cpu += $2}
			/^cmdstat_(evalsha|eval|evalsha_ro|eval_ro|fcall|fcall_ro):/ {calls += $3; usec += $5}
			END {printf "%.6f %d %d\n", cpu, calls, usec}'
}

# redis_idle TOPOLOGY prints the CPU Redis spends over IDLE with nothing connected (its timers,
# a Cluster's bus), which every per-decision figure includes.
redis_idle() {
	local r0 r1 t0 t1
	r0=$(redis_stats) t0=$(date +%s.%N)
	sleep "${IDLE%s}"
	r1=$(redis_stats) t1=$(date +%s.%N)
	awk -v topo="$1" -v r0="$r0" -v r1="$r1" -v t0="$t0" -v t1="$t1" 'BEGIN {
		split(r0, a, " "); split(r1, b, " "); printf "%s %.1f %% of a core\n", topo, 100 * (b[1] - a[1]) / (t1 - t0) }'
}

# bench_config TOPOLOGY: the server's configuration file (account bench on plan scale, API key
# bench, Envoy domain bench from the descriptor file, the Redis store of the topology).
bench_config() {
	local cfg=$out/leash-bench.yaml
	{
		printf 'accounts:\n  - {id: bench, plan: scale, api_keys: [bench]}\n'
		printf 'envoy:\n  config_paths: [%s]\n  domains: {bench: {account: bench}}\n' "$out/ratelimit-bench.yaml"
		printf 'store:\n  backend: redis\n  redis:\n'
		if [ "$1" = single ]; then
			printf '    url: redis://127.0.0.1:%s/0\n' "$REDIS_PORT"
		else
			printf '    cluster_addrs: [%s]\n' "$(printf '"127.0.0.1:%s",' "${redis_ports[@]}" | sed 's/,$//')"
		fi
	} >"$cfg"
	echo "$cfg"
}

# start_server LABEL PATH TOPOLOGY starts one server on SERVER_CPUS: leash (HTTP 127.0.0.1:18080,
# gRPC :18081, admin :19090) or, for label peer, envoyproxy/ratelimit (gRPC :18081, its own
# defaults otherwise). Sets server_pid.
start_server() {
	local label=$1 bin=$2 topo=$3
	local gmp=(${server_gomaxprocs:+GOMAXPROCS=$server_gomaxprocs})
	if [ "$label" = peer ]; then
		mkdir -p "$out/peer-runtime/bench/config"
		cp "$out/ratelimit-bench.yaml" "$out/peer-runtime/bench/config/bench.yaml"
		local redis=(REDIS_URL=127.0.0.1:"$REDIS_PORT")
		[ "$topo" = single ] || redis=(REDIS_TYPE=cluster "REDIS_URL=$(printf '127.0.0.1:%s,' "${redis_ports[@]}" | sed 's/,$//')")
		pin "$SERVER_CPUS"
		"${pinned[@]}" env "${gmp[@]}" "${redis[@]}" RUNTIME_ROOT="$out/peer-runtime" RUNTIME_SUBDIRECTORY=bench \
			RUNTIME_WATCH_ROOT=false USE_STATSD=false LOG_LEVEL=warn REDIS_SOCKET_TYPE=tcp \
			HOST=127.0.0.1 PORT=18093 DEBUG_HOST=127.0.0.1 DEBUG_PORT=18094 GRPC_HOST=127.0.0.1 GRPC_PORT=18081 \
			"$bin" >"$out/server-$label.log" 2>&1 &
	else
		pin "$SERVER_CPUS"
		"${pinned[@]}" env "${gmp[@]}" LEASH_HTTP_ADDR=127.0.0.1:18080 LEASH_GRPC_ADDR=127.0.0.1:18081 \
			LEASH_ADMIN_ADDR=127.0.0.1:19090 LEASH_LOG_LEVEL=warn \
			"$bin" serve --config "$(bench_config "$topo")" >"$out/server-$label.log" 2>&1 &
	fi
	pids+=($!) server_pid=$!
	wait_port 127.0.0.1:18081
	[ "$label" = peer ] || wait_port 127.0.0.1:18080
}
stop_server() { kill "$server_pid" 2>/dev/null || true; wait "$server_pid" 2>/dev/null || true; }

# load_setup writes what the load tools send (KEYS distinct keys, each check allowed): the
# wrk script and the vegeta targets of POST /v1/limit, per algorithm, and the gRPC setup.
load_setup() {
	local alg
	need wrk wrk
	need_go_tool vegeta "github.com/tsenart/vegeta/v12@$VEGETA_VERSION"
	grpc_bench_setup
	# The ghz request data: KEYS user values, sent round robin.
	seq 0 $((KEYS - 1)) | awk 'BEGIN {printf "["} NR > 1 {printf ","}
		{printf "{\"domain\":\"bench\",\"descriptors\":[{\"entries\":[{\"key\":\"user\",\"value\":\"user-%d\"}]}]}", $1}
		END {print "]"}' >"$out/rls-data.json"
	cat >"$out/limit.lua" <<-'LUA'
	-- POST /v1/limit with algorithm BENCH_ALG over BENCH_KEYS keys; done() prints one line:
	-- RESULT successes failures seconds p50_ms p99_ms
	local n, keys, alg = 0, tonumber(os.getenv("BENCH_KEYS")), os.getenv("BENCH_ALG")
	local limit = os.getenv("BENCH_LIMIT") or "1000000000"
	local hdr = {["Authorization"] = "Bearer bench", ["Content-Type"] = "application/json"}
	request = function()
	  n = n + 1
	  local body = '{"namespace":"bench","key":"user-' .. (n % keys) .. '","algorithm":"' .. alg ..
	    '","limit":' .. limit .. ',"window_ms":60000}'
	  return wrk.format("POST", "/v1/limit", hdr, body)
	end
	done = function(s, latency, requests)
	  local e = s.errors
	  io.write(string.format("RESULT %d %d %.6f %.3f %.3f\n", s.requests - e.status,
	    e.status + e.connect + e.read + e.write + e.timeout, s.duration / 1e6,
	    latency:percentile(50) / 1e3, latency:percentile(99) / 1e3))
	end
	LUA
	for alg in fixed_window sliding_window token_bucket; do
		jq -nc --argjson n "$KEYS" --argjson limit "$LIMIT" --arg alg "$alg" 'range($n) | {method: "POST", url: "http://127.0.0.1:18080/v1/limit",
			header: {Authorization: ["Bearer bench"], "Content-Type": ["application/json"]},
			body: ({namespace: "bench", key: "user-\(.)", algorithm: $alg, limit: $limit, window_ms: 60000} | tojson | @base64)}' \
			>"$out/targets-$alg.json"
	done
}

# run_load API ALG LOAD DURATION: one run of the load tool on LOAD_CPUS; API is http (POST
# /v1/limit with algorithm ALG) or grpc (ShouldRateLimit), LOAD closed or a rate per second.
# Prints "successes failures seconds p50_ms p99_ms"; the tool's own summary is left in
# $out/last-run.txt.
run_load() {
	local api=$1 alg=$2 load=$3 d=$4
	pin "$LOAD_CPUS"
	case $api/$load in
	http/closed)
		BENCH_ALG=$alg BENCH_KEYS=$KEYS BENCH_LIMIT=$LIMIT "${pinned[@]}" wrk -t"$WRK_THREADS" -c"$WRK_CONNS" -d"$d" \
			-s "$out/limit.lua" http://127.0.0.1:18080/v1/limit >"$out/last-run.txt"
		awk '$1 == "RESULT" {print $2, $3, $4, $5, $6}' "$out/last-run.txt" ;;
	http/*)
		"${pinned[@]}" vegeta attack -format=json -targets="$out/targets-$alg.json" -rate="$load/s" -duration="$d" \
			-max-workers="$VEGETA_WORKERS" -timeout=10s |
			vegeta report -type=json >"$out/last-run.txt"
		jq -r '(.status_codes["200"] // 0) as $ok | .latencies as $l |
			"\($ok) \(.requests - $ok) \((.duration + .wait) / 1e9) \($l["50th"] / 1e6) \($l["99th"] / 1e6)"' "$out/last-run.txt" ;;
	grpc/*)
		local rate=()
		[ "$load" = closed ] || rate=(--rps "$load")
		"${pinned[@]}" "$ghz" --insecure --protoset "$out/rls.protoset" \
			--call envoy.service.ratelimit.v3.RateLimitService.ShouldRateLimit -D "$out/rls-data.json" \
			-c "$GHZ_CONC" --connections "$GHZ_CONNS" "${rate[@]}" -z "$d" --duration-stop=wait -O json 127.0.0.1:18081 |
			jq 'del(.details, .options.data)' >"$out/last-run.txt"
		jq -r '(.statusCodeDistribution.OK // 0) as $ok | def p($q): [.latencyDistribution[]? | select(.percentage == $q) | .latency / 1e6][0] // 0;
			"\($ok) \(.count - $ok) \(.total / 1e9) \(p(50)) \(p(99))"' "$out/last-run.txt" ;;
	esac
}

# measure TOPOLOGY LABEL API ALG LOAD: a warm-up, then one run of DURATION; appends a row to
# $out/rows.md and prints it. Redis figures are deltas of redis_stats over the run, the
# server's CPU the delta of its utime + stime (/proc), decisions the load tool's successes.
measure() {
	local topo=$1 label=$2 api=$3 alg=$4 load=$5 res s0 s1 r0 r1 t0 t1 row
	run_load "$api" "$alg" "$load" "$WARMUP" >/dev/null
	s0=$(cpu_ticks "$server_pid") r0=$(redis_stats) t0=$(date +%s.%N)
	res=$(run_load "$api" "$alg" "$load" "$DURATION")
	t1=$(date +%s.%N) s1=$(cpu_ticks "$server_pid") r1=$(redis_stats)
	[ -n "$res" ] || { echo "no result from the load tool ($api $alg $load)" >&2; cat "$out/last-run.txt" >&2; exit 1; }
	run_number=$((run_number + 1))
	mkdir -p "$out/runs"
	cp "$out/last-run.txt" "$out/runs/$(printf '%03d' "$run_number")-${topo/:/}-$label-$api-$alg-$load.txt"
	row=$(awk -v topo="$topo" -v label="$label" -v api="$api" -v alg="$alg" -v ld="$load" \
		-v res="$res" -v r0="$r0" -v r1="$r1" -v wall="$(awk -v a="$t0" -v b="$t1" 'BEGIN {print b - a}')" \
		-v s=$((s1 - s0)) -v hz="$(getconf CLK_TCK)" 'BEGIN {
		split(res, x, " "); split(r0, a, " "); split(r1, b, " ")
		ok = x[1]; bad = x[2]; sec = x[3]; cpu = b[1] - a[1]; calls = b[2] - a[2]; usec = b[3] - a[3]
		if (topo != "single") { sub(/cluster:/, "", topo); topo = "cluster, " topo (topo == 1 ? " master" : " masters") }
		what = api == "http" ? "`/v1/limit` " alg : "`ShouldRateLimit`"
		if (ld != "closed") ld = ld "/s"
		d = ok > 0 ? ok : 1
		# No script call at all (the peer runs plain commands): those two columns are empty.
		depth = calls > 0 ? sprintf("%.2f | %.1f", ok / calls, usec / calls) : "– | –"
		printf "| %s | %s | %s | %s | %.0f | %.2f | %.2f | %d | %.1f | %.0f %% | %.2f | %s |\n",
			topo, label, what, ld, ok / (sec > 0 ? sec : 1), x[4], x[5], bad,
			1e6 * s / hz / d, 100 * cpu / wall, 1e6 * cpu / d, depth }')
	echo "$row" | tee -a "$out/rows.md" >&2
}

# print_table TITLE: the run's conditions and the rows measured, as markdown.
print_table() {
	local b
	echo "### $1"
	echo
	echo "$(date -u '+%Y-%m-%d %H:%M UTC'), $(nproc --all) CPUs ($(awk -F': ' '/^model name/ {print $2; exit}' /proc/cpuinfo)),"
	echo "Redis $(redis-server --version | sed -n 's/.*v=\([^ ]*\).*/\1/p') on CPUs ${REDIS_CPUS:-any}, server on ${SERVER_CPUS:-any}" \
		"(GOMAXPROCS ${server_gomaxprocs:-default}), load tool on ${LOAD_CPUS:-any};"
	echo "wrk -t$WRK_THREADS -c$WRK_CONNS (closed loop), vegeta -max-workers $VEGETA_WORKERS (fixed rates)," \
		"ghz -c $GHZ_CONC --connections $GHZ_CONNS;" \
		"$KEYS keys, $DURATION per run after a $WARMUP warm-up."
	for b in $(binaries); do
		echo "- ${b%%=*}: ${b#*=}, \`$(timeout 5 "${b#*=}" version 2>/dev/null | head -1 || true)\`"
	done
	[ -z "${PEER_BIN:-}" ] || echo "- peer (envoyproxy/ratelimit): $PEER_BIN"
	echo
	echo "Redis idle (no server, $IDLE): $(paste -sd, "$out/idle.txt" | sed 's/,/, /g')."
	echo
	echo '| Redis | server | call | load | decisions/s | p50 ms | p99 ms | failed | server µs/decision | Redis CPU | Redis µs/decision | decisions/script call | Redis µs/script call |'
	echo '|---|---|---|---|---|---|---|---|---|---|---|---|---|'
	cat "$out/rows.md"
}

# bench_matrix TITLE APIS: for every TOPOLOGY, ROUNDS times every binary, every API (http: the
# algorithms of ALGS on POST /v1/limit; grpc: ShouldRateLimit, also for PEER_BIN) and every
# LOAD measured; then the table, also saved as $out/table-<title>.md.
bench_matrix() {
	local title=$1 apis=$2 topo round b label api alg load
	bench_defaults
	check_binaries
	load_setup
	: >"$out/rows.md"
	: >"$out/idle.txt"
	rm -rf "$out/runs"
	run_number=0
	for topo in $TOPOLOGY; do
		start_topology "$topo"
		redis_idle "$topo" >>"$out/idle.txt"
		for round in $(seq "$ROUNDS"); do
			for b in $(binaries) ${PEER_BIN:+peer=$PEER_BIN}; do
				label=${b%%=*}
				[ "$label" = peer ] && [[ " $apis " != *" grpc "* ]] && continue
				flush_redis
				start_server "$label" "${b#*=}" "$topo"
				for api in $apis; do
					[ "$label" = peer ] && [ "$api" != grpc ] && continue
					for alg in $([ "$api" = http ] && echo "$ALGS" || echo fixed); do
						for load in $LOADS; do
							measure "$topo" "$label" "$api" "$alg" "$load"
						done
					done
				done
				stop_server
			done
		done
		stop_topology
	done
	print_table "$title" | tee "$out/table-$title.md"
}
