// Predictions no GPU reaches are wrong whatever the data say: bounds every shipped scenario must keep.
#include "compute/compute_model.hpp"
#include "config/scenario_loader.hpp"
#include "engine/engine.hpp"
#include "metrics/run_metrics.hpp"
#include "run/run_scenario.hpp"
#include "workload/transformer.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <filesystem>

namespace fs = std::filesystem;
using namespace zerosim;

namespace {

metrics::RunMetrics predict(const spec::Scenario& s)
{
  const workload::Workload w = workload::build_workload(s.model, workload::workload_options(s));
  return metrics::compute_metrics(s, w, run::simulate_step(s, w));
}

} // namespace

TEST_SUITE("cli")
{
  TEST_CASE("bounds: no shipped scenario runs its hardware FLOPs above its GPU's sustained GEMM rate")
  {
    // HFU = hardware FLOPs per second / dense peak. Every FLOP of a step runs in a GEMM or attention kernel whose
    // achieved fraction of the peak is at most the kind's large-GEMM cap (calibration/kernels.yaml, gemm), the
    // best any kernel of the step reaches; the rest of the step only adds time.
    for (const auto& e : fs::directory_iterator(fs::path(ZEROSIM_SOURCE_DIR) / "scenarios")) {
      if (e.path().extension() != ".yaml")
        continue;
      CAPTURE(e.path().string());
      const spec::Scenario s = config::load_scenario(e.path().string());
      if (s.training.mode == spec::Mode::INFERENCE)
        continue;
      const metrics::RunMetrics m = predict(s);
      const compute::GpuEfficiency eff = compute::gpu_efficiency(s.cluster.node.gpu, s.software, s.kernels);
      CHECK(m.hfu > 0);
      CHECK(m.hfu <= eff.gemm_max);
    }
  }

  TEST_CASE("bounds: the default scenario at micro-batch 2 stays below 70 % HFU")
  {
    // The bound: the best published A100 training runs of this size sit near 0.5-0.6 HFU (e.g. Megatron-LM
    // on 1024 A100s, 52 % of peak for GPT-3 175B: Narayanan et al. 2021, Table 1, 163 of 312 TFLOPs per GPU).
    config::LoadOptions o;
    o.sets = {"training.micro_batch=2"};
    const spec::Scenario s =
        config::load_scenario(std::string(ZEROSIM_SOURCE_DIR) + "/scenarios/llama2-70b-8xa100-200gbps.yaml", o);
    const metrics::RunMetrics m = predict(s);
    CAPTURE(m.hfu);
    CHECK(m.hfu <= 0.70);
  }
}
