#!/usr/bin/env bash
# tools/update-config-reference.sh ZEROSIM
#
# Rewrites the key reference at the end of docs/config.md (its fenced blocks after "## Key reference") with
# `zerosim describe model`, `node` and `scenario`: run it after changing a table of sim/config/schema.cpp.
# tests/unit/config/schema_test.cpp fails while the page and describe differ.
set -euo pipefail
if [ "$#" -ne 1 ]; then
  echo "usage: tools/update-config-reference.sh ZEROSIM" >&2
  exit 2
fi
zerosim="$(realpath "$1")"
cd "$(dirname "$0")/.."
doc=docs/config.md
heading="$(grep -n '^## Key reference' "$doc" | cut -d: -f1)"
first_fence="$(awk -v h="$heading" 'NR > h && /^```$/ { print NR; exit }' "$doc")"
{
  head -n "$((first_fence - 1))" "$doc"
  for what in model node scenario; do
    [ "$what" = model ] || echo
    echo '```'
    "$zerosim" describe "$what"
    echo '```'
  done
} >"$doc.new"
mv "$doc.new" "$doc"
echo "rewrote the key reference of $doc"
