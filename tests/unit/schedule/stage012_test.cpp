// ZeRO stages 0, 1 and 2: collective volumes (docs/deepspeed-schedule.md §2-§4), streams (§3.2) and
// model-state memory (§10.1), read from the task graph.
#include "schedule_test_util.hpp"

#include <doctest/doctest.h>

using namespace zerosim;
using namespace zerosim::schedule;
using namespace zerosim::schedule::test;

TEST_SUITE("schedule")
{
  TEST_CASE("stage0: after the boundary backward, all-reduce buckets close once they exceed 5e8 elements")
  {
    // Ψ = 5 layers x 2e8 = 1e9 elements. Buckets (§2): 2e8+2e8+2e8 = 6e8 > 5e8 closes, remainder 4e8:
    // ⌈Ψ/5e8⌉ = 2 all-reduces, Σ = Ψ·b_c = 2e9 bytes, all in the last micro-step.
    const std::int64_t psi = 1'000'000'000;
    const auto w = synthetic(5, {{"mlp.fc.weight", 200'000'000}});
    const int g = 3;
    const TaskGraph gr = build_step_graph(scenario(0, 8, g), w);
    const Volume ar = collectives(gr, CollectiveKind::ALL_REDUCE);
    CHECK(ar.calls == 2);
    CHECK(ar.bytes == psi * 2);
    CHECK(collectives(gr, CollectiveKind::ALL_REDUCE, g - 1).calls == 2);
    CHECK(collectives(gr, CollectiveKind::ALL_GATHER).calls == 0);
    const int first_ar = find_task(gr, "mb2.allreduce.0");
    REQUIRE(first_ar >= 0);
    CHECK(gr.tasks[static_cast<std::size_t>(first_ar)].bytes == 600'000'000LL * 2);
    CHECK(gr.tasks[static_cast<std::size_t>(first_ar)].stream == Stream::COMPUTE);
    CHECK(first_ar > find_task(gr, "mb2.bwd.block.0")); // after the whole backward

    // Model states (§2, §10.1 row 0): resident lp 2Ψ + fp32 4Ψ + m,v 8Ψ = 14Ψ, plus the lp grads
    // (2Ψ) autograd holds from the first backward to the step: 16Ψ.
    CHECK(resident_bytes(gr, Device::GPU) == 14 * psi);
    CHECK(transient_peak(gr, MemCategory::GRADS) == 2 * psi);
    CHECK(resident_bytes(gr, Device::GPU) + transient_peak(gr, MemCategory::GRADS) == 16 * psi);
    // The step's fp32 flat grads, 4Ψ (§2 step 3), are the largest step temporary.
    CHECK(transient_peak(gr, MemCategory::BUFFERS) == 4 * psi);
  }

  TEST_CASE("stage0: fp32 training keeps no separate master copy")
  {
    // fp32 (§1.2): the plain torch optimizer steps the fp32 params: 4Ψ params + 8Ψ m,v resident,
    // 4Ψ fp32 grads: 16Ψ again, without the 4Ψ flat-grad temporary.
    const std::int64_t psi = 3000;
    const auto w = synthetic(3, {{"mlp.fc.weight", 1000}});
    spec::Scenario s = scenario(0, 2, 1);
    s.training.precision = spec::Precision::FP32;
    s.deepspeed.communication_data_type = spec::Dtype::FP32;
    s.deepspeed.grad_accum_dtype = spec::Dtype::FP32;
    const TaskGraph gr = build_step_graph(s, w);
    CHECK(resident_bytes(gr, Device::GPU) == 12 * psi);
    CHECK(transient_peak(gr, MemCategory::GRADS) == 4 * psi);
    CHECK(collectives(gr, CollectiveKind::ALL_REDUCE).bytes == 4 * psi); // Ψ·b_c with b_c = 4
  }

  TEST_CASE("stage1: ⌈Ψ/B_r⌉ all-reduces at the boundary only, after backward, then one all-gather")
  {
    // 4 layers x 3 tensors of 1001 elements: Ψ = 12012. B_r = 3003 packs 3 tensors per bucket:
    // ⌈Ψ/B_r⌉ = 4 ARs of 3003·b_c bytes (§3.3), only in micro-step g-1.
    const std::int64_t psi = 12012;
    const int n = 4, g = 3;
    const auto w = synthetic(4, {{"a.weight", 1001}, {"b.weight", 1001}, {"c.weight", 1001}});
    spec::Scenario s = scenario(1, n, g);
    s.deepspeed.zero.reduce_bucket_size = 3003;
    const TaskGraph gr = build_step_graph(s, w);
    const Volume ar = collectives(gr, CollectiveKind::ALL_REDUCE, g - 1, Phase::GRAD_REDUCE, false);
    CHECK(ar.calls == 4);
    CHECK(ar.bytes == psi * 2);
    CHECK(collectives(gr, CollectiveKind::ALL_REDUCE, 0).calls == 0);
    const int ar0 = find_task(gr, "mb2.allreduce.0");
    CHECK(ar0 > find_task(gr, "mb2.bwd.block.0")); // reduce_gradients() after backward (§3.3)
    CHECK(gr.tasks[static_cast<std::size_t>(ar0)].stream == Stream::COMPUTE);
    // Post-step AG of the flat buffer padded to 2N: Ψ_pad = ⌈12012/8⌉·8 = 12016 elements, b_lp = 2 (§3.5).
    const Volume ag = collectives(gr, CollectiveKind::ALL_GATHER);
    CHECK(ag.calls == 1);
    CHECK(ag.bytes == 12016 * 2);
    // Grad norm (4 B) and bf16 overflow flag (1 B) scalars at the step (§3.5 steps 1-2).
    CHECK(collectives(gr, CollectiveKind::ALL_REDUCE, -1).bytes == 4 + 1);
    // Model states (§10.1 row 1): lp 2Ψ_pad + fp32 4P + m,v 8P, P = Ψ_pad/N = 3004; full lp grads 2Ψ.
    const std::int64_t p = 12016 / n;
    CHECK(resident_bytes(gr, Device::GPU) == 2 * 12016 + 4 * p + 8 * p);
    CHECK(transient_peak(gr, MemCategory::GRADS) >= 2 * psi);
  }

  TEST_CASE("stage1: overlap_comm reduces in the boundary backward on the reduction stream")
  {
    const auto w = synthetic(4, {{"a.weight", 1001}, {"b.weight", 1001}, {"c.weight", 1001}});
    spec::Scenario s = scenario(1, 4, 2);
    s.deepspeed.zero.reduce_bucket_size = 3003;
    s.deepspeed.zero.overlap_comm = true;
    const TaskGraph gr = build_step_graph(s, w);
    CHECK(collectives(gr, CollectiveKind::ALL_REDUCE, 1, Phase::GRAD_REDUCE, false).calls == 4);
    const int ar0 = find_task(gr, "mb1.allreduce.0");
    REQUIRE(ar0 >= 0);
    CHECK(gr.tasks[static_cast<std::size_t>(ar0)].stream == Stream::REDUCTION);
    CHECK(ar0 < find_task(gr, "mb1.bwd.block.0"));         // issued during backward
    CHECK(find_task(gr, "mb1.epilogue.synchronize") >= 0); // device-wide sync (§3.2 epilogue)
  }

  TEST_CASE("stage2: g x ⌈Ψ/B_r⌉ all-reduces summing to g·Ψ·b_c, and one all-gather of Ψ·b_lp")
  {
    const std::int64_t psi = 12012;
    const int n = 4, g = 3;
    const auto w = synthetic(4, {{"a.weight", 1001}, {"b.weight", 1001}, {"c.weight", 1001}});
    spec::Scenario s = scenario(2, n, g);
    s.deepspeed.zero.reduce_bucket_size = 3003;
    const TaskGraph gr = build_step_graph(s, w);
    const Volume ar = collectives(gr, CollectiveKind::ALL_REDUCE, -2, Phase::GRAD_REDUCE, false);
    CHECK(ar.calls == g * 4);
    CHECK(ar.bytes == g * psi * 2);
    for (int mb = 0; mb < g; ++mb)
      CHECK(collectives(gr, CollectiveKind::ALL_REDUCE, mb).calls == 4);
    CHECK(collectives(gr, CollectiveKind::ALL_GATHER).bytes == 12016 * 2);
    // Default (no overlap_comm): on the compute stream, fired by the hooks during backward (§3.4).
    const int ar0 = find_task(gr, "mb0.allreduce.0");
    CHECK(gr.tasks[static_cast<std::size_t>(ar0)].stream == Stream::COMPUTE);
    CHECK(ar0 < find_task(gr, "mb0.bwd.block.0"));
    // Model states (§10.1 row 2): 2Ψ_pad + 4P + 8P resident; the IPG bucket B_r·b_lp per backward.
    const std::int64_t p = 12016 / n;
    CHECK(resident_bytes(gr, Device::GPU) == 2 * 12016 + 12 * p);
    CHECK(transient_peak(gr, MemCategory::BUFFERS) >= 3003 * 2);
  }

  TEST_CASE("stage2: a tensor larger than B_r is reduced alone")
  {
    // Per layer: 500 + 5000 + 500 elements, B_r = 2000: the 5000-element tensor forms its own bucket.
    // Backward order per layer: c(500), big(5000), a(500) -> buckets [c], [big], [a + next layer's c], ...
    const auto w = synthetic(2, {{"a.weight", 500}, {"big.weight", 5000}, {"c.weight", 500}});
    spec::Scenario s = scenario(2, 2, 1);
    s.deepspeed.zero.reduce_bucket_size = 2000;
    const TaskGraph gr = build_step_graph(s, w);
    int alone = 0;
    for (const Task& t : gr.tasks)
      if (t.kind == TaskKind::COLLECTIVE && t.phase == Phase::GRAD_REDUCE)
        alone += t.bytes == 5000 * 2;
    CHECK(alone == 2);                                                        // one per layer
    CHECK(collectives(gr, CollectiveKind::ALL_REDUCE, 0).bytes == 12000 * 2); // Σ = Ψ·b_c
  }

  TEST_CASE("stage2: overlap_comm moves the reductions to the reduction stream, compute waits one bucket behind")
  {
    const auto w = synthetic(4, {{"a.weight", 1001}, {"b.weight", 1001}, {"c.weight", 1001}});
    spec::Scenario s = scenario(2, 4, 2);
    s.deepspeed.zero.reduce_bucket_size = 3003;
    s.deepspeed.zero.overlap_comm = true;
    const TaskGraph gr = build_step_graph(s, w);
    int on_reduction = 0;
    for (const Task& t : gr.tasks)
      if (t.kind == TaskKind::COLLECTIVE && t.phase == Phase::GRAD_REDUCE)
        on_reduction += t.stream == Stream::REDUCTION;
    CHECK(on_reduction == 2 * 4);
    // Bucket k+1's launch makes the compute stream wait for bucket k (§3.2): the backward issued
    // after mb0.allreduce.1 depends on mb0.allreduce.0.
    const int ar0 = find_task(gr, "mb0.allreduce.0");
    const int ar1 = find_task(gr, "mb0.allreduce.1");
    REQUIRE(ar1 > ar0);
    bool waits = false;
    for (std::size_t i = static_cast<std::size_t>(ar1) + 1; i < gr.tasks.size(); ++i)
      if (gr.tasks[i].stream == Stream::COMPUTE) {
        for (TaskId d : gr.tasks[i].deps)
          waits |= d == ar0;
        break;
      }
    CHECK(waits);
    // Double IPG buffer with overlap_comm: 2 x B_r x b_lp live in backward (§3.2).
    CHECK(transient_peak(gr, MemCategory::BUFFERS) >= 2 * 3003 * 2);
  }
}
