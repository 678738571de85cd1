# Shared helpers for the load scripts (sourced, not run). Every process started here is
# recorded in pids and stopped on exit.
out=.bench
mkdir -p "$out/bin"
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; }
trap cleanup EXIT

need() { command -v "$1" >/dev/null || { echo "$1 is missing: apt-get install -y $2" >&2; exit 1; }; }

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
# STORE is memory or redis (then REDIS_PORT must be set).
start_leash() {
	local env=(LEASH_DEV_API_KEY=bench LEASH_HTTP_ADDR=127.0.0.1:18080 LEASH_ADMIN_ADDR=127.0.0.1:19090
		LEASH_GRPC_ADDR= LEASH_LOG_LEVEL=warn)
	if [ "$1" = redis ]; then
		env+=(LEASH_STORE_BACKEND=redis "LEASH_STORE_REDIS_URL=redis://127.0.0.1:$REDIS_PORT")
	fi
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
	ghz=$out/bin/ghz
	if [ ! -x "$ghz" ]; then
		echo "installing ghz $GHZ_VERSION into $out/bin"
		(d=$(mktemp -d) && cd "$d" && go mod init scratch >/dev/null 2>&1 &&
			GOBIN="$OLDPWD/$out/bin" GOFLAGS=-mod=mod go install "github.com/bojand/ghz/cmd/ghz@$GHZ_VERSION")
	fi

	go run ./scripts/rlsprotoset >"$out/rls.protoset"

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
