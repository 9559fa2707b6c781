#!/usr/bin/env bash
# The README's two commands.
#   tools/dev.sh run    install what is missing, build, run the default scenario
#   tools/dev.sh test   install what is missing, build, run the whole test suite (CTest's summary last)
#   tools/dev.sh bench [ARGS]  install what is missing, build the speed benchmarks (build-bench/), run them
#                       (docs/benchmarks.md): console table, JSON in results/bench/bench.json; ARGS go to
#                       zerosim_bench (e.g. --benchmark_filter=BM_default_scenario)
# Works on a fresh Debian 12 as root (apt-get) or as a user with sudo. Everything comes from Debian packages.
set -euo pipefail
cd "$(dirname "$0")/.."

what="${1:-run}"
case "$what" in run|test|build|bench) ;; *) echo "usage: tools/dev.sh run|test|build|bench" >&2; exit 2 ;; esac

packages=(cmake make g++ pkg-config libsimgrid-dev libboost-dev libeigen3-dev libyaml-cpp-dev doctest-dev libbenchmark-dev)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ "${#missing[@]}" -gt 0 ]; then
  echo "== installing: ${missing[*]}"
  sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  $sudo apt-get update -q
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -q --no-install-recommends "${missing[@]}"
fi

jobs="$(nproc 2>/dev/null || echo 2)"
if [ "$what" = bench ]; then
  echo "== building the benchmarks (build-bench/, Release, warnings are errors)"
  cmake -S . -B build-bench -DCMAKE_BUILD_TYPE=Release -DZEROSIM_WARNINGS_AS_ERRORS=ON \
    -DZEROSIM_BUILD_BENCHMARKS=ON -DZEROSIM_BUILD_TESTS=OFF >/dev/null
  cmake --build build-bench -j "$jobs" --target zerosim_bench
  mkdir -p results/bench
  echo "== build-bench/bench/zerosim_bench (JSON: results/bench/bench.json)"
  ./build-bench/bench/zerosim_bench --benchmark_out=results/bench/bench.json --benchmark_out_format=json "${@:2}"
  exit 0
fi
echo "== building (build/, Release, warnings are errors)"
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DZEROSIM_WARNINGS_AS_ERRORS=ON >/dev/null
cmake --build build -j "$jobs"

case "$what" in
  run)
    echo "== zerosim run scenarios/llama2-70b-8xa100-200gbps.yaml"
    ./build/sim/zerosim run scenarios/llama2-70b-8xa100-200gbps.yaml
    ;;
  test)
    echo "== running the test suite"
    cd build && ctest --output-on-failure -j "$jobs"
    ;;
esac
