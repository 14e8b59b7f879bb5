# numapref's image: one static binary, `numapref agent` in the DaemonSet and `numapref
# summarizer` in the Deployment (charts/numapref). Build it with `make image
# IMG=<registry>/numapref:<tag>` (hack/image.sh), which compiles the binary with this
# machine's Go toolchain (CGO_ENABLED=0, -trimpath) into the build context and builds
# this file with docker or podman; PUSH=1 pushes it. Nothing here runs a command, so the
# build needs no network beyond pulling BASE.
#
# BASE is distroless/static by default (not :nonroot): no shell, no package manager, CA
# certificates and /etc/passwd only; the binary reads none of its files, so `scratch`
# works too (the offline e2e builds with it). The agent has to run as uid 0:
# PR_PREFERRED_NID on another user's task needs ptrace-read rights, which a non-root uid
# only gets with CAP_SYS_PTRACE in its *effective* set, and non-root containers start with
# an empty effective set. The DaemonSet therefore runs it as root but with every
# capability dropped except SYS_PTRACE (and NET_ADMIN for fork events), privileged:
# false, no privilege escalation, a read-only root filesystem and the RuntimeDefault
# seccomp profile.
ARG BASE=gcr.io/distroless/static-debian12:latest
FROM ${BASE}
COPY numapref /numapref
COPY LICENSE /LICENSE
USER 0:0
ENTRYPOINT ["/numapref"]
CMD ["agent"]
