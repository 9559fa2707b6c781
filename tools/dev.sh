#!/usr/bin/env bash
# The README's two commands.
#   tools/dev.sh run    install what is missing, build, run the default scenario
#   tools/dev.sh test   install what is missing (clang-tidy too, for the function-size test), build, run the whole
#                       test suite (CTest's summary last)
#   tools/dev.sh bench [ARGS]  install what is missing, build the speed benchmarks (build-bench/), run them
#                       (docs/benchmarks.md): console table (also results/bench/bench.txt), JSON in
#                       results/bench/bench.json; ARGS go to
#                       zerosim_bench (e.g. --benchmark_filter=BM_default_scenario)
#   tools/dev.sh sanitize [CTEST ARGS]  install what is missing, build the project and the suite with
#                       AddressSanitizer and UndefinedBehaviorSanitizer (build-sanitize/, every report fatal),
#                       run the whole suite (docs/testing.md "Sanitizers"); ARGS go to ctest (e.g. -R config)
#   tools/dev.sh fuzz [SECONDS]  install what is missing (clang, libclang-rt-14-dev too), build the libFuzzer targets
#                       of the input loaders with clang++ and ASan+UBSan (build-fuzz/, docs/fuzzing.md), run each for
#                       SECONDS (default 60) on its corpus (build-fuzz/corpus/TARGET, seeded with the shipped files);
#                       a finding is written to build-fuzz/artifacts/ and named, and the command exits 1
#   tools/dev.sh tidy   install what is missing (clang-tidy too), configure build/ (compile_commands.json) and run
#                       clang-tidy with the checked-in .clang-tidy (the 150-line function-size bound) over every
#                       file of sim/; a function over the bound is named and the command exits 1
#                       (docs/testing.md "Function size")
# Works on a fresh Debian 12 as root (apt-get) or as a user with sudo. Everything comes from Debian packages.
set -euo pipefail
cd "$(dirname "$0")/.."

what="${1:-run}"
case "$what" in run|test|build|bench|sanitize|fuzz|tidy) ;; *) echo "usage: tools/dev.sh run|test|build|bench|sanitize|fuzz|tidy" >&2; exit 2 ;; esac

packages=(cmake make g++ pkg-config libsimgrid-dev libboost-dev libeigen3-dev libyaml-cpp-dev doctest-dev libbenchmark-dev nlohmann-json3-dev libcli11-dev gnuplot-nox openmpi-bin libopenmpi-dev)
# libFuzzer and the sanitizers' clang runtime: Debian's clang 14.
if [ "$what" = fuzz ]; then packages+=(clang libclang-rt-14-dev); fi
# clang-tidy: Debian 12's clang-tidy (clang-tidy-14, with run-clang-tidy).
if [ "$what" = tidy ] || [ "$what" = test ]; then packages+=(clang-tidy); fi
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
  echo "== build-bench/bench/zerosim_bench (JSON: results/bench/bench.json, console: results/bench/bench.txt)"
  ./build-bench/bench/zerosim_bench --benchmark_out=results/bench/bench.json --benchmark_out_format=json \
    --benchmark_color=false "${@:2}" | tee results/bench/bench.txt
  exit "${PIPESTATUS[0]}"
fi
if [ "$what" = sanitize ]; then
  # -O1 keeps the suite quick under the sanitizers; frame pointers give whole stacks in reports.
  # -fno-sanitize-recover=undefined: an undefined-behaviour report aborts the test, as an address report does.
  # LeakSanitizer (part of AddressSanitizer) runs at exit; tools/sanitize/lsan.supp names the leaks that are
  # libraries' own (none of zerosim's code), each with why.
  # -Wno-maybe-uninitialized: GCC 12 warns falsely inside libstdc++'s own <regex> (std::function in
  # regex_automaton.h) once the sanitizers instrument it: the warning follows data flow, which the
  # instrumentation changes. The Release build (tools/dev.sh test, CI) keeps the warning, as an error.
  flags="-O1 -g -fno-omit-frame-pointer -fsanitize=address,undefined -fno-sanitize-recover=undefined"
  flags="$flags -Wno-maybe-uninitialized"
  echo "== building with AddressSanitizer + UndefinedBehaviorSanitizer (build-sanitize/, warnings are errors)"
  cmake -S . -B build-sanitize -DCMAKE_BUILD_TYPE=Debug -DZEROSIM_WARNINGS_AS_ERRORS=ON \
    -DCMAKE_CXX_FLAGS="$flags" -DCMAKE_EXE_LINKER_FLAGS="-fsanitize=address,undefined" >/dev/null
  cmake --build build-sanitize -j "$jobs"
  echo "== running the test suite under the sanitizers"
  export ASAN_OPTIONS="abort_on_error=1:detect_leaks=1:detect_stack_use_after_return=1:strict_string_checks=1"
  export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"
  export LSAN_OPTIONS="suppressions=$PWD/tools/sanitize/lsan.supp:print_suppressions=0"
  cd build-sanitize && ctest --output-on-failure -j "$jobs" "${@:2}"
  exit "$?"
