// analyze_memory, the ladder and `zerosim memory`'s facade (analyze_memory_scenario) over the real workload and
// schedule of a small GPT on one node.
#include "run/memory_analysis.hpp"

#include "fixtures/scenarios.hpp"
#include "schedule/step_graph.hpp"
#include "workload/transformer.hpp"

#include <doctest/doctest.h>

#include <numeric>

using namespace zerosim;

namespace {

using test::GiB;

/// test::small_gpt(gpu_memory): a 2-block GPT on 1 node x 2 GPUs, bf16 AdamW, sequence 256, micro-batch 8,
/// grad_accum 1, DeepSpeed stage 0.
using test::small_gpt;

} // namespace

TEST_SUITE("run")
{
  TEST_CASE("analyze: the replay of the schedule's step graph holds at least the stage-0 model states")
  {
    const auto s = small_gpt(80 * GiB);
    const auto r = run::analyze_memory(s);
    const auto w = workload::build_workload(s.model, workload::workload_options(s));
    const auto direct = memory::replay_memory(s, schedule::build_step_graph(s, w, 0));
    CHECK(r.gpu == direct.gpu);
    CHECK(r.peak_task == direct.peak_task);
    CHECK(r.cpu_per_node == direct.cpu_per_node);
    CHECK(std::accumulate(r.breakdown.begin(), r.breakdown.end(), std::int64_t{0}) == r.gpu);
    // stage 0 keeps 2 (bf16 params) + 2 (bf16 grads) + 4 (fp32 master) + 8 (Adam m, v) = 16 bytes per
    // parameter on every GPU (docs/deepspeed-schedule.md §10.1, mode 0); the peak holds at least that.
    CHECK(r.gpu >= 16 * w.params);
    CHECK(r.fits); // a few hundred MB against 80 GiB
  }

  TEST_CASE("ladder: the facade climbs when the scenario does not fit and stops at the first rung that fits")
  {
    // The old reserved rule (allocator mechanism off), whose floor is exact: this tests the ladder, not the allocator.
    auto with_rule = [](spec::Scenario s) {
      s.mechanisms.allocator = false;
      return s;
    };
    const auto roomy = run::analyze_memory(with_rule(small_gpt(80 * GiB)));
    // one byte less than what cannot be released (the rounded live blocks, the CUDA context and the NCCL
    // buffers; the cache above that is given back before an out-of-memory): it does not fit, by 1 byte
    const auto s = with_rule(small_gpt(roomy.gpu_rounded + roomy.cuda_context_bytes + roomy.nccl_bytes - 1));
    const auto [base, steps] = run::analyze_memory_scenario(s);
    CHECK_FALSE(base.fits);
    CHECK(base.shortfall_bytes == 1);
    REQUIRE_FALSE(steps.empty());
    for (size_t i = 0; i < steps.size(); ++i) {
      CAPTURE(steps[i].change);
      CHECK(steps[i].report.gpu_device == run::analyze_memory(steps[i].scenario).gpu_device);
      CHECK(steps[i].report.fits == (i + 1 == steps.size()));
    }
    // rung 1 (micro-batch 8 -> 1) keeps an eighth of the activations: it fits
    CHECK(steps.front().scenario.training.micro_batch == 1);

    CHECK(run::analyze_memory_scenario(small_gpt(80 * GiB)).ladder.empty()); // fits as given: nothing to climb
  }

  TEST_CASE("ladder: when no rung fits every rung is tried and the last does not fit")
  {
    // 256 MiB of GPU memory: less than the stated CUDA context (500 MiB) alone, so nothing can fit
    const auto s = small_gpt(GiB / 4);
    const auto steps = run::climb_ladder(s);
    CHECK(steps.size() == run::ladder_scenarios(s).size()); // all 7 rungs
    REQUIRE_FALSE(steps.empty());
    CHECK_FALSE(steps.back().report.fits);
    CHECK(steps.back().scenario.deepspeed.zero.offload_param.device == spec::OffloadDevice::NVME);
  }
}
