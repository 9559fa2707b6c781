// ZeRO stage 3: fetch, reuse distance, prefetch and reduce-scatter volumes (docs/deepspeed-schedule.md §5) and
// model-state memory (§10.1), read from the task graph.
#include "schedule_test_util.hpp"

#include <doctest/doctest.h>

#include <array>

using namespace zerosim;
using namespace zerosim::schedule;
using namespace zerosim::schedule::test;

namespace {

// 8 layers, each one "mlp" module holding a 4000-element weight and a 10-element bias (persistent
// under a threshold of 100). N = 4: partitions ⌈4000/4⌉ = 1000 and ⌈10/4⌉ = 3. One module per layer
// keeps the trace simple: forward positions 0..7, backward position of layer i = 15 - i.
constexpr int LAYERS = 8, N = 4;
constexpr std::int64_t L_MLP = 4000, L_LN = 10;
constexpr std::int64_t PART = LAYERS * (1000 + 3);    // P = Σ⌈n/N⌉ = 8024
constexpr std::int64_t PSI = LAYERS * (L_MLP + L_LN); // Ψ = 32080

workload::Workload model()
{
  return synthetic(LAYERS, {{"mlp.weight", L_MLP}, {"mlp.bias", L_LN}});
}

spec::Scenario base(int g)
{
  spec::Scenario s = scenario(3, N, g);
  s.deepspeed.zero.stage3_param_persistence_threshold = 100;
  s.deepspeed.zero.stage3_prefetch_bucket_size = 1;   // prefetch one param ahead
  s.deepspeed.zero.stage3_max_reuse_distance = 20000; // < 3 layers of trace (see below)
  s.deepspeed.zero.reduce_bucket_size = 2 * (L_MLP + L_LN);
  return s;
}

} // namespace

