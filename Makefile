# Leash: build, run and test. `make run` starts on the embedded memory store and prints
# the dev API key; `make test` is what CI runs.
GO      ?= go
BIN     := bin/leash
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS := -s -w -X main.version=$(VERSION)

.PHONY: build run test fuzz bench bench-http bench-load bench-grpc fmt vet clean

# Time per fuzz target: FUZZTIME for `make fuzz`, TEST_FUZZTIME for the short run that ends
# `make test`. FUZZPARALLEL, if set, is the number of fuzzing workers per target.
FUZZTIME      ?= 60s
TEST_FUZZTIME ?= 3s

build:
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags "$(LDFLAGS)" -o $(BIN) ./cmd/leash

run: build
	./$(BIN) serve $(if $(CONFIG),--config $(CONFIG))

test:
	$(GO) vet ./...
	$(GO) test -race -count=1 -timeout 8m ./...
	GO=$(GO) FUZZTIME=$(TEST_FUZZTIME) bash scripts/fuzz.sh

# Every fuzz target in turn, FUZZTIME each (scripts/fuzz.sh; docs/reliability.md).
fuzz:
	GO=$(GO) FUZZTIME=$(FUZZTIME) bash scripts/fuzz.sh

# Go benchmarks (engine, memory store, HTTP handler); see docs/performance.md.
bench:
	$(GO) test -run='^$$' -bench=. -benchmem -cpu 2 ./engine/... ./httpapi/

# HTTP load with wrk against leash and an empty Go handler, in one run; see docs/performance.md.
bench-http: build
	bash scripts/bench-http.sh

# Redis-store load figures (wrk ratio, redis-benchmark EVALSHA, CPU per decision at a fixed
# rate with vegeta); see docs/performance.md.
bench-load: build
	bash scripts/bench-load.sh

# Envoy gRPC load (ghz ratio against an empty RateLimitService, CPU per decision at a fixed
# rate); see docs/performance.md.
bench-grpc: build
	bash scripts/bench-grpc.sh

fmt:
	gofmt -w $$(git ls-files '*.go')

vet:
	$(GO) vet ./...

clean:
	rm -rf bin
