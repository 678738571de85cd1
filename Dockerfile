# syntax=docker/dockerfile:1
# Leash: a static binary on distroless, running as a non-root user.
#   docker build -t leash:local --build-arg VERSION=$(git describe --tags --always) .
#   docker run --rm -p 8080:8080 -p 8081:8081 -p 9090:9090 leash:local
#   docker run --rm -v $PWD/leash.yaml:/etc/leash/leash.yaml:ro leash:local --config /etc/leash/leash.yaml

FROM golang:1.26 AS build
WORKDIR /src
# Dependencies first, so they stay cached while the sources change.
COPY go.mod go.sum ./
RUN --mount=type=cache,target=/go/pkg/mod go mod download
COPY . .
ARG VERSION=dev
RUN --mount=type=cache,target=/go/pkg/mod --mount=type=cache,target=/root/.cache/go-build \
    CGO_ENABLED=0 go build -trimpath -ldflags "-s -w -X main.version=${VERSION}" \
    -o /out/leash ./cmd/leash

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/leash /usr/local/bin/leash
# uid/gid 65532 (nonroot): Leash binds unprivileged ports only.
USER nonroot:nonroot
# /v1 JSON API, Envoy RateLimitService gRPC, admin (/healthz /readyz /metrics).
EXPOSE 8080 8081 9090
ENTRYPOINT ["/usr/local/bin/leash", "serve"]
