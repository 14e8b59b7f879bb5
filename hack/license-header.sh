#!/usr/bin/env bash
# Puts the license header (hack/boilerplate.go.txt: the copyright line and the SPDX
# identifier of LICENSE) at the top of every Go file that lacks it, above any build
# constraint. Generated files get it from their generator (make generate passes the same
# file as headerFile), which may put it below their build constraint: that counts too.
# test/license checks that every Go file has it.
# Usage: hack/license-header.sh   (prints the files it changed)
set -euo pipefail
cd "$(dirname "$0")/.."
header=hack/boilerplate.go.txt
lines=$(wc -l <"$header")
while IFS= read -r -d '' f; do
  skip=0
  if head -n 1 "$f" | grep -q '^//go:build '; then skip=2; fi
  if head -n "$lines" "$f" | cmp -s - "$header"; then continue; fi
  if ! tail -n +$((skip + 1)) "$f" | head -n "$lines" | cmp -s - "$header"; then
    { cat "$header"; echo; cat "$f"; } >"$f.tmp" && mv "$f.tmp" "$f"
    echo "$f"
  fi
done < <(git ls-files -z --cached --others --exclude-standard -- '*.go')
