// The simulator's own speed (docs/design.md "Speed and scale"; docs/benchmarks.md). Every benchmark
// is one `zerosim run SCENARIO [--set K=V]... --json` end to end, through the same library calls as
// cli/commands.cpp: load the scenario, build the workload, replay the step, compute the metrics, render the
// JSON. One iteration is a whole simulation. Counters: the simulated step time, the SimGrid flows the replay
// created, the micro-steps it simulated (accumulation reuse), and the peak resident set of the process while
// the benchmark ran (the 1 GiB target).
#include "config/scenario_loader.hpp"
#include "core/huge_pages.hpp"
#include "core/json.hpp"
#include "core/worker_pool.hpp"
#include "engine/engine.hpp"
#include "metrics/run_metrics.hpp"
#include "report/run_report.hpp"
#include "run/run_scenario.hpp"
#include "sweep/sweep.hpp"
#include "workload/transformer.hpp"

#include <benchmark/benchmark.h>

#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <exception>
#include <filesystem>
#include <sstream>
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

/// `zerosim run PATH --set S... --json` without the printing: the scenario loaded, run::run_scenario, the JSON.
RunOutcome run_end_to_end(const std::string& path, const std::vector<std::string>& sets)
{
  config::LoadOptions opts;
  opts.sets = sets;
  const spec::Scenario s = config::load_scenario(path, opts);
  const run::RunResult r = run::run_scenario(s);
  const std::string json = core::dump_json(report::run_json(s, r), 2);
  return RunOutcome{r.metrics.step_time_s, r.timeline.flows, r.timeline.reuse.simulated_micro_steps, json.size()};
}

/// Peak resident set of this process in MiB: getrusage's ru_maxrss, kilobytes on Linux (getrusage(2)).
double peak_rss_mib()
{
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_maxrss) / 1024.0;
}

