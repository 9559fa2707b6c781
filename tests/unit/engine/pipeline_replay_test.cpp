// The replay of pipeline stages (docs/engine.md "Pipelines: the node-set replay"): SEND/RECV between adjacent stages,
// each stage's DATA_PARALLEL groups, the tied-embedding pairs, and the symmetric replay of a pipeline, which simulates
// the first node of each stage and stands the others behind their NICs. Hand-made graphs; placement rank = stage x
// D x t + data x t + model (docs/pipeline-parallel.md §1). Every expected time is latency + bytes / bandwidth from the
// inline node's figures, NCCL's ring latency written out (docs/collectives.md "Ring"), or a replay of the same
// collective on a cluster without a pipeline.
#include "collectives/nccl.hpp"
#include "core/error.hpp"
#include "engine/engine.hpp"
#include "spec/placement.hpp"
#include "spec/task_graph.hpp"

#include "physics_test_util.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

using namespace zerosim;
using spec::CommGroup;
using spec::Task;
using spec::TaskGraph;
using spec::TaskKind;
using namespace zerosim::physics_test;

namespace {

/// `nodes` nodes of `gpus` A100s on NVLink at 100 GB/s per direction (1 us), PCIe 25 GB/s (1 us), one GPU per PCIe
/// switch, one NIC of 100 Gb/s (12.5 GB/s) per GPU on its switch, network latency 5 us; `p` pipeline stages.
spec::Scenario cluster(int nodes, int gpus, int p)
{
  const std::string g = std::to_string(gpus);
  spec::Scenario s =
      load("  node:\n"
           "    name: pipeline test node\n"
           "    gpu: {model: A100-SXM4-80GB, memory: 80 GiB, memory_bandwidth: 2039 GB/s, peak: {bf16: 312 TFLOPS}}\n"
           "    gpus: " +
               g +
               "\n"
               "    nvlink: {bandwidth: 100 GB/s, latency: 1 us}\n"
               "    pcie: {bandwidth: 25 GB/s, gpus_per_switch: 1, switch_uplink: 25 GB/s, latency: 1 us}\n"
               "    cpu: {sockets: 2, cores: 64, memory: 1 TiB, memory_bandwidth: 300 GB/s}\n"
               "    nics: {count: " +
               g + ", bandwidth: 100 Gbps}\n  nodes: " + std::to_string(nodes) + "\n  gpus_per_node: " + g +
               "\n  network: {latency: 5 us}\n",
           TRAIN);
  // The config layer does not read training.pipeline_parallel yet: the degree is set on the resolved scenario.
  s.training.pipeline_parallel = p;
  return s;
}

engine::EngineOptions replay(engine::Replay r)
{
  engine::EngineOptions o;
  o.replay = r;
  return o;
}

/// Every rank's graph, `of(rank)`, each with its rank.
template <class Of> std::vector<TaskGraph> every_rank(const spec::Scenario& s, Of of)
{
  std::vector<TaskGraph> g;
  for (int r = 0; r < s.world(); ++r) {
    g.push_back(of(r));
    g.back().rank = r;
  }
  return g;
}

/// The graphs of `ranks` only (the symmetric replay's), from every rank's.
std::vector<TaskGraph> only(const std::vector<TaskGraph>& all, const std::vector<int>& ranks)
{
  std::vector<TaskGraph> g;
  for (int r : ranks)
    g.push_back(all[static_cast<std::size_t>(r)]);
  return g;
}

/// The simulated rank of global rank `rank` in `t`.
const engine::RankTimeline& rank_in(const engine::Timeline& t, int rank)
{
  const auto it =
      std::find_if(t.ranks.begin(), t.ranks.end(), [&](const engine::RankTimeline& r) { return r.rank == rank; });
  REQUIRE(it != t.ranks.end());
  return *it;
}

double duration(const engine::RankTimeline& r, std::size_t task)
{
  return r.times.at(task).end - r.times.at(task).start;
}

} // namespace

