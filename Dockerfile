# syntax=docker/dockerfile:1
# numapref: one static binary, `numapref agent` in the DaemonSet (charts/numapref,
# config/manager). Build: docker build -t numapref:dev .
# Multi-arch: docker buildx build --platform linux/amd64,linux/arm64 -t ... .

FROM --platform=$BUILDPLATFORM golang:1.26 AS builder
ARG TARGETOS=linux
ARG TARGETARCH
WORKDIR /src
# Modules first, so a source change does not download them again.
COPY go.mod go.sum ./
RUN --mount=type=cache,target=/go/pkg/mod go mod download
COPY . .
RUN --mount=type=cache,target=/go/pkg/mod --mount=type=cache,target=/root/.cache/go-build \
    CGO_ENABLED=0 GOOS=$TARGETOS GOARCH=$TARGETARCH \
    go build -trimpath -ldflags='-s -w' -o /out/numapref ./cmd/numapref

# distroless/static (not :nonroot): no shell, no package manager, CA certificates and
# /etc/passwd only. The agent has to run as uid 0: PR_PREFERRED_NID on another user's task
# needs ptrace-read rights, which a non-root uid only gets with CAP_SYS_PTRACE in its
# *effective* set, and non-root containers start with an empty effective set. The
# DaemonSet therefore runs it as root but with every capability dropped except SYS_PTRACE
# (and NET_ADMIN for fork events), privileged: false, no privilege escalation, a read-only
# root filesystem and the RuntimeDefault seccomp profile.
FROM gcr.io/distroless/static-debian12:latest
COPY --from=builder /out/numapref /numapref
USER 0:0
ENTRYPOINT ["/numapref"]
CMD ["agent"]
