# Leash: build, run and test. `make run` starts on the embedded disk store (./leash-data) and prints
# the dev API key; `make test` is what CI runs.
GO      ?= go
BIN     := bin/leash
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS := -s -w -X main.version=$(VERSION)
IMAGE   ?= leash:$(VERSION)

.PHONY: build run test test-bins test-stress test-disk-long clients-deps clients-test console-test fuzz reliability-long rlqs-long bench bench-http bench-load bench-grpc bench-disk bench-cluster bench-load-ratio bench-grpc-ratio image helm-test fmt vet clean

# Time per fuzz target of `make fuzz`. FUZZPARALLEL, if set, is the number of fuzzing
# workers per target. make test runs every target's seed corpus (go test runs them as tests)
# but not the random search, which would add minutes to it.
FUZZTIME      ?= 60s

build:
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags "$(LDFLAGS)" -o $(BIN) ./cmd/leash

run: build
	./$(BIN) serve $(if $(CONFIG),--config $(CONFIG))

# The leash binaries the tests run as a child process, built once here for every package
# that starts one (testkit/leashproc: LEASH_TEST_BIN with the race detector, LEASH_TEST_PLAIN_BIN
# without); a package tested alone builds its own. GORACE's atexit_sleep_ms=0 spares every
# test binary and child built with -race the second it would sleep before exiting (races
# are reported when they happen).
TEST_BIN   := .test-bin
TEST_ENV    = LEASH_TEST_BIN=$(CURDIR)/$(TEST_BIN)/race/leash LEASH_TEST_PLAIN_BIN=$(CURDIR)/$(TEST_BIN)/plain/leash \
	GORACE=$(or $(GORACE),atexit_sleep_ms=0)
test-bins:
	$(GO) build -race -o $(TEST_BIN)/race/leash ./cmd/leash
	$(GO) build -o $(TEST_BIN)/plain/leash ./cmd/leash

# Four test binaries at a time on any machine (go test's default is one per core): many
# packages spend their time waiting on child processes, Redis failovers and wall-clock
# windows, and on 2 cores -p 2 left a quarter of the CPU idle. make test-stress runs the
# suites under twice this load.
test: clients-deps test-bins
	$(GO) vet ./...
	$(TEST_ENV) $(GO) test -race -count=1 -p 4 -timeout 8m ./...
	# Heap sizes and allocation counts mean nothing under the race detector, so these run
	# once more without it.
	$(GO) test -count=1 -run '^TestMemoryPerCounter$$' ./store/memstore/
	$(GO) test -count=1 -run '^TestTracingOffAddsNoAllocation$$' ./httpapi/
	$(GO) test -count=1 -run '^TestTracingUnsampledAddsNoAllocation$$' ./adapter/rls/
	$(GO) test -count=1 -run '^TestCallsDoNotAllocate$$' ./store/redisstore/respipe/

# The unit suites under load (scripts/test-stress.sh): STRESS_ROUNDS rounds (default 5),
# each STRESS_PARALLEL copies (default 2) of go test -race -count=1 over every package but
# ./tests/... at once, beside a busy loop per core; a test that depends on timing fails
# here. It stops at the first failing round; a round takes minutes on a 2-core machine.
STRESS_ROUNDS   ?= 5
STRESS_PARALLEL ?= 2
test-stress: test-bins
	$(TEST_ENV) GO=$(GO) ROUNDS=$(STRESS_ROUNDS) PARALLEL=$(STRESS_PARALLEL) bash scripts/test-stress.sh

# The disk store's durability at full length (part of it runs in make test): the
# conformance suite reopening the store every 8 calls with every property case, and 20
# kill -9 rounds both on the store and through the binary (docs/reliability.md).
test-disk-long:
	LEASH_DISK_REOPEN_EVERY=8 LEASH_DISK_REOPEN_SAMPLE=1 LEASH_CRASH_ROUNDS=20 $(GO) test -race -count=1 -timeout 20m -run '^(TestConformanceReopened|TestKill9|TestDiskCrash)$$' ./store/diskstore/ ./tests/reliability/

# The TypeScript client's dev dependencies (typescript, @types/node) from
# clients/typescript/package-lock.json; make test needs them for tests/clients. Without npm
# the TypeScript client's tests skip (fail with CI=true).
clients-deps:
	@if command -v npm >/dev/null 2>&1; then cd clients/typescript && npm ci --no-audit --no-fund; \
	elif [ "$$CI" = true ]; then echo "make clients-deps: npm is not installed (apt-get install -y nodejs npm)" >&2; exit 1; \
	else echo "make clients-deps: npm is not installed: the TypeScript client's tests will be skipped" >&2; fi