TEST_SUITE("engine: pipeline stages")
{
  TEST_CASE("simulated_nodes: every node for FULL, node 0 or the first node of each stage for SYMMETRIC")
  {
    using engine::Replay;
    CHECK(engine::simulated_nodes(cluster(4, 2, 1), Replay::SYMMETRIC) == std::vector<int>{0});
    CHECK(engine::simulated_nodes(cluster(4, 2, 1), Replay::FULL) == std::vector<int>{0, 1, 2, 3});
    // p = 2 on 4 nodes of 2 GPUs: D x t = 4, stage 1 starts at rank 4, node 2.
    CHECK(engine::simulated_nodes(cluster(4, 2, 2), Replay::SYMMETRIC) == std::vector<int>{0, 2});
    CHECK(engine::simulated_nodes(cluster(4, 2, 2), Replay::FULL) == std::vector<int>{0, 1, 2, 3});
    // p = 4 on 2 nodes of 8: stages of 4 GPUs, two a node: nodes 0 and 1 once each.
    CHECK(engine::simulated_nodes(cluster(2, 8, 4), Replay::SYMMETRIC) == std::vector<int>{0, 1});
    CHECK(engine::simulated_nodes(cluster(1, 2, 2), Replay::SYMMETRIC) == std::vector<int>{0});
    CHECK_THROWS_AS(engine::simulated_nodes(cluster(4, 2, 2), Replay::AUTO), core::InternalError);
    // With a pipeline AUTO is symmetric beyond one node when the nodes of each stage are alike.
    CHECK(engine::resolve_replay(cluster(4, 2, 2), Replay::AUTO, "") == Replay::SYMMETRIC);
    CHECK(engine::resolve_replay(cluster(1, 2, 2), Replay::AUTO, "") == Replay::FULL);
    CHECK_THROWS_AS(engine::resolve_replay(cluster(4, 2, 2), Replay::SYMMETRIC, "the stages' nodes differ"),
                    core::InputError);
  }

  TEST_CASE("a SEND/RECV between adjacent stages in a node takes 2 x nvlink.latency + S / B_nvlink")
  {
    // One node of 2 GPUs, p = 2: stage 0 is rank 0, stage 1 rank 1. The route is GPU 0's NVLink up and GPU 1's down
    // (NVSwitch), 100 GB/s and 1 us each: 1 GB takes 2e-6 + 1e9 / 100e9 = 0.010002 s on both sides.
    const spec::Scenario s = cluster(1, 2, 2);
    const std::int64_t S = 1'000'000'000;
    const double expected =
        2 * s.cluster.node.nvlink.latency_s + static_cast<double>(S) / s.cluster.node.nvlink.bandwidth_Bps;
    CHECK(expected == doctest::Approx(0.010002));
    const engine::Timeline tl = engine::simulate_graphs(
        s, EMPTY,
        {graph_of({p2p_task(TaskKind::SEND, "send", 1, S)}), graph_of({p2p_task(TaskKind::RECV, "recv", 0, S)})});
    CHECK(tl.replay == "full");
    CHECK(task_time(tl, 0, 0) == doctest::Approx(expected).epsilon(1e-9));
    CHECK(task_time(tl, 1, 0) == doctest::Approx(expected).epsilon(1e-9));
  }

  TEST_CASE("a SEND/RECV between stages on different nodes takes pcie + network + pcie latency + S / B_nic")
  {
    // 4 nodes of 2 GPUs, p = 2: stage 0 is nodes 0-1 (ranks 0-3), stage 1 nodes 2-3 (ranks 4-7); rank r sends 1 GB to
    // rank r + 4, its stage-1 peer with the same data index. Each GPU has its own NIC: PCIe 25 GB/s, NIC 12.5 GB/s, so
    // T = 1 + 5 + 1 us + 1e9 / 12.5e9 = 0.080007 s. The full replay and the node-set replay (nodes 0 and 2; ranks 2, 3,
    // 6, 7 behind their NICs) agree: ranks 0 -> 4 and 1 -> 5 run on the fabric's route between the two simulated nodes.
    const spec::Scenario s = cluster(4, 2, 2);
    const std::int64_t S = 1'000'000'000;
    const double B_nic = s.cluster.network.nic_bandwidth_Bps;
    REQUIRE(B_nic == doctest::Approx(12.5e9));
    const double expected =
        2 * s.cluster.node.pcie.latency_s + s.cluster.network.latency_s + static_cast<double>(S) / B_nic;
    CHECK(expected == doctest::Approx(0.080007));
    const std::vector<TaskGraph> all = every_rank(s, [&](int r) {
      return r < 4 ? graph_of({p2p_task(TaskKind::SEND, "send_activations", r + 4, S)})
                   : graph_of({p2p_task(TaskKind::RECV, "recv_activations", r - 4, S)});
    });
    const engine::Timeline full = engine::simulate_graphs(s, EMPTY, all, replay(engine::Replay::FULL));
    REQUIRE(full.ranks.size() == 8);
    for (std::size_t r = 0; r < 8; ++r)
      CHECK(task_time(full, r, 0) == doctest::Approx(expected).epsilon(1e-9));
    for (const auto& graphs : {all, only(all, {0, 1, 4, 5})}) {
      const engine::Timeline set = engine::simulate_graphs(s, EMPTY, graphs);
      CHECK(set.replay == "symmetric");
      REQUIRE(set.ranks.size() == 4);
      for (std::size_t i = 0; i < 4; ++i) {
        CHECK(set.ranks[i].node == std::vector<int>{0, 0, 2, 2}[i]);
        CHECK(set.ranks[i].rank == std::vector<int>{0, 1, 4, 5}[i]);
        CHECK(task_time(set, i, 0) == doctest::Approx(expected).epsilon(1e-9));
      }
    }
  }

  TEST_CASE("p = 2 on 4 nodes: each stage's DATA_PARALLEL all-reduce takes the 2-node cluster's, in both replays")
  {
    // Stage 0 (nodes 0-1) and stage 1 (nodes 2-3) each all-reduce S over their own data-parallel group; stage 1's ranks
    // first wait 10 ms on the host, so the two groups run at different times on their own communicators. Each takes
    // what the same all-reduce takes on a cluster of 2 nodes without a pipeline: NCCL's ring over N = 4 ranks, C = 2
    // channels (one per NIC), each inter-node edge 2(N-1)/N S / C at the NIC's achieved rate, plus the ring's latency
    // (the planner's predicted_s). The node-set replay (nodes 0 and 2) agrees with the full one within 1 %.
    const std::int64_t S = 2'000'000'000;
    const double wait = 0.010;
    const spec::Scenario two = cluster(2, 2, 1);
    const engine::Timeline ref =
        engine::simulate_graphs(two, EMPTY,
                                every_rank(two,
                                           [&](int) {
                                             return graph_of({collective_task("dp.ar", spec::CollectiveKind::ALL_REDUCE,
                                                                              S, CommGroup::DATA_PARALLEL, 4)});
                                           }),
                                replay(engine::Replay::FULL));
    const double T = task_time(ref, 0, 0);
    const collectives::Plan plan =
        collectives::plan(spec::CollectiveKind::ALL_REDUCE, S, collectives::fabric_of(two.cluster), {});
    CHECK(T == doctest::Approx(plan.predicted_s).epsilon(1e-3));
    CHECK(T ==
          doctest::Approx(1.5 * static_cast<double>(S) / (2 * collectives::NET_BUSBW_FRACTION * 12.5e9)).epsilon(0.01));

    const spec::Scenario s = cluster(4, 2, 2);
    const std::vector<TaskGraph> all = every_rank(s, [&](int r) {
      Task ar = collective_task("dp.ar", spec::CollectiveKind::ALL_REDUCE, S, CommGroup::DATA_PARALLEL, 4);
      if (r < 4)
        return graph_of({ar});
      ar.deps = {0};
      return graph_of({host_wait_task("host", wait), ar});
    });
    const engine::Timeline full = engine::simulate_graphs(s, EMPTY, all, replay(engine::Replay::FULL));
    const engine::Timeline set = engine::simulate_graphs(s, EMPTY, all);
    CHECK(set.replay == "symmetric");
    for (int r = 0; r < 8; ++r) {
      CAPTURE(r);
      const engine::RankTimeline& rt = rank_in(full, r);
      const std::size_t task = r < 4 ? 0 : 1;
      CHECK(rt.times[task].start == doctest::Approx(r < 4 ? 0.0 : wait).epsilon(1e-9));
      CHECK(duration(rt, task) == doctest::Approx(T).epsilon(1e-6));
      if (r / 2 % 2 == 0) // nodes 0 and 2
        CHECK(duration(rank_in(set, r), task) == doctest::Approx(T).epsilon(0.01));
    }
  }

  TEST_CASE("an EMBEDDING all-reduce between stage 0 and stage 1 across nodes takes base + 2 t_inter + S / B_nic")
  {
    // p = 2 on 4 nodes of 2 GPUs: the tied pairs are ranks (r, r + 4). NCCL's ring of N = 2 ranks on two nodes
    // (docs/collectives.md "Ring", Simple at line rate: protocols and achieved bus bandwidth off): n_steps = 2(N-1) =
    // 2, both across nodes, so L = 8.4 us + 2 (hop + 14.0 - 2.7 us) with hop = pcie + network + pcie = 7 us; each GPU
    // sends 2(N-1)/N S = S (two steps of S/2) through its own NIC: T = L + S / B_nic = 45.0 us + S / 12.5 GB/s.
    spec::Scenario s = cluster(4, 2, 2);
    s.mechanisms.nccl_protocols = false;
    s.mechanisms.achieved_busbw = false;
    const std::int64_t S = 1'000'000'000;
    const double hop = 2 * s.cluster.node.pcie.latency_s + s.cluster.network.latency_s;
    const double L = 8.4e-6 + 2 * (hop + (14.0 - 2.7) * 1e-6);
    CHECK(L == doctest::Approx(45.0e-6));
    const double expected = L + static_cast<double>(S) / s.cluster.network.nic_bandwidth_Bps;
    const std::vector<TaskGraph> all = every_rank(s, [&](int) {
      return graph_of({collective_task("tied.ar", spec::CollectiveKind::ALL_REDUCE, S, CommGroup::EMBEDDING, 2)});
    });
    const engine::Timeline full = engine::simulate_graphs(s, EMPTY, all, replay(engine::Replay::FULL));
    for (std::size_t r = 0; r < 8; ++r)
      CHECK(task_time(full, r, 0) == doctest::Approx(expected).epsilon(1e-6));
    const engine::Timeline set = engine::simulate_graphs(s, EMPTY, only(all, {0, 1, 4, 5}));
    CHECK(set.replay == "symmetric");
    for (std::size_t i = 0; i < set.ranks.size(); ++i)
      CHECK(task_time(set, i, 0) == doctest::Approx(expected).epsilon(1e-6));
  }

  TEST_CASE("an EMBEDDING collective on a middle stage's rank is refused before the replay")
  {
    // p = 3 on 3 nodes of 2 GPUs: stage 1 (ranks 2-3) holds no tied weight.
    const spec::Scenario s = cluster(3, 2, 3);
    const std::vector<TaskGraph> all = every_rank(s, [&](int) {
      return graph_of({collective_task("tied.ar", spec::CollectiveKind::ALL_REDUCE, 1000, CommGroup::EMBEDDING, 2)});
    });
    CHECK_THROWS_AS(engine::simulate_graphs(s, EMPTY, all, replay(engine::Replay::FULL)), core::InternalError);
  }

  TEST_CASE("the node-set replay of a two-stage pipeline simulates nodes 0 and 2 and agrees with the full replay")
  {
    // p = 2 on 4 nodes of 2 GPUs (D = 4). GPipe over m = 4 micro-batches: stage 0 runs each forward (F FLOPs) and sends
    // its activations (A bytes) to rank r + 4; stage 1 receives, runs its forward, then its backwards (2F) in reverse
    // order, each sending its gradient back; stage 0 receives each gradient and runs its backward. Then each stage
    // all-reduces its gradients over its data-parallel group (G_s bytes), and stages 0 and 1 all-reduce the tied
    // embedding's (E bytes). The symmetric replay simulates nodes 0 and 2 and stands nodes 1 and 3 behind their NICs;
    // its step is the full replay's within 1 %.
    const spec::Scenario s = cluster(4, 2, 2);
    const int m = 4, R = 4;
    const double F = 2e13;
    const std::int64_t A = 200'000'000, Gs = 1'000'000'000, E = 400'000'000;
    const auto stage_graph = [&](int r) {
      std::vector<Task> t;
      const bool first = r < R;
      for (int mb = 0; mb < m; ++mb) {
        const std::string p = "mb" + std::to_string(mb) + ".";
        if (!first)
          t.push_back(p2p_task(TaskKind::RECV, p + "recv_activations", r - R, A, mb));
        Task f = kernel_task(p + "fwd", F);
        f.micro_step = mb;
        t.push_back(f);
        if (first)
          t.push_back(p2p_task(TaskKind::SEND, p + "send_activations", r + R, A, mb));
      }
      for (int mb = m - 1; mb >= 0; --mb) {
        const std::string p = "mb" + std::to_string(mb) + ".";
        if (first)
          t.push_back(p2p_task(TaskKind::RECV, p + "recv_gradients", r + R, A, mb));
        Task b = kernel_task(p + "bwd", 2 * F);
        b.micro_step = mb;
        t.push_back(b);
        if (!first)
          t.push_back(p2p_task(TaskKind::SEND, p + "send_gradients", r - R, A, mb));
      }
      t.push_back(collective_task("tied.ar", spec::CollectiveKind::ALL_REDUCE, E, CommGroup::EMBEDDING, 2));
      t.push_back(collective_task("dp.ar", spec::CollectiveKind::ALL_REDUCE, Gs, CommGroup::DATA_PARALLEL, 4));
      TaskGraph g = graph_of(t);
      g.micro_steps = m;
      return g;
    };
    const std::vector<TaskGraph> all = every_rank(s, stage_graph);
    const engine::Timeline full = engine::simulate_graphs(s, EMPTY, all, replay(engine::Replay::FULL));
    CHECK(full.replay == "full");
    const engine::Timeline set = engine::simulate_graphs(s, EMPTY, all, replay(engine::Replay::SYMMETRIC));
    CHECK(set.replay == "symmetric");
    REQUIRE(set.ranks.size() == 4);
    std::vector<int> nodes;
    for (const engine::RankTimeline& r : set.ranks)
      nodes.push_back(r.node);
    CHECK(nodes == std::vector<int>{0, 0, 2, 2});
    CHECK(set.step_time_s == doctest::Approx(full.step_time_s).epsilon(0.01));
    // The same from the simulated nodes' graphs alone (what run::simulate_step builds).
    const engine::Timeline given = engine::simulate_graphs(s, EMPTY, only(all, {0, 1, 4, 5}));
    CHECK(given.step_time_s == doctest::Approx(set.step_time_s).epsilon(1e-9)); // the clock runs on between engines
    // The pipeline is the step's bulk: at least stage 1's m forwards and m backwards (its tasks 1 and 2m), one after
    // the other.
    const double kernels = m * (task_time(full, 4, 1) + task_time(full, 4, 2 * static_cast<std::size_t>(m)));
    CHECK(full.step_time_s > kernels);
  }
}
