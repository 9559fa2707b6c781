// metrics/: the figures of a replayed step on hand-built timelines, each expected value worked out beside it
// from the formulas of docs/scenario-format.md "Results" (docs/outputs.md).
#include "metrics/run_metrics.hpp"
#include "run/run_scenario.hpp"

#include "core/error.hpp"
#include "fixtures/scenarios.hpp"
#include "fixtures/timelines.hpp"
#include "schedule/step_graph.hpp"

#include <doctest/doctest.h>

#include <array>
#include <cstdint>
#include <numeric>

using namespace zerosim;
using spec::MemCategory;
using spec::Phase;
using spec::Stream;
using spec::TaskKind;

namespace {

// The shared fixtures (tests/unit/fixtures/): two_gpus() is the hand-built run of 1 node x 2 GPUs, micro-batch 2 x
// seq 1024, grad_accum 4, global batch 16, bf16 peak 312 TFLOPS; rank_timeline(rank) the 2 s step of every task kind
// (its times and exposures are listed in fixtures/timelines.hpp); small_gpt(memory, stage, 2) the 2-block GPT with
// grad_accum 2 (global batch 32).
using test::add;
using test::buffer;
using test::flops_only;
using test::GiB;
using test::rank_timeline;
using test::sequential_timeline;
using test::small_gpt;
using test::span;
using test::two_gpus;

/// "t17" (built by appending: GCC 12 reports a false -Wrestrict on `numbered("t", i)`).
std::string numbered(const char* prefix, int i)
{
  std::string name(prefix);
  name += std::to_string(i);
  return name;
}

engine::Timeline two_rank_timeline()
{
  engine::Timeline t;
  t.ranks.push_back(rank_timeline(0));
  t.ranks.push_back(rank_timeline(1));
  t.step_time_s = 2.0;
  t.replay = "full";
  t.network_model = "test";
  return t;
}

} // namespace

