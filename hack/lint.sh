#!/usr/bin/env bash
# The linters: golangci-lint over the Go code of every test tier (its linters, build tags and
# exclusions are in .golangci.yml) and shellcheck over the scripts in hack/ and .ci/ (its
# settings are in .shellcheckrc). Any finding fails.
# Usage: hack/lint.sh   (make lint; make verify runs it)
#
# golangci-lint is built at its pinned version into the cache (hack/tools.sh); shellcheck is
# Debian's package (hack/install-deps.sh, base group).
set -euo pipefail
cd "$(dirname "$0")/.."
tools=$(hack/tools.sh golangci-lint)
command -v shellcheck >/dev/null || { echo "lint: shellcheck is missing: run hack/install-deps.sh base" >&2; exit 1; }

# The scripts: every *.sh under hack/ and .ci/, and every file there without an extension
# that starts with a sh or bash shebang (.ci/run). Found on disk, not in git's index, so a
# script not yet added is checked too.
scripts=() shebang='^#!.*[/ ](ba|da)?sh([[:space:]]|$)'
while IFS= read -r -d '' f; do
  case ${f##*/} in
    *.sh) scripts+=("$f") ;;
    *.*) ;;
    *)
      first='' && { IFS= read -r first <"$f" || true; }
      if [[ $first =~ $shebang ]]; then scripts+=("$f"); fi ;;
  esac
done < <(find hack .ci -type f -print0 | sort -z)

status=0
"$tools/golangci-lint" run ./... || status=1
shellcheck "${scripts[@]}" || status=1
[ $status = 0 ] || { echo "lint: findings above; fix them, or disable the check in .golangci.yml or .shellcheckrc with its reason" >&2; exit 1; }
echo "lint: golangci-lint and shellcheck (${#scripts[@]} scripts) found nothing"
