# Leash: build, run and test. `make run` starts on the embedded memory store and prints
# the dev API key; `make test` is what CI runs.
GO      ?= go
BIN     := bin/leash
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS := -s -w -X main.version=$(VERSION)

.PHONY: build run test reliability-long bench bench-http bench-load bench-grpc fmt vet clean

build:
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags "$(LDFLAGS)" -o $(BIN) ./cmd/leash

run: build
	./$(BIN) serve $(if $(CONFIG),--config $(CONFIG))

test:
	$(GO) vet ./...
	$(GO) test -race -count=1 -timeout 8m ./...

# The reliability tests' long variants: every load and fault phase lasts 20-60 s instead
# of 1-4 s (docs/reliability.md).
reliability-long:
	RELIABILITY_LONG=1 $(GO) test -race -count=1 -timeout 30m -run 'UnderLoad' -v ./cmd/leash/

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
