// The simulator's own speed (issue 4; design.md "Speed and scale"; docs/benchmarks.md). Every benchmark
// is one `zerosim run SCENARIO [--set K=V]... --json` end to end, through the same library calls as
// cli/commands.cpp: load the scenario, build the workload, replay the step, compute the metrics, render the
// JSON. One iteration is a whole simulation. Counters: the simulated step time, the SimGrid flows the replay
// created, the micro-steps it simulated (accumulation reuse), and the peak resident set of the process while
// the benchmark ran (the 1 GiB target).
#include "config/scenario_loader.hpp"
#include "core/json.hpp"
#include "engine/engine.hpp"
#include "metrics/run_metrics.hpp"
#include "report/run_report.hpp"
#include "workload/transformer.hpp"

#include <benchmark/benchmark.h>

#include <malloc.h>
#include <sys/resource.h>

#include <cstddef>
#include <exception>
#include <fstream>
#include <string>
#include <vector>

namespace zerosim::bench {

namespace {

/// What one end-to-end run leaves for the counters.
struct RunOutcome {
  double step_time_s = 0;
  long flows = 0;
  int simulated_micro_steps = 0; ///< under accumulation reuse, fewer than grad_accum
  std::size_t json_bytes = 0;
};

std::string source_path(const std::string& relative)
{
  return std::string(ZEROSIM_SOURCE_DIR) + "/" + relative;
}

/// `zerosim run PATH --set S... --json` without the printing: the sequence of run_scenario_command
/// (cli/commands.cpp), which has no function of its own for "scenario file -> result".
RunOutcome run_end_to_end(const std::string& path, const std::vector<std::string>& sets)
{
  config::LoadOptions opts;
  opts.sets = sets;
  const spec::Scenario s = config::load_scenario(path, opts);
  const workload::Workload w = workload::build_workload(s.model, workload::workload_options(s));
  const engine::Timeline t = engine::simulate(s, w, engine::EngineOptions{});
  const metrics::RunMetrics m = metrics::compute_metrics(s, w, t);
  const std::string json = report::run_json(s, w, m, t).dump();
  return RunOutcome{m.step_time_s, t.flows, t.reuse.simulated_micro_steps, json.size()};
}

/// Peak resident set of this process in MiB: getrusage's ru_maxrss, kilobytes on Linux (getrusage(2)).
double peak_rss_mib()
{
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_maxrss) / 1024.0;
}

/// Returns the heap the previous benchmarks freed to the kernel (glibc's malloc_trim(3)), then resets the
/// process's peak-RSS mark to its current RSS (writing "5" to /proc/self/clear_refs, Linux 4.0+, proc(5)), so
/// that each benchmark's peak is its own plus the process's baseline, not the largest of the ones before it.
/// Where the kernel refuses, the mark stays the process's high-water mark, an upper bound of the benchmark's own.
void reset_peak_rss()
{
  malloc_trim(0);
  std::ofstream f("/proc/self/clear_refs");
  f << "5";
}

void run_benchmark(benchmark::State& state, const std::string& path, const std::vector<std::string>& sets)
{
  reset_peak_rss();
  RunOutcome last;
  for (auto _ : state) {
    try {
      last = run_end_to_end(path, sets);
    } catch (const std::exception& e) {
      // A scenario that fails to load or simulate is reported as this benchmark's error, not a crash.
      state.SkipWithError(e.what());
      break;
    }
    benchmark::DoNotOptimize(last);
  }
  state.counters["step_time_s"] = last.step_time_s;
  state.counters["flows"] = static_cast<double>(last.flows);
  state.counters["micro_steps_simulated"] = last.simulated_micro_steps;
  state.counters["peak_rss_MiB"] = peak_rss_mib();
}

/// The default scenario (README, tools/dev.sh run). Target: under 0.5 s.
void BM_default_scenario(benchmark::State& state)
{
  run_benchmark(state, source_path("scenarios/llama2-70b-8xa100-200gbps.yaml"), {});
}

/// Llama-2-70B, ZeRO-3, no offload, range(0) GPUs on DGX A100 80GB nodes (bench/scenarios/). Targets:
/// 512 GPUs under 1 s, 4096 GPUs under 10 s.
void BM_70b_zero3(benchmark::State& state)
{
  run_benchmark(state, source_path("bench/scenarios/llama2-70b-zero3-" + std::to_string(state.range(0)) + "xa100.yaml"),
                {});
}

/// The default scenario with training.grad_accum = range(0) (the global batch follows). Target: 1024 under 3x
/// the wall time of 1.
void BM_grad_accum(benchmark::State& state)
{
  run_benchmark(state, source_path("scenarios/llama2-70b-8xa100-200gbps.yaml"),
                {"training.grad_accum=" + std::to_string(state.range(0))});
}

/// The offload scenarios of issue 5: ZeRO-Infinity 1T on one DGX-2 (16 ranks, every NVMe swap and parameter
/// read) and BLOOM-176B ZeRO-Inference from NVMe (prefill and sampled decode passes). No target of their own:
/// they watch the NVMe path (SimGrid disks made the first replay 180 s, docs/engine.md "NVMe").
void BM_offload_scenario(benchmark::State& state, const char* file)
{
  run_benchmark(state, source_path(std::string("scenarios/") + file), {});
}

// Each iteration is a whole simulation: 3 are plenty for a figure in milliseconds to seconds.
constexpr int ITERATIONS = 3;

BENCHMARK(BM_default_scenario)->Unit(benchmark::kMillisecond)->Iterations(ITERATIONS);
BENCHMARK(BM_70b_zero3)->Arg(64)->Arg(512)->Arg(4096)->Unit(benchmark::kMillisecond)->Iterations(ITERATIONS);
BENCHMARK(BM_grad_accum)->Arg(1)->Arg(1024)->Unit(benchmark::kMillisecond)->Iterations(ITERATIONS);
BENCHMARK_CAPTURE(BM_offload_scenario, zero_infinity_1t, "zero-infinity-1t-dgx2-nvme.yaml")
    ->Unit(benchmark::kMillisecond)
    ->Iterations(ITERATIONS);
BENCHMARK_CAPTURE(BM_offload_scenario, bloom_176b_inference, "bloom-176b-inference-1xa100-nvme.yaml")
    ->Unit(benchmark::kMillisecond)
    ->Iterations(ITERATIONS);

} // namespace

} // namespace zerosim::bench

BENCHMARK_MAIN();