# The TypeScript and Python clients' suites and the shared scenarios in Go, TypeScript and
# Python, against leash serve, alone (part of make test).
clients-test: clients-deps
	$(GO) test -race -count=1 -v -run '^(TestTypeScriptClient|TestPythonClient|TestScenariosGo|TestGoClientCoversTheDocument)$$' ./tests/clients/

# The web console in headless Chromium against leash serve, alone (part of make test;
# needs chromium on PATH; screenshots of every view land in tests/console/screenshots/).
console-test:
	$(GO) test -race -count=1 -v -run '^TestConsoleInBrowser$$' ./tests/console/

# Every fuzz target in turn, FUZZTIME each (scripts/fuzz.sh; docs/reliability.md).
fuzz:
	GO=$(GO) FUZZTIME=$(FUZZTIME) bash scripts/fuzz.sh

# The reliability tests' long variants: every load and fault phase lasts 20-60 s instead
# of 1-4 s, the key flood runs 60 s at 10,000 distinct keys/s (on a build of leash without
# -race), 1000 slow-header and 1000 slow-body clients, five SIGTERM-under-load cycles
# (docs/reliability.md).
reliability-long:
	RELIABILITY_LONG=1 $(GO) test -race -count=1 -timeout 30m -run 'UnderLoad|KeyFlood|SlowClients|AccountIsolation' -v ./tests/reliability/

# The RLQS harness at the issue's own scale: 600 requests per 10 s windows, 4 windows
# measured, a 200 ms reporting interval (make test runs it at 120 per 2 s, 100 ms).
rlqs-long:
	LEASH_RLQS_LONG=1 $(GO) test -race -count=1 -timeout 20m -v ./adapter/rlqs/

# Go benchmarks (engine, memory store, HTTP handler); see docs/performance.md.
bench:
	$(GO) test -run='^$$' -bench=. -benchmem -cpu 2 ./engine/... ./httpapi/

# HTTP load with wrk against leash and an empty Go handler, in one run; see docs/performance.md.
bench-http: build
	bash scripts/bench-http.sh

# Redis CPU per decision with Redis, leash and the load tool pinned to CPU sets (REDIS_CPUS,
# SERVER_CPUS, LOAD_CPUS), closed loop and at fixed rates, one redis-server and a 3-master
# Cluster, one markdown table per run; see docs/measuring.md. bench-load: POST /v1/limit per
# algorithm (wrk, vegeta); bench-grpc: ShouldRateLimit (ghz); bench-cluster: both on 1, 3 and
# 6 masters.
bench-load: build
	bash scripts/bench-load.sh

bench-grpc: build
	bash scripts/bench-grpc.sh

# POST /v1/limit on the disk store against the memory store, in one run (docs/performance.md).
bench-disk: build
	bash scripts/bench-disk.sh

bench-cluster: build
	bash scripts/bench-cluster.sh

# The older ratios, unpinned: wrk against leash on Redis and an empty handler, redis-benchmark
# EVALSHA, CPU per decision at one rate (bench-load-ratio); ghz against leash and an empty
# RateLimitService (bench-grpc-ratio); see docs/performance.md.
bench-load-ratio: build
	bash scripts/bench-load-ratio.sh

bench-grpc-ratio: build
	bash scripts/bench-grpc-ratio.sh

# The container image (Dockerfile: static binary on distroless, non-root). Needs a Docker
# engine with BuildKit; IMAGE=registry.example.com/leash:1.0 to name it for a registry.
image:
	@command -v docker >/dev/null 2>&1 || { echo "make image: docker is not installed; it needs a Docker engine with BuildKit" >&2; exit 1; }
	@docker info >/dev/null 2>&1 || { echo "make image: no Docker engine answers (docker info failed); start one, or build the Dockerfile where one runs" >&2; exit 1; }
	docker build --build-arg VERSION=$(VERSION) -t $(IMAGE) .

# The Helm chart's tests alone (also part of make test): helm lint, helm template, strict
# decoding of every manifest, the rendered config through Leash's loader. Needs helm on
# PATH or in $(go env GOPATH)/bin (go install helm.sh/helm/v3/cmd/helm@v3.22.0).
helm-test:
	$(GO) test -count=1 ./deploy/...

fmt:
	gofmt -w $$(git ls-files '*.go')

vet:
	$(GO) vet ./...

clean:
	rm -rf bin $(TEST_BIN)
