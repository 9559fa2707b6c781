#!/usr/bin/env bash
# Runs one libFuzzer target of build-fuzz/ until its processes have used CPU_SECONDS of CPU time (user + system),
# however long that takes in wall time on a shared machine, and records what it did (docs/fuzzing.md "Runs").
#   tools/fuzz-cpu.sh TARGET CPU_SECONDS
# TARGET is one of scenario model node ds_config set (seeds and dictionary as in tools/dev.sh fuzz); build-fuzz/
# must be built (tools/dev.sh fuzz 0). libFuzzer stops at a finding: the loop then starts a new session on the
# grown corpus, so a finding costs no CPU budget. The CPU time is read from /proc/PID/stat every 2 s; at the budget
# the session gets SIGINT, and libFuzzer prints its final statistics. Writes build-fuzz/logs/TARGET-cpu.tsv (one
# line a session: CPU s, executions, how it ended) and prints the totals.
set -euo pipefail
cd "$(dirname "$0")/.."
name="${1:?usage: tools/fuzz-cpu.sh TARGET CPU_SECONDS}"
budget="${2:?usage: tools/fuzz-cpu.sh TARGET CPU_SECONDS}"
case "$name" in
  scenario) seeds=scenarios dict=yaml ;;
  model) seeds=models dict=yaml ;;
  node) seeds=topologies dict=yaml ;;
  ds_config) seeds=scenarios/ds_configs dict=json ;;
  set) seeds=fuzz/seeds/set dict=set ;;
  *) echo "tools/fuzz-cpu.sh: unknown target '$name' (scenario, model, node, ds_config, set)" >&2; exit 2 ;;
esac
tick="$(getconf CLK_TCK)"
mkdir -p "build-fuzz/corpus/$name" build-fuzz/artifacts build-fuzz/logs
tsv="build-fuzz/logs/$name-cpu.tsv"
printf 'session\tcpu_s\texecutions\tended\n' >"$tsv"
used=0 session=0 total_execs=0
while [ "$used" -lt "$budget" ]; do
  session=$((session + 1))
  log="build-fuzz/logs/$name-session-$session.log"
  # -timeout=60: libFuzzer's timeout is wall time, and a shared machine can make a 50 ms input wait seconds.
  "./build-fuzz/fuzz/fuzz_$name" -max_total_time=86400 -timeout=60 -rss_limit_mb=2048 -malloc_limit_mb=1024 \
    -print_final_stats=1 -artifact_prefix="build-fuzz/artifacts/$name-" -dict="build-fuzz/$dict.dict" \
    "build-fuzz/corpus/$name" "$seeds" >"$log" 2>&1 &
  pid=$!
  cpu=0
  while kill -0 "$pid" 2>/dev/null; do
    if stat="$(cat "/proc/$pid/stat" 2>/dev/null)"; then
      # Fields 14 and 15 (utime, stime) in clock ticks; the command name (field 2) holds no spaces here.
      read -r -a f <<<"$stat"
      cpu=$(((f[13] + f[14]) / tick))
      if [ $((used + cpu)) -ge "$budget" ]; then kill -INT "$pid" 2>/dev/null || true; fi
    fi
    sleep 2
  done
  wait "$pid" || true
  execs="$(grep -m1 -oE "stat::number_of_executed_units: [0-9]+" "$log" | grep -oE "[0-9]+$" || echo 0)"
  if grep -q "run interrupted" "$log"; then ended=budget; else ended="$(grep -m1 -oE "ERROR: [^ ]+.*|deadly signal|Test unit written to [^ ]+" "$log" || echo "exit")"; fi
  used=$((used + cpu))
  total_execs=$((total_execs + execs))
  printf '%s\t%s\t%s\t%s\n' "$session" "$cpu" "$execs" "$ended" >>"$tsv"
done
echo "fuzz_$name: $used CPU s, $session sessions, $total_execs executions ($tsv)"
