#!/usr/bin/env bash
# The README's two commands.
#   tools/dev.sh run    install what is missing, build, run the default scenario
#   tools/dev.sh test   install what is missing, build, run the whole test suite (CTest's summary last)
# Works on a fresh Debian 12 as root (apt-get) or as a user with sudo. Everything comes from Debian packages.
set -euo pipefail
cd "$(dirname "$0")/.."

what="${1:-run}"
case "$what" in run|test|build) ;; *) echo "usage: tools/dev.sh run|test|build" >&2; exit 2 ;; esac

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