fi
if [ "$what" = fuzz ]; then
  seconds="${2:-60}"
  case "$seconds" in '' | *[!0-9]*) echo "usage: tools/dev.sh fuzz [SECONDS]" >&2; exit 2 ;; esac
  echo "== building the fuzz targets (build-fuzz/, clang++, libFuzzer + ASan + UBSan, warnings are errors)"
  cmake -S . -B build-fuzz -DCMAKE_CXX_COMPILER=clang++ -DCMAKE_BUILD_TYPE=Debug -DZEROSIM_WARNINGS_AS_ERRORS=ON \
    -DZEROSIM_BUILD_FUZZERS=ON >/dev/null
  cmake --build build-fuzz -j "$jobs"
  ./build-fuzz/fuzz/fuzz_dictionaries build-fuzz
  # TARGET SEEDS DICTIONARY: the shipped files are read-only seeds (libFuzzer writes only to the first corpus folder).
  targets=("scenario scenarios yaml" "model models yaml" "node topologies yaml" "ds_config scenarios/ds_configs json"
           "set fuzz/seeds/set set")
  mkdir -p build-fuzz/artifacts build-fuzz/logs
  failed=()
  for t in "${targets[@]}"; do
    read -r name seeds dict <<<"$t"
    mkdir -p "build-fuzz/corpus/$name"
    log="build-fuzz/logs/$name.log"
    echo "== fuzz_$name for ${seconds} s (log: $log)"
    # -timeout: an input taking 10 s is a hang; -rss_limit_mb/-malloc_limit_mb: one taking 2 GiB is a finding.
    if ./build-fuzz/fuzz/"fuzz_$name" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -malloc_limit_mb=1024 \
      -print_final_stats=1 -artifact_prefix="build-fuzz/artifacts/$name-" -dict="build-fuzz/$dict.dict" \
      "build-fuzz/corpus/$name" $seeds >"$log" 2>&1; then
      grep -E "^#[0-9]+.*(DONE|pulse)" "$log" | tail -n 1 || true
      grep -E "stat::number_of_executed_units" "$log" || true
    else
      echo "   FINDING: $(grep -m1 -E "ERROR|SUMMARY|deadly|Test unit written" "$log" || tail -n 1 "$log")"
      grep -E "Test unit written" "$log" || true
      failed+=("$name")
    fi
  done
  if [ "${#failed[@]}" -gt 0 ]; then
    echo "== findings in: ${failed[*]} (inputs in build-fuzz/artifacts/; docs/fuzzing.md says how to keep them)"
    exit 1
  fi
  echo "== no findings"
  exit 0
fi
if [ "$what" = tidy ]; then
  echo "== configuring build/ (Release, warnings are errors; build/compile_commands.json)"
  cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DZEROSIM_WARNINGS_AS_ERRORS=ON >/dev/null
  # clang-tidy compiles each file with clang, from GCC's command lines: -Wno-unknown-warning-option for the GCC-only
  # -Wno-dangling-pointer, -Wno-error so that a warning of clang's own is not an error that stops the file (a file
  # that does not compile is still reported, and fails the run). Only the checks of .clang-tidy run.
  echo "== clang-tidy (.clang-tidy: readability-function-size, 150 lines) over sim/"
  if run-clang-tidy -p build -j "$jobs" -quiet -extra-arg=-Wno-unknown-warning-option -extra-arg=-Wno-error \
    "$PWD/sim/[a-z_]+/[^/]+[.]cpp\$"; then
    echo "== no function of sim/ over 150 lines"
    exit 0
  fi
  echo "== clang-tidy failed: the functions named above are over 150 lines (or a file did not compile)"
  exit 1
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
