#!/usr/bin/env bash
# tools/snapshot-outputs.sh ZEROSIM OUT_DIR
#
# Writes what a refactoring must keep byte for byte into OUT_DIR: for every shipped scenario, the JSON of
# `zerosim run --json` and `zerosim memory --json` (with each exit status), the memory validation report
# (`validate --memory`) and the throughput report on the priors (`validate --run --priors-only`; the fit adds
# only the deterministic Levenberg-Marquardt steps on top of these predictions). Compare two snapshots with
# `diff -r BEFORE AFTER` (docs/architecture.md). Takes a few minutes on 2 cores.
set -euo pipefail
if [ "$#" -ne 2 ]; then
  echo "usage: tools/snapshot-outputs.sh ZEROSIM OUT_DIR" >&2
  exit 2
fi
zerosim="$(realpath "$1")"
out="$2"
cd "$(dirname "$0")/.."
mkdir -p "$out/run" "$out/memory" "$out/validation"
for scenario in scenarios/*.yaml; do
  name="$(basename "$scenario" .yaml)"
  for cmd in run memory; do
    status=0
    "$zerosim" "$cmd" "$scenario" --json >"$out/$cmd/$name.json" 2>"$out/$cmd/$name.err" || status=$?
    echo "$status" >"$out/$cmd/$name.status"
  done
done
"$zerosim" validate --memory results/validation/published.csv --out "$out/validation" >/dev/null
"$zerosim" validate --run --priors-only results/validation/published.csv --out "$out/validation" >/dev/null
echo "snapshot in $out"
