#!/usr/bin/env bash
# Runs every fuzz target of the module for a bounded time each: hack/fuzz.sh [duration]
set -euo pipefail
t=${1:-10s}
cd "$(dirname "$0")/.."
log=$(mktemp)
trap 'rm -f "$log"' EXIT
n=0
while read -r f; do
  pkg=./$(dirname "${f#./}")
  mapfile -t fns < <(grep -oE '^func Fuzz[A-Za-z0-9_]+' "$f" | awk '{print $2}')
  for fn in "${fns[@]}"; do
    if ! go test -run '^$' -fuzz "^$fn\$" -fuzztime "$t" "$pkg" >"$log" 2>&1; then
      cat "$log"; echo "FAIL fuzz $pkg $fn"; exit 1
    fi
    echo "ok   fuzz $pkg $fn ($t)"; n=$((n+1))
  done
done < <(grep -rl --include='*_test.go' '^func Fuzz' . | sort)
echo "$n fuzz targets ran without a crash"
