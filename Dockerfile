# syntax=docker/dockerfile:1
# Leash: a static binary on distroless, running as a non-root user. Needs BuildKit (the
# default builder of current Docker) for the cache mounts.
#   make image IMAGE=leash:local   # docker build -t leash:local --build-arg VERSION=$(VERSION) .
#   docker run --rm -p 8080:8080 -p 8081:8081 -p 9090:9090 -v leash-data:/var/lib/leash leash:local
#   docker run --rm -v $PWD/leash.yaml:/etc/leash/leash.yaml:ro leash:local --config /etc/leash/leash.yaml
#   docker run --rm --entrypoint /bin/ratelimit -e REDIS_URL=redis:6379 leash:local   # as envoyproxy/ratelimit

# At least the go directive of go.mod: the golang images set GOTOOLCHAIN=local.
ARG GO_VERSION=1.26.8

# The build runs on the builder's own platform and cross-compiles (pure Go, no cgo), so
# multi-platform builds (docker buildx build --platform linux/amd64,linux/arm64) need no
# emulation.
FROM --platform=$BUILDPLATFORM golang:${GO_VERSION} AS build
WORKDIR /src
# Dependencies first, so they stay cached while the sources change.
COPY go.mod go.sum ./
RUN --mount=type=cache,target=/go/pkg/mod go mod download
COPY . .
ARG VERSION=dev
ARG TARGETOS
ARG TARGETARCH
RUN --mount=type=cache,target=/go/pkg/mod --mount=type=cache,target=/root/.cache/go-build \
    CGO_ENABLED=0 GOOS=${TARGETOS} GOARCH=${TARGETARCH} \
    go build -trimpath -ldflags "-s -w -X main.version=${VERSION}" -o /out/leash ./cmd/leash
# The disk store's directory, empty, for the final stage (which has no shell to make it).
RUN mkdir -p /out/data

# No shell, no package manager, CA certificates and tzdata only.
FROM gcr.io/distroless/static-debian12:nonroot
ARG VERSION=dev
LABEL org.opencontainers.image.title="leash" \
      org.opencontainers.image.description="Leash rate-limit and concurrency-lease service" \
      org.opencontainers.image.source="https://github.com/leashd/leash" \
      org.opencontainers.image.version="${VERSION}"
COPY --from=build /out/leash /usr/local/bin/leash
# The same binary as /bin/ratelimit, the command Envoy Gateway starts its rate-limit
# container with: named ratelimit, it reads envoyproxy/ratelimit's environment variables
# (docs/envoy.md, "Leash under Envoy Gateway"). A copy, since the image has no shell to
# link it.
COPY --from=build /out/leash /bin/ratelimit
# The disk store (store.backend: disk, the default) keeps its state in /var/lib/leash, owned
# by the nonroot user and declared a volume so it outlives the container; mount a named
# volume or a PersistentVolumeClaim there. LEASH_STORE_DISK_PATH wins over a config file's
# store.disk.path: set the variable to move it.
COPY --from=build --chown=65532:65532 /out/data /var/lib/leash
ENV LEASH_STORE_DISK_PATH=/var/lib/leash
VOLUME ["/var/lib/leash"]
# distroless's nonroot user, by number: the kubelet can check runAsNonRoot only against a
# numeric USER. Leash binds unprivileged ports, writes only into /var/lib/leash and logs to
# stderr, so a read-only root file system is fine.
USER 65532:65532
# /v1 JSON API, Envoy RateLimitService gRPC, admin (/healthz /readyz /metrics).
EXPOSE 8080 8081 9090
ENTRYPOINT ["/usr/local/bin/leash", "serve"]
