// The planner's groups with pipeline stages (docs/collectives.md "Pipeline stages"): each stage's DATA_PARALLEL groups
// are the groups of the stage's own slice of the cluster, placed at its GPUs; EMBEDDING pairs stage 0's rank r with
// stage p-1's rank (p-1) D t + r in NCCL's ring of 2; a set of focus nodes keeps every flow with an end on one of them.
// Placement: rank = stage x D x t + data x t + model (docs/pipeline-parallel.md §1). Every expected latency is NCCL
// 2.20.3's ring formula (docs/collectives.md "Ring") written out, with the Simple protocol at line rate.
#include "collectives/nccl.hpp"
#include "core/error.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <set>
#include <tuple>
#include <utility>
#include <vector>

using namespace zerosim;
using collectives::Fabric;
using collectives::Flow;
using collectives::Options;
using collectives::Plan;
using spec::CollectiveKind;
using spec::CommGroup;
using spec::Gpu;

namespace {

constexpr double US = 1e-6;
// NCCL 2.20.3 tuning.cc, Simple: ring base latency 8.4 us; the Simple step minus the LL step (hwLat): NVLink
// 3.4 - 0.6 us, network 14.0 - 2.7 us.
constexpr double RING_BASE = 8.4 * US;
constexpr double RING_NVLINK_OVERHEAD = (3.4 - 0.6) * US;
constexpr double RING_NET_OVERHEAD = (14.0 - 2.7) * US;

constexpr double INTRA_BPS = 300e9;  // NVLink per GPU per direction (A100)
constexpr double INTER_BPS = 25e9;   // 200 Gb/s NIC
constexpr double INTRA_LAT = 1 * US; // route GPU -> GPU inside a node
constexpr double INTER_LAT = 5 * US; // route GPU -> GPU across nodes

constexpr std::array<CollectiveKind, 3> KINDS{CollectiveKind::ALL_REDUCE, CollectiveKind::ALL_GATHER,
                                              CollectiveKind::REDUCE_SCATTER};

Fabric fabric(int nodes, int gpus, int nics, int t = 1, int p = 1)
{
  Fabric f;
  f.nodes = nodes;
  f.gpus_per_node = gpus;
  f.nics_per_node = nics;
  f.intra_Bps = INTRA_BPS;
  f.inter_Bps = INTER_BPS;
  f.intra_latency_s = INTRA_LAT;
  f.inter_latency_s = INTER_LAT;
  f.tensor_parallel = t;
  f.pipeline_parallel = p;
  return f;
}

Options simple_line_rate()
{
  Options o;
  o.protocols = false;
  o.achieved_busbw = false;
  return o;
}

using FlowKey = std::tuple<Gpu, Gpu, double, double>;

std::vector<FlowKey> keys(const std::vector<Flow>& flows)
{
  std::vector<FlowKey> k;
  for (const Flow& f : flows)
    k.emplace_back(f.src, f.dst, f.bytes, f.efficiency);
  std::sort(k.begin(), k.end());
  return k;
}

/// The flows with an end on one of `nodes`.
std::vector<Flow> touching(const std::vector<Flow>& flows, const std::vector<int>& nodes)
{
  std::vector<Flow> out;
  const auto in = [&](int n) { return std::find(nodes.begin(), nodes.end(), n) != nodes.end(); };
  for (const Flow& f : flows)
    if (in(f.src.node) || in(f.dst.node))
      out.push_back(f);
  return out;
}

/// `f`'s flows moved by `nodes` nodes and `locals` GPUs.
std::vector<Flow> moved(std::vector<Flow> flows, int nodes, int locals)
{
  for (Flow& f : flows) {
    f.src.node += nodes;
    f.dst.node += nodes;
    f.src.local += locals;
    f.dst.local += locals;
  }
  return flows;
}

std::vector<Options> options()
{
  Options tree;
  tree.all_reduce = collectives::Algorithm::TREE;
  Options hier;
  hier.hierarchical = true;
  return {Options{}, simple_line_rate(), tree, hier};
}

} // namespace

