#!/usr/bin/env bash
# The agent's cost table (BENCHMARKS.md, "Cost table"), for each agent binary
# given, measured one binary after the other in one run:
#   - idle CPU (% of a core) and the idle/floor ratio at a 10 s and a 2 s rescan, and the
#     agent's VmRSS, against selected containers on the node (10, 110, 250): test/forkcost
#     -containers N -idle, emulated kernel, no API server;
#   - VmRSS against selected pods in the API (10, 110, 250): test/footprint (envtest);
#   - agent CPU per unrelated fork against the host's fork rate (quiet, 1,000, 5,000/s):
#     test/forkcost -kernel auto (no emulator on a host without the patch).
#
#   CGO_ENABLED=0 go build -trimpath -o /tmp/before ./cmd/numapref   # at the commit before
#   CGO_ENABLED=0 go build -trimpath -o /tmp/after ./cmd/numapref
#   sudo hack/costtable.sh before=/tmp/before after=/tmp/after
#
# Root (cgroups, the proc connector); the envtest binaries of hack/k8s-binaries.sh. IDLE
# (default 30s) is each idle window, PODS (default "10 110 250") the sizes. Every figure
# goes to stdout as a markdown row; each tool's full output to $OUT (a temp dir).
set -euo pipefail
cd "$(dirname "$0")/.."

[ $# -gt 0 ] || { echo "usage: $0 NAME=AGENT_BINARY..." >&2; exit 2; }
[ "$(id -u)" = 0 ] || { echo "costtable: needs root (cgroups, the proc connector)" >&2; exit 1; }
IDLE=${IDLE:-30s}
PODS=${PODS:-10 110 250}
OUT=${OUT:-$(mktemp -d /tmp/costtable.XXXXXX)}
assets=$(hack/k8s-binaries.sh)
go build -o "$OUT/forkcost" ./test/forkcost
go build -o "$OUT/footprint" ./test/footprint

# field KEY FILE: the value of KEY=value on the last line that has it.
field() { grep -o "$1=[^ ]*" "$2" | tail -1 | cut -d= -f2; }

echo "| agent | selected | rescan | idle CPU (% of a core) | idle / floor | VmRSS (MiB) |"
echo "|---|---|---|---|---|---|"
for spec in "$@"; do
  name=${spec%%=*} bin=${spec#*=}
  for n in $PODS; do
    for rescan in 10s 2s; do
      log="$OUT/idle-$name-$n-$rescan.log"
      nice -n 5 "$OUT/forkcost" -agent "$bin" -kernel emulated -containers "$n" -rates '' \
        -quiet 2s -idle "$IDLE" -rescan "$rescan" >"$log" 2>&1 || { cat "$log" >&2; exit 1; }
      rss=$(awk -v k="$(field vmrss_kib "$log")" 'BEGIN { printf "%.1f", k / 1024 }')
      echo "| $name | $n containers | $rescan | $(field agent_core_pct "$log") | $(field ratio "$log") | $rss |"
    done
  done
done

echo
echo "| agent | selected pods in the API | VmRSS mean (MiB) | RssAnon (MiB) | RssFile (MiB) | binary (MB) |"
echo "|---|---|---|---|---|---|"
for spec in "$@"; do
  name=${spec%%=*} bin=${spec#*=}
  for n in $PODS; do
    log="$OUT/footprint-$name-$n.log"
    KUBEBUILDER_ASSETS=$assets nice -n 5 "$OUT/footprint" -agent "$bin" -pods "$n" -window 20s >"$log" 2>&1 \
      || { cat "$log" >&2; exit 1; }
    line=$(grep '^footprint:' "$log")
    echo "| $name | $n | $(sed -E 's/.*mean VmRSS ([0-9.]+) MiB.*/\1/' <<<"$line") | $(sed -E 's/.*RssAnon ([0-9.]+) MiB.*/\1/' <<<"$line") |" \
      "$(sed -E 's/.*RssFile ([0-9.]+) MiB.*/\1/' <<<"$line") | $(sed -E 's/.*binary ([0-9.]+) MB.*/\1/' <<<"$line") |"
  done
done

echo
echo "| agent | host forks/s (target) | achieved | agent CPU (ms/s) | µs per unrelated fork |"
echo "|---|---|---|---|---|"
for spec in "$@"; do
  name=${spec%%=*} bin=${spec#*=}
  log="$OUT/forks-$name.log"
  nice -n 5 "$OUT/forkcost" -agent "$bin" -kernel auto -rates 1000,5000 >"$log" 2>&1 || { cat "$log" >&2; exit 1; }
  sed -nE "s/^quiet: ([0-9.]+) ms of agent CPU per second, ([0-9]+) forks.*/| $name | 0 | \2 (background) | \1 | |/p" "$log"
  sed -nE "s/^storm ([0-9]+)\/s for [^:]*: [0-9]+ forks \(([0-9]+)\/s achieved\); agent CPU ([0-9.]+) ms\/s over [0-9.]+s; (-?[0-9.]+) µs per unrelated fork.*/| $name | \1 | \2 | \3 | \4 |/p" "$log"
done
echo
echo "costtable: every tool's output is in $OUT" >&2