TEST_SUITE("schedule")
{
  TEST_CASE("stage3: forward gathers Ψ - Ψ_persist per micro-step, the first step's micro-step 0 gathers everything "
            "again in backward")
  {
    const int g = 3;
    const TaskGraph gr = build_step_graph(base(g), model(), 0, StepOptions{.first_step = true});
    // AG bytes of a fetch = N·Σ⌈n/N⌉·b_lp (§5.3); the non-persistent params are the 8 mlp weights:
    // AG_fwd = 4·8·1000·2 = 64000 bytes = (Ψ - Ψ_persist)·b_lp since N divides 4000.
    const std::int64_t ag_fwd = N * LAYERS * 1000 * 2;
    CHECK(ag_fwd == (PSI - LAYERS * L_LN) * 2);
    // The run's first micro-step records the trace: no prefetch, one blocking call per module before its
    // forward and again before its backward, everything released after use (§5.2, §5.4): AG_fwd + AG_bwd = 2·AG_fwd.
    const Volume mb0 = collectives(gr, CollectiveKind::ALL_GATHER, 0);
    CHECK(mb0.bytes == 2 * ag_fwd);
    CHECK(mb0.calls == 2 * LAYERS);
    const int last_fwd = find_task(gr, "mb0.fwd.block.7");
    int fwd_calls = 0;
    for (int i = 0; i < last_fwd; ++i)
      fwd_calls += gr.tasks[static_cast<std::size_t>(i)].kind == TaskKind::COLLECTIVE;
    CHECK(fwd_calls == LAYERS);
  }

  TEST_CASE("stage3: a released parameter's gathered storage is freed with record_stream onto the compute stream")
  {
    // partition_parameters.free_param: param.data.record_stream(current_stream()) before param.data is dropped. The
    // gathered tensor was allocated on the all-gather stream: every gathered buffer the step frees is a
    // record_stream free (its block returns to the all-gather stream's pool once the compute stream has passed).
    const TaskGraph gr = build_step_graph(base(2), model());
    int gathered = 0, recorded = 0;
    for (const Task& t : gr.tasks)
      for (BufferId b : t.frees) {
        const Buffer& buf = gr.buffers[static_cast<std::size_t>(b)];
        if (buf.name.find(".gathered.") == std::string::npos)
          continue;
        ++gathered;
        recorded += buf.record_stream ? 1 : 0;
        CHECK(t.stream == Stream::COMPUTE); // released by the module's hook, after its compute
      }
    CHECK(gathered > 0);
    CHECK(recorded == gathered);
  }

  TEST_CASE("stage3: the host synchronises on the oldest fetch event beyond __max_ongoing_fetch_events = 2")
  {
    // §5.3 step 2: every wait on an in-flight param pushes one event; before a wait, with more than 2 events
    // outstanding the host synchronises on the oldest (a SYNC task, a host wait). The deque persists over the
    // step, so W waits give max(0, W - 3) synchronisations; W = the number of gathered param buffers.
    for (bool first : {true, false}) {
      CAPTURE(first);
      const TaskGraph gr = build_step_graph(base(3), model(), 0, StepOptions{.first_step = first});
      int waits = 0;
      for (const auto& buf : gr.buffers)
        waits += buf.name.find(".gathered.") != std::string::npos;
      int syncs = 0;
      for (const auto& t : gr.tasks)
        if (t.name.find("fetch_backpressure") != std::string::npos) {
          ++syncs;
          CHECK(t.kind == TaskKind::SYNC);
          CHECK(!t.deps.empty());
        }
      CHECK(waits > 3);
      CHECK(syncs == waits - 3);
    }
  }

  TEST_CASE("stage3: in a steady-state step every micro-step keeps the modules within max_reuse_distance")
  {
    const int g = 2;
    const TaskGraph gr = build_step_graph(base(g), model());
    // §5.4: layer i (forward position i) reaches its backward use at position 15-i past
    // 2·(7-i)·4010 elements of trace; kept iff that is < 20000: i = 5, 6, 7, i.e.
    // ⌈D/(2·4010)⌉ = 3 layers resident. AG_bwd = Ψ - resident - Ψ_persist = 5 mlp weights.
    // Per micro-step: AG_fwd + AG_bwd = (8 + 8 - 3) mlp weights of N·1000·2 bytes. (The split between
    // the two is blurred by the prefetch, which gathers backward params near the turn.) The trace stays
    // COMPLETE across step() (§5.2), so micro-step 0 of a steady-state step is like micro-step 1.
    const int kept = 3;
    CHECK(collectives(gr, CollectiveKind::ALL_GATHER, 0).bytes == N * (2 * LAYERS - kept) * 1000 * 2);
    CHECK(collectives(gr, CollectiveKind::ALL_GATHER, 1).bytes == N * (2 * LAYERS - kept) * 1000 * 2);
    // The reuse distance 0 keeps nothing but what the prefetcher has already popped for its backward
    // use: mlp_7, whose backward follows its forward directly.
    spec::Scenario s = base(g);
    s.deepspeed.zero.stage3_max_reuse_distance = 0;
    const TaskGraph g0 = build_step_graph(s, model());
    CHECK(collectives(g0, CollectiveKind::ALL_GATHER, 0).bytes == N * (2 * LAYERS - 1) * 1000 * 2);
    CHECK(collectives(g0, CollectiveKind::ALL_GATHER, 1).bytes == N * (2 * LAYERS - 1) * 1000 * 2);
    // ...and the run's first micro-step never reuses (RECORD mode): 16 weights whatever the distance,
    // while its micro-step 1 (COMPLETE) keeps the 3 layers.
    const TaskGraph gf = build_step_graph(base(g), model(), 0, StepOptions{.first_step = true});
    CHECK(collectives(gf, CollectiveKind::ALL_GATHER, 0).bytes == N * 2 * LAYERS * 1000 * 2);
    CHECK(collectives(gf, CollectiveKind::ALL_GATHER, 1).bytes == N * (2 * LAYERS - kept) * 1000 * 2);
  }

  TEST_CASE("stage3: reduce-scatter buckets of <= B_r carry Ψ (padded) per micro-step on the reduce stream")
  {
    const int g = 2;
    const TaskGraph gr = build_step_graph(base(g), model());
    // Backward hooks: bias(10), weight(4000) per layer; B_r = 8020 holds two layers: ⌈Ψ/B_r⌉ = 4 RS.
    // Bytes = N·Σ⌈n/N⌉·b_c = 4·8024·2 (the 10-element weights padded to 12).
    for (int mb = 0; mb < g; ++mb) {
      const Volume rs = collectives(gr, CollectiveKind::REDUCE_SCATTER, mb);
      CHECK(rs.calls == 4);
      CHECK(rs.bytes == N * PART * 2);
    }
    const int rs0 = find_task(gr, "mb0.reduce_scatter.0");
    CHECK(gr.tasks[static_cast<std::size_t>(rs0)].stream == Stream::REDUCE_PARTITION);
    // reduce_and_partition_stream.synchronize() at the end of every backward (§5.5).
    for (int mb = 0; mb < g; ++mb) {
      const int sy = find_task(gr, "mb" + std::to_string(mb) + ".reduce_and_partition_stream.synchronize");
      REQUIRE(sy >= 0);
      CHECK(gr.tasks[static_cast<std::size_t>(sy)].kind == TaskKind::SYNC);
    }
    // Step: one AG of the persistent params, N·8·3·2 bytes (§5.7 step 4), and the grad-norm AR
    // (4 bytes; no overflow flag for bf16, §5.7 step 2).
    CHECK(collectives(gr, CollectiveKind::ALL_GATHER, -1).bytes == N * LAYERS * 3 * 2);
    CHECK(collectives(gr, CollectiveKind::ALL_REDUCE, -1).bytes == 4);
    // Without overlap_comm, gathers and reduce-scatters go on the default stream.
    spec::Scenario s = base(g);
    s.deepspeed.zero.overlap_comm = false;
    const TaskGraph gs = build_step_graph(s, model());
    for (const Task& t : gs.tasks)
      if (t.kind == TaskKind::COLLECTIVE)
        CHECK(t.stream == Stream::COMPUTE);
  }

  TEST_CASE("stage3: the prefetch coalesces upcoming params up to stage3_prefetch_bucket_size (COMPLETE trace)")
  {
    spec::Scenario s = base(2);
    s.deepspeed.zero.stage3_prefetch_bucket_size = 3 * L_MLP; // 3 mlp weights per prefetch call
    const TaskGraph gr = build_step_graph(s, model());
    const TaskGraph gf = build_step_graph(s, model(), 0, StepOptions{.first_step = true});
    // Prefetch calls per micro-step [0], [1] and the largest one's bytes.
    auto prefetches = [](const TaskGraph& graph, std::array<int, 2>& calls, std::int64_t& largest) {
      for (const Task& t : graph.tasks)
        if (t.kind == TaskKind::COLLECTIVE && t.name.find("prefetch") != std::string::npos) {
          calls[t.micro_step == 0 ? 0 : 1]++;
          largest = std::max(largest, t.bytes);
        }
    };
    std::array<int, 2> steady{}, first{};
    std::int64_t largest = 0, largest_first = 0;
    prefetches(gr, steady, largest);
    prefetches(gf, first, largest_first);
    CHECK(first[0] == 0); // the run's first micro-step RECORDs the trace: no prefetch (§5.2)
    CHECK(first[1] > 0);
    // Steady state: the trace stays COMPLETE across step(), micro-step 0 prefetches like micro-step 1.
    CHECK(steady[0] == first[1]);
    CHECK(steady[1] == first[1]);
    CHECK(largest == 3 * N * 1000 * 2); // one coalesced call of 3 weights: N·3·1000·2 bytes
    CHECK(largest_first == 3 * N * 1000 * 2);
    // The forward of block 1 waits for the prefetch that gathered its weight: in both micro-steps of a
    // steady-state step, only in micro-step 1 of the first step.
    auto waits_on_prefetch = [](const TaskGraph& graph, const std::string& task) {
      bool on_prefetch = false;
      for (TaskId d : graph.tasks[static_cast<std::size_t>(find_task(graph, task))].deps)
        on_prefetch |= graph.tasks[static_cast<std::size_t>(d)].name.find("prefetch") != std::string::npos;
      return on_prefetch;
    };
    CHECK(waits_on_prefetch(gr, "mb0.fwd.block.1"));
    CHECK(waits_on_prefetch(gr, "mb1.fwd.block.1"));
    CHECK_FALSE(waits_on_prefetch(gf, "mb0.fwd.block.1"));
    CHECK(waits_on_prefetch(gf, "mb1.fwd.block.1"));
    // Gathers run on the all-gather stream (overlap_comm is True for stage 3 by default, §11).
    CHECK(gr.tasks[static_cast<std::size_t>(find_task(gr, "mb0.allgather.0.fetch"))].stream == Stream::ALLGATHER);
  }

  TEST_CASE("stage3: model states are 2P + 4P + 8P + b_ga·P + IPG bucket + persistent params")
  {
    const TaskGraph gr = build_step_graph(base(1), model());
    // §10.1 row 3: lp partition 2P, fp32 4P, m,v 8P, grad partition buffer b_ga·P (b_ga = 2),
    // IPG bucket B_r·2 (persistent), persistent params gathered: N·⌈10/N⌉ = 12 elements per layer.
    const std::int64_t expected =
        2 * PART + 4 * PART + 8 * PART + 2 * PART + 2 * (2 * (L_MLP + L_LN)) + 2 * LAYERS * 12;
    CHECK(resident_bytes(gr, Device::GPU) == expected);
    CHECK(resident_bytes(gr, Device::HOST) == 0);
    // Step temporaries per sub-group (one here): lp flatten 2P + fp32 grad 4P (§5.7 step 3).
    const int opt = find_task(gr, "step.subgroup.0.optimizer");
    REQUIRE(opt >= 0);
    std::int64_t step_tmp = 0;
    for (BufferId b : gr.tasks[static_cast<std::size_t>(opt)].allocs)
      step_tmp += gr.buffers[static_cast<std::size_t>(b)].bytes;
    CHECK(step_tmp == 6 * PART);
    CHECK(gr.tasks[static_cast<std::size_t>(opt)].elements == PART);
  }

  TEST_CASE("stage3: sub_group_size splits the optimizer step")
  {
    spec::Scenario s = base(1);
    s.deepspeed.zero.sub_group_size = 2006; // two layers of partitions (2·1003) per sub-group
    const TaskGraph gr = build_step_graph(s, model());
    int groups = 0;
    std::int64_t elems = 0;
    for (const Task& t : gr.tasks)
      if (t.kind == TaskKind::COMPUTE && t.phase == Phase::OPTIMIZER) {
        ++groups;
        elems += t.elements;
      }
    CHECK(groups == 4); // ⌈8024 / 2006⌉
    CHECK(elems == PART);
  }
}