/// Each iteration runs in a forked child of its own, as `zerosim run` runs one scenario per process and `zerosim
/// sweep` one point per worker: SimGrid allows one engine per process, and the heap that earlier engines leave
/// behind slowed later ones in one long process (DDP at 512 nodes took 0.97 s after the other benchmarks, 0.30 s
/// alone). The child returns its outcome and its peak resident set (its own work on top of the benchmark
/// process's pages, which it shares) over core::run_pool's pipe. Wall-clock time: the parent waits.
void run_benchmark(benchmark::State& state, const std::string& path, const std::vector<std::string>& sets)
{
  RunOutcome last;
  double peak_mib = 0;
  for (auto _ : state) {
    core::WorkOutcome outcome;
    core::run_pool(
        core::count_to(1),
        [&](std::size_t) {
          const RunOutcome r = run_end_to_end(path, sets);
          std::ostringstream payload;
          payload.precision(17);
          payload << r.step_time_s << ' ' << r.flows << ' ' << r.simulated_micro_steps << ' ' << r.json_bytes << ' '
                  << peak_rss_mib();
          return payload.str();
        },
        [&](std::size_t, const core::WorkOutcome& o) { outcome = o; }, core::PoolOptions{1, 600, {}});
    if (outcome.status != core::WorkStatus::DONE) {
      // A scenario that fails to load or simulate is reported as this benchmark's error, not a crash.
      state.SkipWithError(outcome.message.c_str());
      break;
    }
    std::istringstream in(outcome.payload);
    double rss = 0;
    in >> last.step_time_s >> last.flows >> last.simulated_micro_steps >> last.json_bytes >> rss;
    peak_mib = std::max(peak_mib, rss);
  }
  state.counters["step_time_s"] = last.step_time_s;
  state.counters["flows"] = static_cast<double>(last.flows);
  state.counters["micro_steps_simulated"] = last.simulated_micro_steps;
  state.counters["peak_rss_MiB"] = peak_mib;
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

/// Issue 28's cases (bench/scenarios/llama2-70b-CASE.yaml: Llama-2-70B on DGX A100 80GB nodes, bf16, seq 4096,
/// micro-batch 1, full checkpointing, grad_accum 4) at range(0) nodes. Targets: at 512 nodes (4,096 GPUs) at most
/// 0.5 s and 300 MB peak; at 16,384 nodes (131,072 GPUs) at most 1 s; 16,384 nodes at most 2 x 8 nodes.
void BM_at_scale(benchmark::State& state, const std::string& name)
{
  run_benchmark(state, source_path("bench/scenarios/llama2-70b-" + name + ".yaml"),
                {"cluster.nodes=" + std::to_string(state.range(0))});
}

/// The default scenario with training.grad_accum = range(0) (the global batch follows). Target: 1024 under 3x
/// the wall time of 1.
void BM_grad_accum(benchmark::State& state)
{
  run_benchmark(state, source_path("scenarios/llama2-70b-8xa100-200gbps.yaml"),
                {"training.grad_accum=" + std::to_string(state.range(0))});
}

/// The shipped offload scenarios: ZeRO-Infinity 1T on one DGX-2 (16 ranks, every NVMe swap and parameter
/// read) and BLOOM-176B ZeRO-Inference from NVMe (prefill and sampled decode passes). No target of their own:
/// they watch the NVMe path (SimGrid disks made the first replay 180 s, docs/engine.md "NVMe").
void BM_offload_scenario(benchmark::State& state, const char* file)
{
  run_benchmark(state, source_path(std::string("scenarios/") + file), {});
}

/// A pipeline scenario (issue 32's speed targets: BLOOM-176B as trained, 384 GPUs, shipped, at most 2 s and 500 MB;
/// GPT-3 175B at TP 8 x PP 16 x DP 32 on 512 DGX A100 nodes, bench/scenarios/, at most 5 s).
void BM_pipeline_scenario(benchmark::State& state, const char* path)
{
  run_benchmark(state, source_path(path), {});
}

/// A 1,000-point sweep of the default scenario (docs/sweep.md): micro-batch 1..16 (5) x grad_accum 1..25 (25) x ZeRO
/// stage 0..3 (4) x optimizer offload cpu / none (2), two workers (`zerosim sweep -j 2`), into a scratch folder
/// (files and plots included). Target: at most 120 s, or at most 1.15 x (1,000 x the mean single-run time / 2),
/// whichever is larger; the mean single-run time is measured here first, in this process, on every 50th point of
/// the same grid (20 points, a refused one timed as it is refused). Counters: the sweep's seconds, the mean
/// single-run seconds, the bound and sweep / bound.
void BM_sweep_1000(benchmark::State& state)
{
  const std::string scenario = source_path("scenarios/llama2-70b-8xa100-200gbps.yaml");
  const sweep::Plan plan = sweep::make_plan(scenario, {}, "",
                                            {"training.micro_batch=1..16:x2", "training.grad_accum=1..25",
                                             "deepspeed.zero_optimization.stage=0..3",
                                             "deepspeed.zero_optimization.offload_optimizer.device=cpu,none"},
                                            sweep::Shard{});
  const sweep::Grid grid = plan.grid();
  // Each single run in a forked child, as the sweep runs its points, so that this process stays as small as the
  // sweep's parent would be (a parent that had run 20 simulations itself made every worker's fork and first writes
  // dearer: 95 s against 62 s for the same sweep from the command line).
  double single_total = 0;
  int single_count = 0;
  for (std::uint64_t p = 0; p < grid.size(); p += 50) {
    const auto t0 = std::chrono::steady_clock::now();
    // A refused point (stage 0 with an offloaded optimizer) costs what its refusal costs: its outcome is not read.
    core::run_pool(
        core::count_to(1), [&](std::size_t) { return std::to_string(run_end_to_end(scenario, grid.sets(p)).flows); },
        [](std::size_t, const core::WorkOutcome&) {}, core::PoolOptions{1, 600, {}});
    single_total += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    ++single_count;
  }
  const double mean_single_s = single_total / single_count;
  const std::filesystem::path dir = std::filesystem::temp_directory_path() / "zerosim-bench-sweep-1000";
  double sweep_s = 0;
  for (auto _ : state) {
    std::filesystem::remove_all(dir);
    sweep::SweepOptions o;
    o.out_dir = dir.string();
    o.jobs = 2;
    std::ostringstream out, err;
    const auto t0 = std::chrono::steady_clock::now();
    sweep::run_sweep(plan, o, out, err);
    sweep_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  }
  std::filesystem::remove_all(dir);
  const double bound = std::max(120.0, 1.15 * (static_cast<double>(grid.size()) * mean_single_s / 2.0));
  state.counters["points"] = static_cast<double>(grid.size());
  state.counters["sweep_s"] = sweep_s;
  state.counters["mean_single_run_s"] = mean_single_s;
  state.counters["bound_s"] = bound;
  state.counters["sweep_over_bound"] = sweep_s / bound;
}

// Each iteration is a whole simulation: 3 are plenty for a figure in milliseconds to seconds.
constexpr int ITERATIONS = 3;

BENCHMARK(BM_default_scenario)->Unit(benchmark::kMillisecond)->Iterations(ITERATIONS)->UseRealTime();
BENCHMARK(BM_70b_zero3)
    ->Arg(64)
    ->Arg(512)
    ->Arg(4096)
    ->Unit(benchmark::kMillisecond)
    ->Iterations(ITERATIONS)
    ->UseRealTime();
#define ZEROSIM_AT_SCALE(tag, file)                                                                                    \
  BENCHMARK_CAPTURE(BM_at_scale, tag, file)                                                                            \
      ->Arg(8)                                                                                                         \
      ->Arg(512)                                                                                                       \
      ->Arg(16384)                                                                                                     \
      ->Unit(benchmark::kMillisecond)                                                                                  \
      ->Iterations(ITERATIONS)                                                                                         \
      ->UseRealTime()
ZEROSIM_AT_SCALE(zero0, "zero0");
ZEROSIM_AT_SCALE(zero1, "zero1");
ZEROSIM_AT_SCALE(zero2, "zero2");
ZEROSIM_AT_SCALE(zero3, "zero3");
ZEROSIM_AT_SCALE(zero2_offload, "zero2-offload");
ZEROSIM_AT_SCALE(zero1_tp8, "zero1-tp8");
ZEROSIM_AT_SCALE(ddp, "ddp");
ZEROSIM_AT_SCALE(fsdp_full_shard, "fsdp-full-shard");
ZEROSIM_AT_SCALE(fsdp_hybrid_shard, "fsdp-hybrid-shard");
#undef ZEROSIM_AT_SCALE
BENCHMARK(BM_grad_accum)->Arg(1)->Arg(1024)->Unit(benchmark::kMillisecond)->Iterations(ITERATIONS)->UseRealTime();
BENCHMARK_CAPTURE(BM_offload_scenario, zero_infinity_1t, "zero-infinity-1t-dgx2-nvme.yaml")
    ->Unit(benchmark::kMillisecond)
    ->Iterations(ITERATIONS)
    ->UseRealTime();
BENCHMARK_CAPTURE(BM_offload_scenario, bloom_176b_inference, "bloom-176b-inference-1xa100-nvme.yaml")
    ->Unit(benchmark::kMillisecond)
    ->Iterations(ITERATIONS)
    ->UseRealTime();
BENCHMARK_CAPTURE(BM_pipeline_scenario, bloom_176b_3d, "scenarios/bloom-176b-3d-384xa100.yaml")
    ->Unit(benchmark::kMillisecond)
    ->Iterations(ITERATIONS)
    ->UseRealTime();
BENCHMARK_CAPTURE(BM_pipeline_scenario, gpt3_175b_3d_4096, "bench/scenarios/gpt3-175b-3d-4096xa100.yaml")
    ->Unit(benchmark::kMillisecond)
    ->Iterations(ITERATIONS)
    ->UseRealTime();
// The sweep is 1,000 simulations in worker processes: one iteration, wall-clock time (the parent waits).
BENCHMARK(BM_sweep_1000)->Unit(benchmark::kSecond)->Iterations(1)->UseRealTime();

} // namespace

} // namespace zerosim::bench

// BENCHMARK_MAIN() with the heap on huge pages first, as the zerosim binary runs (core/huge_pages.hpp).
int main(int argc, char** argv)
{
  zerosim::core::rerun_with_huge_page_heap(argv);
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv))
    return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