TEST_SUITE("metrics")
{
  TEST_CASE("figures: step time, throughput, TFLOPs, MFU and HFU from their definitions")
  {
    const auto s = two_gpus();
    const auto m = metrics::compute_metrics(s, flops_only(1000), two_rank_timeline());
    CHECK(m.step_time_s == 2.0);
    CHECK(m.micro_steps == 4);
    // samples/s = global batch / step = 16 / 2 = 8; tokens/s = 16 x 1024 / 2 = 8192
    CHECK(m.samples_per_s == doctest::Approx(8.0));
    CHECK(m.tokens_per_s == doctest::Approx(8192.0));
    // TFLOPs per GPU = FLOPs per micro-batch x grad_accum / step / 1e12: model 1e12 x 4 / 2 / 1e12 = 2,
    // hardware 1.25e12 x 4 / 2 / 1e12 = 2.5
    CHECK(m.tflops_model == doctest::Approx(2.0));
    CHECK(m.tflops_hardware == doctest::Approx(2.5));
    // MFU and HFU against the dense bf16 peak, 312e12 FLOP/s: 2e12 / 312e12 and 2.5e12 / 312e12
    CHECK(m.peak_flops == 312e12);
    CHECK(m.mfu == doctest::Approx(2e12 / 312e12));
    CHECK(m.hfu == doctest::Approx(2.5e12 / 312e12));
    // no total_tokens, no price: nothing to report
    CHECK_FALSE(m.time_to_train_s.has_value());
    CHECK_FALSE(m.cost_per_step.has_value());
    CHECK_FALSE(m.cost_to_train.has_value());
  }

  TEST_CASE("figures: time to train and cost when total_tokens and price_per_gpu_hour are given")
  {
    auto s = two_gpus();
    s.training.total_tokens = 8192.0 * 3600; // one hour at 8192 tokens/s
    s.price_per_gpu_hour = 2.0;
    const auto m = metrics::compute_metrics(s, flops_only(1000), two_rank_timeline());
    // time to train = total_tokens / tokens_per_s = 8192 x 3600 / 8192 = 3600 s
    REQUIRE(m.time_to_train_s.has_value());
    CHECK(*m.time_to_train_s == doctest::Approx(3600.0));
    // cost per step = price x GPUs x step / 3600 = 2 x 2 x 2 / 3600; to train = 2 x 2 x 3600 / 3600 = 4
    REQUIRE(m.cost_per_step.has_value());
    CHECK(*m.cost_per_step == doctest::Approx(8.0 / 3600));
    REQUIRE(m.cost_to_train.has_value());
    CHECK(*m.cost_to_train == doctest::Approx(4.0));

    // a price without total_tokens: cost per step only
    s.training.total_tokens.reset();
    const auto m2 = metrics::compute_metrics(s, flops_only(1000), two_rank_timeline());
    CHECK(m2.cost_per_step.has_value());
    CHECK_FALSE(m2.cost_to_train.has_value());
  }

  TEST_CASE("breakdown: each task kind counts under its key, by priority, and the keys sum to the step")
  {
    const auto r = rank_timeline(0);
    const auto b = metrics::time_breakdown(r, 2.0);
    // worked out beside rank_timeline() (tests/unit/fixtures/timelines.hpp): compute [0, 1.2] = 1.2; exposed_comm 0.3;
    // exposed_pcie 0.1; optimizer 0.3; exposed_nvme 0.05; idle [1.95, 2.0] = 0.05 (the SYNC does no work)
    CHECK(b.compute == doctest::Approx(1.2));
    CHECK(b.exposed_comm == doctest::Approx(0.3));
    CHECK(b.exposed_pcie == doctest::Approx(0.1));
    CHECK(b.optimizer == doctest::Approx(0.3));
    CHECK(b.exposed_nvme == doctest::Approx(0.05));
    CHECK(b.idle == doctest::Approx(0.05));
    CHECK(b.sum() == 2.0); // exactly, in floating point
  }

  TEST_CASE("breakdown: the key of every task kind and phase")
  {
    spec::Task t;
    auto key = [&](TaskKind k, Phase p) {
      t.kind = k;
      t.phase = p;
      return metrics::breakdown_key(t);
    };
    CHECK(key(TaskKind::COMPUTE, Phase::FORWARD) == metrics::BreakdownKey::COMPUTE);
    CHECK(key(TaskKind::COMPUTE, Phase::BACKWARD) == metrics::BreakdownKey::COMPUTE);
    CHECK(key(TaskKind::COMPUTE, Phase::RECOMPUTE) == metrics::BreakdownKey::COMPUTE);
    CHECK(key(TaskKind::COMPUTE, Phase::GRAD_REDUCE) == metrics::BreakdownKey::COMPUTE); // a GPU kernel
    CHECK(key(TaskKind::COMPUTE, Phase::OPTIMIZER) == metrics::BreakdownKey::OPTIMIZER);
    CHECK(key(TaskKind::CPU_COMPUTE, Phase::OTHER) == metrics::BreakdownKey::OPTIMIZER);
    CHECK(key(TaskKind::COLLECTIVE, Phase::PARAM_GATHER) == metrics::BreakdownKey::EXPOSED_COMM);
    CHECK(key(TaskKind::COPY, Phase::OPTIMIZER) == metrics::BreakdownKey::EXPOSED_PCIE);
    CHECK(key(TaskKind::NVME_READ, Phase::OPTIMIZER) == metrics::BreakdownKey::EXPOSED_NVME);
    CHECK(key(TaskKind::NVME_WRITE, Phase::OPTIMIZER) == metrics::BreakdownKey::EXPOSED_NVME);
    CHECK_FALSE(key(TaskKind::SYNC, Phase::OTHER).has_value());
  }

  TEST_CASE("breakdown: overlapping intervals of one key count once, a higher key hides a lower one")
  {
    engine::RankTimeline r;
    // two compute kernels overlapping on [1, 2]: compute is the union [0, 3] = 3, not 2 + 2 = 4
    add(r, "k0", TaskKind::COMPUTE, Phase::FORWARD, Stream::COMPUTE, 0, 2);
    add(r, "k1", TaskKind::COMPUTE, Phase::BACKWARD, Stream::ALLGATHER, 1, 3);
    // a GPU optimizer step over a collective: [4, 6] optimizer; the collective [5, 7] is exposed on [6, 7] only
    add(r, "opt", TaskKind::COMPUTE, Phase::OPTIMIZER, Stream::COMPUTE, 4, 6);
    add(r, "rs", TaskKind::COLLECTIVE, Phase::GRAD_REDUCE, Stream::REDUCE_PARTITION, 5, 7);
    // a collective inside compute: hidden entirely
    add(r, "ag", TaskKind::COLLECTIVE, Phase::PARAM_GATHER, Stream::REDUCTION, 0.5, 2.5);
    const auto b = metrics::time_breakdown(r, 8);
    CHECK(b.compute == 3);
    CHECK(b.optimizer == 2);
    CHECK(b.exposed_comm == 1);
    // idle: [3, 4] and [7, 8]
    CHECK(b.idle == 2);
    CHECK(b.sum() == 8);
  }

  TEST_CASE("breakdown: matches a cell-by-cell count on many overlapping intervals, and sums exactly")
  {
    // 300 tasks of every kind on a grid of 1/64 s over a 10 s step (all binary fractions: the expected figures
    // are exact). A linear congruential generator (Numerical Recipes' constants) places them.
    constexpr int CELLS = 640;
    constexpr double CELL = 1.0 / 64;
    std::uint32_t state = 12345;
    auto next = [&](std::uint32_t n) {
      state = state * 1664525u + 1013904223u;
      return (state >> 8) % n;
    };
    const std::array<std::pair<TaskKind, Phase>, 7> kinds = {{{TaskKind::COMPUTE, Phase::FORWARD},
                                                              {TaskKind::COMPUTE, Phase::OPTIMIZER},
                                                              {TaskKind::CPU_COMPUTE, Phase::OPTIMIZER},
                                                              {TaskKind::COLLECTIVE, Phase::GRAD_REDUCE},
                                                              {TaskKind::COPY, Phase::OPTIMIZER},
                                                              {TaskKind::NVME_READ, Phase::OPTIMIZER},
                                                              {TaskKind::SYNC, Phase::OTHER}}};
    engine::RankTimeline r;
    std::array<std::array<bool, metrics::BREAKDOWN_KEY_COUNT>, CELLS> busy{};
    for (int i = 0; i < 300; ++i) {
      const auto [kind, phase] = kinds[next(7)];
      const int a = static_cast<int>(next(CELLS));
      const int len = static_cast<int>(next(12)); // 0 to 11 cells; 0 is an instant
      const int b = std::min(CELLS, a + len);
      add(r, numbered("t", i), kind, phase, Stream::COMPUTE, a * CELL, b * CELL);
      spec::Task probe;
      probe.kind = kind;
      probe.phase = phase;
      if (const auto k = metrics::breakdown_key(probe))
        for (int c = a; c < b; ++c)
          busy[static_cast<size_t>(c)][static_cast<size_t>(*k)] = true;
    }
    std::array<double, metrics::BREAKDOWN_KEY_COUNT> expected{};
    for (const auto& cell : busy) {
      int k = 0;
      while (k < metrics::BREAKDOWN_KEY_COUNT - 1 && !cell[static_cast<size_t>(k)])
        ++k; // the first busy key in priority order; idle (the last) when none
      expected[static_cast<size_t>(k)] += CELL;
    }
    const auto b = metrics::time_breakdown(r, CELLS * CELL);
    for (int k = 0; k < metrics::BREAKDOWN_KEY_COUNT; ++k) {
      CAPTURE(metrics::to_string(static_cast<metrics::BreakdownKey>(k)));
      CHECK(b.at(static_cast<metrics::BreakdownKey>(k)) == expected[static_cast<size_t>(k)]);
    }
    CHECK(b.sum() == CELLS * CELL);
  }

  TEST_CASE("breakdown: the sum is exactly the step time with awkward decimal times")
  {
    // times that are not binary fractions: the busy keys carry rounding, idle is their exact complement
    engine::RankTimeline r;
    double t = 0;
    for (int i = 0; i < 50; ++i) {
      add(r, numbered("c", i), TaskKind::COMPUTE, Phase::FORWARD, Stream::COMPUTE, t, t + 0.1);
      add(r, numbered("x", i), TaskKind::COLLECTIVE, Phase::GRAD_REDUCE, Stream::REDUCTION, t + 0.07, t + 0.13);
      t += 0.13;
    }
    const double step = t + 0.3;
    const auto b = metrics::time_breakdown(r, step);
    CHECK(b.sum() == step);
    // compute 50 x 0.1 = 5; exposed comm 50 x 0.03 = 1.5; idle 0.3
    CHECK(b.compute == doctest::Approx(5.0));
    CHECK(b.exposed_comm == doctest::Approx(1.5));
    CHECK(b.idle == doctest::Approx(0.3));

    // 500 random steps of decimal times (multiples of 1 ms and of 1/7 ms): the sum is exact every time
    std::uint32_t state = 777;
    auto next = [&](std::uint32_t n) {
      state = state * 1664525u + 1013904223u; // Numerical Recipes' LCG
      return (state >> 8) % n;
    };
    const std::array<std::pair<TaskKind, Phase>, 5> kinds = {{{TaskKind::COMPUTE, Phase::FORWARD},
                                                              {TaskKind::COMPUTE, Phase::OPTIMIZER},
                                                              {TaskKind::COLLECTIVE, Phase::GRAD_REDUCE},
                                                              {TaskKind::COPY, Phase::OPTIMIZER},
                                                              {TaskKind::NVME_WRITE, Phase::OPTIMIZER}}};
    int inexact = 0;
    for (int trial = 0; trial < 500; ++trial) {
      engine::RankTimeline x;
      double last = 0;
      for (int i = 0; i < 40; ++i) {
        const auto [kind, phase] = kinds[next(5)];
        const double a = next(5000) * 1e-3 + next(7) / 7e3;
        const double e = a + next(900) * 1e-3 + next(7) / 7e3;
        add(x, numbered("r", i), kind, phase, Stream::COMPUTE, a, e);
        last = std::max(last, e);
      }
      const double st = last * (1 + next(4)) + next(3) * 0.1; // idle from none to most of the step
      if (metrics::time_breakdown(x, st).sum() != st)
        ++inexact;
    }
    CHECK(inexact == 0);

    // everything busy: no idle at all, the sum is still exact
    engine::RankTimeline full;
    add(full, "c", TaskKind::COMPUTE, Phase::FORWARD, Stream::COMPUTE, 0, 0.1);
    add(full, "o", TaskKind::COMPUTE, Phase::OPTIMIZER, Stream::COMPUTE, 0.1, 0.3);
    const auto f = metrics::time_breakdown(full, 0.3);
    CHECK(f.sum() == 0.3);
    CHECK(f.idle == 0);
  }

  TEST_CASE("breakdown: a timeline that does not match its graph is an internal error")
  {
    auto r = rank_timeline(0);
    r.times.pop_back();
    CHECK_THROWS_AS(metrics::time_breakdown(r, 2.0), core::InternalError);
    auto bad = rank_timeline(0);
    bad.times[0] = span(1.0, 0.5); // ends before it starts
    CHECK_THROWS_AS(metrics::time_breakdown(bad, 2.0), core::InternalError);
    CHECK_THROWS_AS(metrics::time_breakdown(rank_timeline(0), 0.0), core::InternalError);
  }

  TEST_CASE("timed replay: a prefetch that starts before the previous buffer is released raises the peak")
  {
    // Stage-3-like: gathered params of layer 0 (400 B) are released when fwd.0 ends (1.0 s), but the prefetch of
    // layer 1 (400 B) is issued after fwd.0 and starts at 0.2 s on the all-gather stream.
    engine::RankTimeline r;
    const auto p = buffer(r.graph, "params", MemCategory::PARAMS, 1000);
    const auto g0 = buffer(r.graph, "gathered.0", MemCategory::PARAMS, 400);
    const auto g1 = buffer(r.graph, "gathered.1", MemCategory::PARAMS, 400);
    const auto a0 = buffer(r.graph, "act.0", MemCategory::ACTIVATIONS, 300);
    const auto a1 = buffer(r.graph, "act.1", MemCategory::ACTIVATIONS, 300);
    r.graph.resident = {p};
    add(r, "gather.0", TaskKind::COLLECTIVE, Phase::PARAM_GATHER, Stream::ALLGATHER, 0.0, 0.1, {g0});
    add(r, "fwd.0", TaskKind::COMPUTE, Phase::FORWARD, Stream::COMPUTE, 0.1, 1.0, {a0}, {g0});
    add(r, "gather.1", TaskKind::COLLECTIVE, Phase::PARAM_GATHER, Stream::ALLGATHER, 0.2, 0.3, {g1});
    add(r, "fwd.1", TaskKind::COMPUTE, Phase::FORWARD, Stream::COMPUTE, 1.0, 2.0, {a1}, {g1});
    auto s = two_gpus();
    // The old reserved rule (allocator mechanism off): its 512-B rounding floor is what the stated terms below check;
    // the caching allocator itself is tested in tests/unit/memory/allocator_test.cpp.
    s.mechanisms.allocator = false;

    // issue order: 1000, +400 = 1400, +300 = 1700, -400 (fwd.0 completes) = 1300, +400 = 1700, +300 = 2000 at fwd.1
    const auto issue = memory::replay_memory(s, r.graph);
    CHECK(issue.gpu == 2000);
    CHECK(issue.peak_task == "fwd.1");
    // at simulated times: 0.0 1400, 0.1 1700, 0.2 +400 = 2100 (gathered.0 is live until 1.0 s) at gather.1;
    // 1.0: -400 then +300 = 2000
    const auto timed = metrics::replay_memory_timed(s, r);
    CHECK(timed.gpu == 2100);
    CHECK(timed.peak_task == "gather.1");
    CHECK(timed.breakdown[static_cast<size_t>(MemCategory::PARAMS)] == 1800);
    CHECK(timed.breakdown[static_cast<size_t>(MemCategory::ACTIVATIONS)] == 300);
    CHECK(std::accumulate(timed.breakdown.begin(), timed.breakdown.end(), std::int64_t{0}) == timed.gpu);
    // the stated terms as in replay_memory: in 512 B allocator blocks params 1000 -> 1024 and each 300/400 B
    // buffer -> 512, so the live blocks peak at 1024 + 3 x 512 = 2560; reserved = max(2560, 2100 x 1.19 = 2499)
    // = 2560; device adds the 500 MiB context and NCCL (dp 2)
    CHECK(timed.gpu_rounded == 1024 + 3 * 512);
    CHECK(timed.gpu_reserved == 2560);
    CHECK(timed.gpu_device == 2560 + memory::CUDA_CONTEXT_BYTES + memory::nccl_buffer_bytes(2));

    // compute_metrics reports torch's count (host order: the issue-order figure, placed at the peak task's issue
    // time), the device-time figure beside it, and says that streams overlap
    engine::Timeline t;
    r.times[3].issue = 0.05; // the host issues fwd.1 at 0.05 s (it runs ahead of the GPU)
    t.ranks.push_back(r);
    t.step_time_s = 2.0;
    s.warnings = {"deepspeed.zero_optimization.zero_quantized_weights: not modelled"};
    const auto m = metrics::compute_metrics(s, flops_only(1000), t);
    CHECK(m.memory.gpu == 2000);
    CHECK(m.memory.peak_task == "fwd.1");
    CHECK(m.memory_device_time.gpu == 2100);
    CHECK(m.peak_time_s == 0.05);
    REQUIRE(m.warnings.size() == 2);
    CHECK(m.warnings[0] == s.warnings[0]); // the scenario's first
    CHECK(m.warnings[1].find("streams overlap") != std::string::npos);
  }

  TEST_CASE("timed replay: an allocation that starts after an earlier release has ended lowers the peak")
  {
    engine::RankTimeline r;
    const auto x = buffer(r.graph, "x", MemCategory::BUFFERS, 500);
    const auto y = buffer(r.graph, "y", MemCategory::BUFFERS, 500);
    add(r, "a", TaskKind::COMPUTE, Phase::FORWARD, Stream::COMPUTE, 0.0, 1.0, {x});
    add(r, "b", TaskKind::COPY, Phase::OTHER, Stream::REDUCTION, 2.0, 3.0, {y}, {y});
    add(r, "c", TaskKind::COMPUTE, Phase::FORWARD, Stream::COMPUTE, 1.0, 1.5, {}, {x});
    // issue order: a +500, b +500 = 1000 (x is released by c, issued after b), then b frees y, c frees x
    CHECK(memory::replay_memory(two_gpus(), r.graph).gpu == 1000);
    // at simulated times x is released at 1.5 s, y allocated at 2.0 s: never both, peak 500
    const auto timed = metrics::replay_memory_timed(two_gpus(), r);
    CHECK(timed.gpu == 500);
    CHECK(timed.peak_task == "a");
  }

  TEST_CASE("timed replay: at equal times releases come first, then allocations in issue order")
  {
    engine::RankTimeline r;
    const auto x = buffer(r.graph, "x", MemCategory::BUFFERS, 500);
    const auto y = buffer(r.graph, "y", MemCategory::BUFFERS, 700);
    const auto z = buffer(r.graph, "z", MemCategory::BUFFERS, 100);
    // c allocates y at 1.0 s, the instant b releases x: release first, so x and y never coexist
    add(r, "a", TaskKind::COMPUTE, Phase::FORWARD, Stream::COMPUTE, 0.0, 1.0, {x});
    add(r, "c", TaskKind::COMPUTE, Phase::FORWARD, Stream::COMPUTE, 1.0, 2.0, {y}, {y});
    add(r, "b", TaskKind::COPY, Phase::OTHER, Stream::REDUCTION, 0.5, 1.0, {}, {x});
    // d allocates z at 1.0 s too, after c in issue order: the peak 700 + 100 = 800 is named after d
    add(r, "d", TaskKind::COPY, Phase::OTHER, Stream::REDUCTION, 1.0, 1.2, {z}, {z});
    const auto timed = metrics::replay_memory_timed(two_gpus(), r);
    CHECK(timed.gpu == 800);
    CHECK(timed.peak_task == "d");
    // in issue order x and y do coexist: a 500, c +700 = 1200 (x is released by b, issued after c), then c
    // frees y, b frees x, d 100
    CHECK(memory::replay_memory(two_gpus(), r.graph).gpu == 1200);
  }

  TEST_CASE("timed replay: a buffer of a zero-length task is live at its own sample only")
  {
    engine::RankTimeline r;
    const auto x = buffer(r.graph, "x", MemCategory::BUFFERS, 500);
    const auto w = buffer(r.graph, "w", MemCategory::BUFFERS, 700);
    const auto v = buffer(r.graph, "v", MemCategory::BUFFERS, 50);
    add(r, "a", TaskKind::COMPUTE, Phase::FORWARD, Stream::COMPUTE, 0.0, 1.0, {x}, {x});
    add(r, "z", TaskKind::SYNC, Phase::OTHER, Stream::HOST, 0.5, 0.5, {w}, {w}); // allocates and frees at 0.5 s
    add(r, "u", TaskKind::COPY, Phase::OTHER, Stream::REDUCTION, 0.5, 0.8, {v}, {v});
    // at 0.5 s: z's sample sees 500 + 700 = 1200, then w goes; u's sample sees 500 + 50 = 550
    const auto timed = metrics::replay_memory_timed(two_gpus(), r);
    CHECK(timed.gpu == 1200);
    CHECK(timed.peak_task == "z");
    const auto events = metrics::timed_events(r);
    // resident sample, a: alloc + sample, z: alloc, sample, free, u: alloc + sample, u free (0.8), a free (1.0)
    CHECK(events.size() == 1 + 2 + 3 + 2 + 1 + 1);
  }

  TEST_CASE("timed replay: a release before its allocation in time is an internal error")
  {
    engine::RankTimeline r;
    const auto x = buffer(r.graph, "x", MemCategory::BUFFERS, 500);
    add(r, "a", TaskKind::COMPUTE, Phase::FORWARD, Stream::COMPUTE, 1.0, 2.0, {x});
    add(r, "b", TaskKind::COPY, Phase::OTHER, Stream::REDUCTION, 0.0, 0.5, {}, {x});
    CHECK_THROWS_AS(metrics::replay_memory_timed(two_gpus(), r), core::InternalError);
  }

  TEST_CASE("timed replay: tasks run one after another give exactly the issue-order replay (real schedules)")
  {
    // Task i on [i, i+1]: its allocations at i, its releases at i + 1, before task i+1's allocations: the
    // issue order, event for event. Checked on the schedule's real graphs for stages 0-3 and offloads.
    for (int stage = 0; stage <= 3; ++stage)
      for (const auto offload : {spec::OffloadDevice::NONE, spec::OffloadDevice::CPU}) {
        if (stage == 0 && offload != spec::OffloadDevice::NONE)
          continue; // DeepSpeed offloads with ZeRO 1-3 only
        auto s = small_gpt(80 * GiB, stage, 2);
        s.deepspeed.zero.offload_optimizer.device = offload;
        const auto w = workload::build_workload(s.model, workload::workload_options(s));
        const auto t = sequential_timeline(s, w);
        for (const auto& r : t.ranks) {
          CAPTURE(stage);
          CAPTURE(static_cast<int>(offload));
          CAPTURE(r.rank);
          const auto timed = metrics::replay_memory_timed(s, r);
          const auto issue = memory::replay_memory(s, r.graph);
          CHECK(timed.gpu == issue.gpu);
          CHECK(timed.peak_task == issue.peak_task);
          CHECK(timed.breakdown == issue.breakdown);
          CHECK(timed.gpu_rounded == issue.gpu_rounded);
          CHECK(timed.gpu_device == issue.gpu_device);
          CHECK(timed.cpu_per_node == issue.cpu_per_node);
          CHECK(timed.cpu_pinned_per_node == issue.cpu_pinned_per_node);
          CHECK(timed.nvme_per_node == issue.nvme_per_node);
          CHECK(timed.fits == issue.fits);
        }
        const auto m = metrics::compute_metrics(s, w, t);
        CHECK(m.memory.gpu == m.memory_device_time.gpu);
        CHECK(m.warnings.empty()); // same peak: nothing to say
      }
  }

  TEST_CASE("report rank: the largest timed GPU peak, the lowest rank on ties")
  {
    const auto s = two_gpus();
    auto t = two_rank_timeline();
    // equal ranks: rank 0
    CHECK(metrics::compute_metrics(s, flops_only(1000), t).rank == 0);
    // rank 1 gets a 64 B buffer more during its forward: it is reported, memory and breakdown alike
    auto& r1 = t.ranks[1];
    const auto extra = buffer(r1.graph, "extra", MemCategory::BUFFERS, 64);
    r1.graph.tasks[0].allocs.push_back(extra);
    r1.graph.tasks[1].frees.push_back(extra);
    r1.times[4] = span(1.6, 1.8); // and its CPU Adam ends 0.1 s earlier: optimizer 0.2, exposed NVMe [1.8, 1.95]
    const auto m = metrics::compute_metrics(s, flops_only(1000), t);
    CHECK(m.rank == 1);
    CHECK(m.memory.gpu == 1000 + 300 + 64);
    CHECK(m.breakdown.optimizer == doctest::Approx(0.2)); // rank 1's (rank 0's is 0.3)
    CHECK(m.breakdown.exposed_nvme == doctest::Approx(0.15));
    CHECK(m.breakdown.sum() == 2.0);
  }

  TEST_CASE("ladder: a step that does not fit at simulated times gets the ladder, judged in issue order")
  {
    // One byte less than what cannot be released (the rounded live blocks, the CUDA context and the NCCL
    // buffers): it does not fit, by 1 byte (as tests/unit/run/memory_analysis_test.cpp); the ladder is the one
    // `zerosim memory` climbs for the same scenario.
    // The old reserved rule (allocator mechanism off), whose floor is exact: this tests the ladder, not the allocator.
    auto with_rule = [](spec::Scenario x) {
      x.mechanisms.allocator = false;
      return x;
    };
    const auto roomy = run::analyze_memory(with_rule(small_gpt(80 * GiB, 0, 2)));
    const auto s = with_rule(small_gpt(roomy.gpu_rounded + roomy.cuda_context_bytes + roomy.nccl_bytes - 1, 0, 2));
    const auto w = workload::build_workload(s.model, workload::workload_options(s));
    const auto m = metrics::compute_metrics(s, w, sequential_timeline(s, w));
    CHECK_FALSE(m.memory.fits);
    CHECK(m.memory.shortfall_bytes == 1);
    const auto expected = run::analyze_memory_scenario(s).ladder;
    const auto ladder = run::ladder_if_unfit(s, m);
    REQUIRE(ladder.size() == expected.size());
    for (size_t i = 0; i < expected.size(); ++i) {
      CHECK(ladder[i].change == expected[i].change);
      CHECK(ladder[i].report.gpu_device == expected[i].report.gpu_device);
    }
    // and none when it fits
    const auto roomy_s = small_gpt(80 * GiB, 0, 2);
    CHECK(run::ladder_if_unfit(roomy_s, metrics::compute_metrics(roomy_s, w, sequential_timeline(roomy_s, w))).empty());
  }

  TEST_CASE("errors: an empty timeline or a step time that is not positive")
  {
    engine::Timeline empty;
    empty.step_time_s = 1;
    CHECK_THROWS_AS(metrics::compute_metrics(two_gpus(), flops_only(1000), empty), core::InternalError);
    auto t = two_rank_timeline();
    t.step_time_s = 0;
    CHECK_THROWS_AS(metrics::compute_metrics(two_gpus(), flops_only(1000), t), core::InternalError);
  }
}
