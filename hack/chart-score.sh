#!/usr/bin/env bash
# Renders charts/numapref for a few value sets and runs kube-score on each; any finding fails.
# Usage: hack/chart-score.sh   (make chart-score)
#
# kube-score stands in for kube-linter, which the Go module proxy does not serve
# (SECURITY.md). Every check runs, the optional ones too (--all-default-optional), and a
# WARNING fails like a CRITICAL (--exit-one-on-warning). The checks that do not fit a node
# agent are skipped by the DaemonSet's kube-score/ignore annotation, each with its reason in
# charts/numapref/templates/daemonset.yaml, so the exceptions live in the chart.
# One flag here: --ignore-container-cpu-limit. The agent has a CPU request but no CPU limit
# on purpose: CPU is compressible and the request already guarantees its share, while a
# limit would CFS-throttle it during fork storms (delaying the re-apply) and its probes.
# The kube-score/ignore annotation could only skip all of container-resources, which would
# also stop checking the memory limit and the requests.
set -euo pipefail
cd "$(dirname "$0")/.."
tools=$(hack/tools.sh helm kube-score)
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

# name|helm flags
sets=(
  "defaults|"
  "no-fork-events|--set forkEvents=false"
  "emulated-local|--set kernel=emulated --set bindAddress=127.0.0.1 --set apiServer.host=127.0.0.1"
  "cert-manager|--set certManager.enabled=true --api-versions cert-manager.io/v1"
  "shared-certificate|--set tls.nodeCertificates=false"
  # The opt-in tune-balancing init container, the chart's only privileged container: its
  # one exception (container-security-context-privileged) is added only with it.
  # The monitoring objects (PodMonitor, PrometheusRule, dashboard ConfigMap), each off by
  # default; kube-score scores what it knows of them and the rest of the chart beside them.
  "monitoring|--set metrics.podMonitor.enabled=true --set metrics.prometheusRule.enabled=true --set metrics.dashboard.enabled=true --api-versions monitoring.coreos.com/v1/PodMonitor --api-versions monitoring.coreos.com/v1/PrometheusRule"
  "tune-balancing|--set numaBalancing.tune=true --set numaBalancing.scanDelayMs=4294967295 --set numaBalancing.scanPeriodMinMs=4294967295 --set numaBalancing.scanPeriodMaxMs=4294967295"
)
failed=0
for s in "${sets[@]}"; do
  name=${s%%|*}
  # shellcheck disable=SC2086 # the flags are split on purpose
  HELM_CACHE_HOME="$out/helm" HELM_CONFIG_HOME="$out/helm" HELM_DATA_HOME="$out/helm" \
    "$tools/helm" template np charts/numapref --namespace numapref-system ${s#*|} >"$out/$name.yaml"
  # kube-score exits 1 on a finding; its ci output has a line per check result (per comment),
  # [OK], [SKIPPED], [WARNING] or [CRITICAL], in no stable order. It scores only the kinds it
  # knows: here the DaemonSet (RBAC and the ServiceAccount are checked by test/chart).
  if "$tools/kube-score" score --all-default-optional --exit-one-on-warning --ignore-container-cpu-limit \
    --kubernetes-version v1.36 --output-format ci "$out/$name.yaml" >"$out/$name.txt"; then
    echo "ok   kube-score $name: $(grep -c '^\[OK\]' "$out/$name.txt") passed, $(grep -c '^\[SKIPPED\]' "$out/$name.txt") skipped"
  else
    grep -vE '^\[(OK|SKIPPED)\]' "$out/$name.txt" | sort || true
    echo "FAIL kube-score $name (values: ${s#*|}); \`kube-score list\` maps a check's name to its ID"
    failed=1
  fi
done
exit "$failed"