TEST_SUITE("collectives: pipeline stages")
{
  TEST_CASE("DATA_PARALLEL with p = 2 on 4 nodes: each stage's groups are those of a 2-node cluster, at its nodes")
  {
    // rank = stage x D x t + ...: with 8 GPUs a node, D x t = 16, stage 0 holds nodes 0-1 and stage 1 nodes 2-3. Each
    // stage's data-parallel groups are today's on a cluster of 2 nodes: the same bytes, latency and predicted time,
    // stage 1's moved by two nodes.
    for (const int t : {1, 2, 8})
      for (const Options& o : options())
        for (CollectiveKind k : KINDS) {
          CAPTURE(t);
          const Plan p = collectives::plan(k, 123'456'789, fabric(4, 8, 8, t, 2), o, CommGroup::DATA_PARALLEL);
          const Plan two = collectives::plan(k, 123'456'789, fabric(2, 8, 8, t, 1), o, CommGroup::DATA_PARALLEL);
          CHECK(p.algorithm == two.algorithm);
          CHECK(p.predicted_s == two.predicted_s);
          REQUIRE(p.phases.size() == two.phases.size());
          for (std::size_t i = 0; i < p.phases.size(); ++i) {
            CHECK(p.phases[i].latency_s == two.phases[i].latency_s);
            std::vector<Flow> want = two.phases[i].flows;
            const std::vector<Flow> stage1 = moved(two.phases[i].flows, 2, 0);
            want.insert(want.end(), stage1.begin(), stage1.end());
            CHECK(keys(p.phases[i].flows) == keys(want));
            for (const Flow& fl : p.phases[i].flows) // never from one stage to the other
              CHECK(fl.src.node / 2 == fl.dst.node / 2);
          }
        }
  }

  TEST_CASE("DATA_PARALLEL with stages inside a node: one node's slice of D x t GPUs, at the stage's GPUs")
  {
    // 2 nodes x 8 GPUs, p = 4: D x t = 4, stages 0 and 1 on node 0 (GPUs 0-3, 4-7), stages 2 and 3 on node 1. With
    // t = 2 a stage's data-parallel groups are its GPUs {0, 2} and {1, 3}: the plan of a node of 4 GPUs at t = 2.
    const Plan p = collectives::plan(CollectiveKind::ALL_REDUCE, 1 << 28, fabric(2, 8, 8, 2, 4), simple_line_rate(),
                                     CommGroup::DATA_PARALLEL);
    const Plan slice = collectives::plan(CollectiveKind::ALL_REDUCE, 1 << 28, fabric(1, 4, 8, 2, 1), simple_line_rate(),
                                         CommGroup::DATA_PARALLEL);
    REQUIRE(p.phases.size() == 1);
    CHECK(p.predicted_s == slice.predicted_s);
    std::vector<Flow> want;
    for (const auto& [node, local] : std::vector<std::pair<int, int>>{{0, 0}, {0, 4}, {1, 0}, {1, 4}}) {
      const std::vector<Flow> at = moved(slice.phases[0].flows, node, local);
      want.insert(want.end(), at.begin(), at.end());
    }
    CHECK(keys(p.phases[0].flows) == keys(want));
    for (const Flow& fl : p.phases[0].flows) {
      CHECK(fl.src.node == fl.dst.node);
      CHECK(fl.src.local / 4 == fl.dst.local / 4);
      CHECK(fl.src.local % 2 == fl.dst.local % 2);
    }
    // A 2-GPU ring on NVLink: each GPU sends 2(N-1)/N S = S over one edge: L_ring + S / B, L_ring = base + 2 t_intra.
    const double S = 1 << 28;
    CHECK(p.predicted_s == doctest::Approx(RING_BASE + 2 * (INTRA_LAT + RING_NVLINK_OVERHEAD) + S / INTRA_BPS));
  }

  TEST_CASE("EMBEDDING across nodes: each tied pair's ring of 2 sends S each way, base + 2 t_inter + S / B_nic")
  {
    // 4 nodes x 8 GPUs, t = 2, p = 2: D x t = 16; pair r joins rank r (stage 0, node r / 8) and rank 16 + r (stage 1,
    // node 2 + r / 8). NCCL's ring of N = 2 ranks on 2 nodes: n_steps = 2(N - 1) = 2, both across nodes (n_inter =
    // min(2 x nodes, n_steps) = 2), so L = base + 2 (hop + 14.0 - 2.7 us); each GPU's one edge carries 2(N-1)/N S = S
    // (two steps of S/2) through one NIC: predicted L + S / B_nic.
    const double S = 1e9;
    const Plan p = collectives::plan(CollectiveKind::ALL_REDUCE, static_cast<std::int64_t>(S), fabric(4, 8, 8, 2, 2),
                                     simple_line_rate(), CommGroup::EMBEDDING);
    CHECK(p.algorithm == "ring");
    REQUIRE(p.phases.size() == 1);
    const double L = RING_BASE + 2 * (INTER_LAT + RING_NET_OVERHEAD);
    CHECK(p.predicted_s == doctest::Approx(L + S / INTER_BPS));
    CHECK(p.phases[0].latency_s == doctest::Approx(L - INTER_LAT)); // the flows pay the route's latency
    REQUIRE(p.phases[0].flows.size() == 2 * 16);
    std::set<std::pair<Gpu, Gpu>> pairs;
    for (const Flow& fl : p.phases[0].flows) {
      CHECK(fl.bytes == doctest::Approx(S));
      pairs.insert({fl.src, fl.dst});
    }
    for (int r = 0; r < 16; ++r) {
      const Gpu a{r / 8, r % 8}, b{(16 + r) / 8, (16 + r) % 8};
      CHECK(pairs.count({a, b}) == 1);
      CHECK(pairs.count({b, a}) == 1);
    }
    // Without a pipeline the first stage is the last: a group of one.
    CHECK(collectives::plan(CollectiveKind::ALL_REDUCE, 1 << 20, fabric(4, 8, 8, 2, 1), {}, CommGroup::EMBEDDING)
              .phases.empty());
  }

  TEST_CASE("EMBEDDING inside one node: the ring of 2 over NVLink, base + 2 t_intra + S / B_nvlink")
  {
    // 1 node x 8 GPUs, p = 4, t = 1: D x t = 2; pairs (0, 6) and (1, 7).
    const double S = 1e9;
    const Plan p = collectives::plan(CollectiveKind::ALL_REDUCE, static_cast<std::int64_t>(S), fabric(1, 8, 0, 1, 4),
                                     simple_line_rate(), CommGroup::EMBEDDING);
    REQUIRE(p.phases.size() == 1);
    CHECK(p.predicted_s == doctest::Approx(RING_BASE + 2 * (INTRA_LAT + RING_NVLINK_OVERHEAD) + S / INTRA_BPS));
    const std::vector<FlowKey> want{{Gpu{0, 0}, Gpu{0, 6}, S, 1.0},
                                    {Gpu{0, 1}, Gpu{0, 7}, S, 1.0},
                                    {Gpu{0, 6}, Gpu{0, 0}, S, 1.0},
                                    {Gpu{0, 7}, Gpu{0, 1}, S, 1.0}};
    CHECK(keys(p.phases[0].flows) == want);
  }

  TEST_CASE("a set of focus nodes keeps exactly the flows with an end on one of them, each once")
  {
    // The node-set replay's focus (Options::focus_nodes): the first node of each stage. Every group kind, every
    // algorithm: the same phases, latencies and predicted time as the full plan, and its flows touching the set.
    struct Case {
      Fabric f;
      std::vector<int> focus;
    };
    for (const Case& c : {Case{fabric(4, 8, 8, 2, 2), {0, 2}}, Case{fabric(6, 4, 2, 1, 3), {0, 2, 4}},
                          Case{fabric(4, 8, 4, 4, 2), {1, 2}}, Case{fabric(2, 8, 8, 2, 4), {0, 1}},
                          Case{fabric(4, 8, 8, 1, 1), {0, 3}}})
      for (CommGroup g : {CommGroup::WORLD, CommGroup::DATA_PARALLEL, CommGroup::EMBEDDING, CommGroup::TENSOR,
                          CommGroup::INTRA_NODE, CommGroup::INTER_NODE})
        for (const Options& o : options())
          for (CollectiveKind k : KINDS) {
            CAPTURE(c.f.nodes);
            CAPTURE(c.f.pipeline_parallel);
            CAPTURE(static_cast<int>(g));
            const Plan full = collectives::plan(k, 98'765'432, c.f, o, g);
            Options focus = o;
            focus.focus_nodes = c.focus;
            const Plan part = collectives::plan(k, 98'765'432, c.f, focus, g);
            CHECK(part.algorithm == full.algorithm);
            CHECK(part.predicted_s == full.predicted_s);
            REQUIRE(part.phases.size() == full.phases.size());
            for (std::size_t i = 0; i < full.phases.size(); ++i) {
              CHECK(part.phases[i].latency_s == full.phases[i].latency_s);
              CHECK(keys(part.phases[i].flows) == keys(touching(full.phases[i].flows, c.focus)));
            }
            for (int n : c.focus) { // and one focus node alone
              const Options one = [&] {
                Options x = o;
                x.focus_node = n;
                return x;
              }();
              const Plan single = collectives::plan(k, 98'765'432, c.f, one, g);
              for (std::size_t i = 0; i < full.phases.size(); ++i)
                CHECK(keys(single.phases[i].flows) == keys(touching(full.phases[i].flows, {n})));
            }
          }
  }

  TEST_CASE("inter_node_pairs with p > 1 lists every pair the stages' DATA_PARALLEL and the EMBEDDING plans use")
  {
    for (const auto& [nodes, g, nics, t, p] : std::vector<std::tuple<int, int, int, int, int>>{
             {4, 8, 8, 2, 2}, {6, 4, 2, 1, 3}, {4, 8, 4, 4, 2}, {2, 8, 8, 2, 4}, {8, 2, 2, 2, 2}}) {
      CAPTURE(nodes);
      CAPTURE(p);
      const Fabric f = fabric(nodes, g, nics, t, p);
      for (const std::vector<int>& focus : std::vector<std::vector<int>>{{}, {0}, {0, nodes / 2}}) {
        Options with = {};
        with.focus_nodes = focus;
        const auto pairs = collectives::inter_node_pairs(f, with);
        CHECK(std::is_sorted(pairs.begin(), pairs.end()));
        CHECK(std::adjacent_find(pairs.begin(), pairs.end()) == pairs.end());
        const std::set<std::pair<Gpu, Gpu>> have(pairs.begin(), pairs.end());
        for (const Options& o : options())
          for (CollectiveKind k : KINDS)
            for (std::int64_t S : {std::int64_t{1} << 10, std::int64_t{1} << 34})
              for (CommGroup grp : {CommGroup::DATA_PARALLEL, CommGroup::EMBEDDING, CommGroup::WORLD})
                for (const auto& ph : collectives::plan(k, S, f, o, grp).phases)
                  for (const Flow& fl : focus.empty() ? ph.flows : touching(ph.flows, focus))
                    if (fl.src.node != fl.dst.node)
                      CHECK(have.count({fl.src, fl.dst}) == 1);
      }
    }
  }

  TEST_CASE("NCCL's CTAs: a stage inside a node keeps its data-parallel kernels on one node's, a tied pair has 2")
  {
    // docs/engine.md "Interference": one search channel per NIC the group's GPUs of a node use, doubled.
    CHECK(collectives::nccl_ctas(fabric(2, 8, 8, 2, 4), CommGroup::DATA_PARALLEL, 24) == 24); // a stage in a node
    CHECK(collectives::nccl_ctas(fabric(4, 8, 8, 2, 2), CommGroup::DATA_PARALLEL, 24) == 8);  // 4 GPUs a node
    CHECK(collectives::nccl_ctas(fabric(4, 8, 8, 2, 2), CommGroup::EMBEDDING, 24) == 2);      // one GPU a node
    CHECK(collectives::nccl_ctas(fabric(1, 8, 0, 1, 4), CommGroup::EMBEDDING, 24) == 24);     // inside one node
  }

  TEST_CASE("stages that neither fill whole nodes nor divide one are refused")
  {
    // 3 stages of 16 GPUs: not a whole number; 2 stages of 12 GPUs on nodes of 8: a node holds parts of two stages.
    CHECK_THROWS_AS(
        collectives::plan(CollectiveKind::ALL_REDUCE, 1 << 20, fabric(2, 8, 8, 1, 3), {}, CommGroup::DATA_PARALLEL),
        core::InputError);
    CHECK_THROWS_AS(
        collectives::plan(CollectiveKind::ALL_REDUCE, 1 << 20, fabric(3, 8, 8, 1, 2), {}, CommGroup::EMBEDDING),
        core::InputError);
    Options bad;
    bad.focus_nodes = {2, 0};
    CHECK_THROWS_AS(collectives::plan(CollectiveKind::ALL_REDUCE, 1 << 20, fabric(4, 8, 8, 1, 2), bad),
                    core::InternalError);
  }
}
