// Physics of tensor parallelism in the replay: TENSOR all-reduces on the NVLink of one node, DATA_PARALLEL ones
// through the NICs. Every expected value is the ring formula of docs/collectives.md (bandwidth term 2(n-1)/n S / B),
// plus the latency the engine pays: the route's (platform: 2 x nvlink.latency inside a node; pcie.latency + the
// network's one-way latency + pcie.latency between nodes) and the plan's per-step remainder (Plan::PlanPhase::
// latency_s), read from the planner as physics_test.cpp does. The figures come from the inline node below.
#include "collectives/nccl.hpp"
#include "config/scenario_loader.hpp"
#include "engine/engine.hpp"
#include "run/run_scenario.hpp"
#include "spec/task_graph.hpp"
#include "workload/transformer.hpp"

#include "physics_test_util.hpp"

#include <doctest/doctest.h>

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

/// A node of `gpus` GPUs, one per PCIe switch, `nics` NICs (NIC k on switch k * switches / nics), NVLink at
/// 100 GB/s per direction with 1 us latency, PCIe 25 GB/s with 1 us.
std::string node_yaml(int gpus, int nics, int gpus_per_switch = 1)
{
  return "  node:\n"
         "    name: tensor-parallel test node\n"
         "    gpu: {model: A100-SXM4-80GB, memory: 80 GiB, memory_bandwidth: 2039 GB/s, peak: {bf16: 312 TFLOPS}}\n"
         "    gpus: " +
         std::to_string(gpus) +
         "\n"
         "    nvlink: {bandwidth: 100 GB/s, latency: 1 us}\n"
         "    pcie: {bandwidth: 25 GB/s, gpus_per_switch: " +
         std::to_string(gpus_per_switch) +
         ", switch_uplink: 25 GB/s, latency: 1 us}\n"
         "    cpu: {sockets: 2, cores: 64, memory: 1 TiB, memory_bandwidth: 300 GB/s}\n"
         "    nics: {count: " +
         std::to_string(nics) + ", bandwidth: 100 Gbps}\n";
}

/// Stage 0, one micro-step, tensor_parallel `t` (Llama-2-7B: 32 heads and FFN 11008 split 2, 4 and 8 ways).
std::string train(int t)
{
  return "training: {seq_len: 1024, micro_batch: 1, grad_accum: 1, precision: bf16, tensor_parallel: " +
         std::to_string(t) + "}\ndeepspeed: {zero_optimization: {stage: 0}}\n";
}

Task all_reduce(std::int64_t bytes, CommGroup group, int group_size)
{
  return collective_task("allreduce", spec::CollectiveKind::ALL_REDUCE, bytes, group, group_size);
}

/// One graph per simulated rank, each a single all-reduce.
std::vector<TaskGraph> one_each(int ranks, std::int64_t bytes, CommGroup group, int group_size)
{
  std::vector<TaskGraph> g;
  for (int r = 0; r < ranks; ++r)
    g.push_back(graph_of({all_reduce(bytes, group, group_size)}));
  return g;
}

/// The planner's fabric of the scenario's cluster (the same figures the engine passes: intra = NVLink, its route
/// latency 2 x nvlink.latency; inter = the NIC, route latency network.latency + 2 x pcie.latency).
collectives::Fabric fabric_of(const spec::Scenario& s, int nodes, int gpus, int nics)
{
  const spec::ClusterSpec& c = s.cluster;
  collectives::Fabric f;
  f.nodes = nodes;
  f.gpus_per_node = gpus;
  f.nics_per_node = nics;
  f.intra_Bps = c.node.nvlink.bandwidth_Bps;
  f.intra_latency_s = 2 * c.node.nvlink.latency_s;
  f.inter_Bps = c.network.nic_bandwidth_Bps;
  f.inter_latency_s = c.network.latency_s + 2 * c.node.pcie.latency_s;
  return f;
}

/// The efficiency of the plan's flows inside a node (inter = false) or across nodes: the achieved bus-bandwidth
/// fraction times the protocol's factor (docs/collectives.md "Achieved bus bandwidth", "Protocols"; their values
/// are tested against NCCL's tables and nccl-tests figures in collectives_tests). The engine sends bytes /
/// efficiency, so a flow of B bytes on a link of rate R takes B / (efficiency R).
double efficiency_of(const collectives::Plan& p, bool inter)
{
  for (const auto& ph : p.phases)
    for (const collectives::Flow& fl : ph.flows)
      if ((fl.src.node != fl.dst.node) == inter)
        return fl.efficiency;
  return 1.0;
}

engine::EngineOptions full_replay()
{
  engine::EngineOptions o;
  o.replay = engine::Replay::FULL;
  return o;
}

constexpr std::int64_t S = 2'000'000'000;

} // namespace

TEST_SUITE("engine: tensor parallelism")
{
  TEST_CASE("a TENSOR all-reduce of S among t NVLink GPUs takes 2(t-1)/t S / B_nvlink plus the ring's latency")
  {
    for (int t : {2, 4, 8}) {
      CAPTURE(t);
      const spec::Scenario s = load(node_yaml(8, 8) + "  nodes: 1\n  gpus_per_node: 8\n", train(t));
      REQUIRE(s.tp() == t);
      const double B = s.cluster.node.nvlink.bandwidth_Bps;
      REQUIRE(B == doctest::Approx(100e9));
      // One group alone is the ring of a node of t GPUs: its flows pay the NVLink route latency 2 x 1 us, its
      // phase the rest of NCCL's ring latency (base + 2(t-1) steps).
      const collectives::Plan p =
          collectives::plan(spec::CollectiveKind::ALL_REDUCE, S, fabric_of(s, 1, t, 8), collectives::Options{});
      REQUIRE(p.algorithm == "ring");
      REQUIRE(p.phases.size() == 1);
      const double route = 2 * s.cluster.node.nvlink.latency_s;
      const double expected =
          2.0 * (t - 1) / t * static_cast<double>(S) / (efficiency_of(p, false) * B) + route + p.phases[0].latency_s;
      const engine::Timeline tl = engine::simulate_graphs(s, EMPTY, one_each(8, S, CommGroup::TENSOR, t));
      for (std::size_t r = 0; r < 8; ++r)
        CHECK(task_time(tl, r, 0) == doctest::Approx(expected).epsilon(1e-6));
    }
  }

  TEST_CASE("TP groups of one node do not slow each other: NVSwitch gives each GPU its own NVLink")
  {
    // t = 4: one group on a node of 4 GPUs, and two groups {0..3}, {4..7} at once on a node of 8. Each GPU sends
    // one ring flow and receives one over its own NVLink: the same time, 2(t-1)/t S / B + latency.
    const int t = 4;
    const spec::Scenario one = load(node_yaml(4, 4) + "  nodes: 1\n  gpus_per_node: 4\n", train(t));
    const spec::Scenario two = load(node_yaml(8, 8) + "  nodes: 1\n  gpus_per_node: 8\n", train(t));
    const engine::Timeline a = engine::simulate_graphs(one, EMPTY, one_each(4, S, CommGroup::TENSOR, t));
    const engine::Timeline b = engine::simulate_graphs(two, EMPTY, one_each(8, S, CommGroup::TENSOR, t));
    const double alone = task_time(a, 0, 0);
    const collectives::Plan p =
        collectives::plan(spec::CollectiveKind::ALL_REDUCE, S, fabric_of(one, 1, t, 4), collectives::Options{});
    REQUIRE(p.phases.size() == 1);
    CHECK(alone == doctest::Approx(2.0 * (t - 1) / t * static_cast<double>(S) / (efficiency_of(p, false) * 100e9) +
                                   2 * one.cluster.node.nvlink.latency_s + p.phases[0].latency_s)
                       .epsilon(1e-6));
    for (std::size_t r = 0; r < 8; ++r)
      CHECK(task_time(b, r, 0) == doctest::Approx(alone).epsilon(1e-9));
    // Two groups on one node of t = 8 GPUs instead would be one ring of 8: 2 x 7/8 S / B, slower than 2 x 3/4 S / B.
    const spec::Scenario eight = load(node_yaml(8, 8) + "  nodes: 1\n  gpus_per_node: 8\n", train(8));
    const engine::Timeline c = engine::simulate_graphs(eight, EMPTY, one_each(8, S, CommGroup::TENSOR, 8));
    CHECK(task_time(c, 0, 0) > alone);
  }

  TEST_CASE("a DATA_PARALLEL all-reduce over 2 nodes with t = G is one ring per GPU index, bounded by its NIC")
  {
    // 2 nodes x 4 GPUs, t = 4: 4 data-parallel groups {node 0 GPU c, node 1 GPU c}, c < 4, each a ring of n = 2
    // ranks through NIC c (one NIC per GPU, on its PCIe switch: the route is PCIe 25 GB/s, NIC 12.5 GB/s, NIC, PCIe).
    // Per direction each NIC carries one flow of 2(n-1)/n S: T = 2(n-1)/n S / B_nic + route + ring latency, the
    // route pcie.latency + network.latency + pcie.latency, the rest from the plan of a cluster of 2 one-GPU nodes.
    const spec::Scenario s =
        load(node_yaml(4, 4) + "  nodes: 2\n  gpus_per_node: 4\n  network: {latency: 5 us}\n", train(4));
    REQUIRE(s.tp() == 4);
    REQUIRE(s.dp() == 2);
    const double B_nic = s.cluster.network.nic_bandwidth_Bps;
    REQUIRE(B_nic == doctest::Approx(12.5e9));
    REQUIRE(B_nic < s.cluster.node.pcie.bandwidth_Bps);
    const collectives::Fabric group = fabric_of(s, 2, 1, 1);
    const collectives::Plan p = collectives::plan(spec::CollectiveKind::ALL_REDUCE, S, group);
    REQUIRE(p.algorithm == "ring");
    REQUIRE(p.phases.size() == 1);
    const double route = s.cluster.node.pcie.latency_s + s.cluster.network.latency_s + s.cluster.node.pcie.latency_s;
    CHECK(route == doctest::Approx(7e-6));
    const double n = 2;
    const double expected =
        2 * (n - 1) / n * static_cast<double>(S) / (efficiency_of(p, true) * B_nic) + route + p.phases[0].latency_s;
    const engine::Timeline tl =
        engine::simulate_graphs(s, EMPTY, one_each(8, S, CommGroup::DATA_PARALLEL, 2), full_replay());
    REQUIRE(tl.ranks.size() == 8);
    for (std::size_t r = 0; r < 8; ++r)
      CHECK(task_time(tl, r, 0) == doctest::Approx(expected).epsilon(1e-6));
    // The symmetric replay (node 0, the other node behind its NICs) moves the same bytes through the same NICs.
    const engine::Timeline sym = engine::simulate_graphs(s, EMPTY, one_each(4, S, CommGroup::DATA_PARALLEL, 2));
    REQUIRE(sym.ranks.size() == 4);
    for (std::size_t r = 0; r < 4; ++r)
      CHECK(task_time(sym, r, 0) == doctest::Approx(expected).epsilon(1e-3));
  }

  // 2 nodes x 8 GPUs, 4 NICs (NIC k beside GPUs 2k, 2k+1), t = 2. Each data-parallel group {c, 2+c, 4+c, 6+c} uses
  // all 4 NICs, one per GPU; the 2 groups share each NIC direction. Equivalently C = 2 channels at a NIC's full rate
  // per group: T = 2(N-1)/N S / (C B_nic) + latency, N = 8. (With the group fabric's old NICs / t the placed channels
  // left node 0 through NICs 1 and 3 only and entered through 0 and 2 only: the bandwidth term doubled.)
  TEST_CASE("a DATA_PARALLEL all-reduce with t = 2 on 8-GPU, 4-NIC nodes gets one NIC direction per channel")
  {
    const spec::Scenario s =
        load(node_yaml(8, 4, 2) + "  nodes: 2\n  gpus_per_node: 8\n  network: {latency: 5 us}\n", train(2));
    const double B_nic = s.cluster.network.nic_bandwidth_Bps;
    const collectives::Plan p = collectives::plan(spec::CollectiveKind::ALL_REDUCE, S, fabric_of(s, 2, 4, 2));
    REQUIRE(p.algorithm == "ring");
    REQUIRE(p.channels == 2);
    const double N = 8, C = 2;
    const double route = s.cluster.network.latency_s + 2 * s.cluster.node.pcie.latency_s;
    const double expected =
        2 * (N - 1) / N * static_cast<double>(S) / (C * efficiency_of(p, true) * B_nic) + route + p.phases[0].latency_s;
    const engine::Timeline tl =
        engine::simulate_graphs(s, EMPTY, one_each(16, S, CommGroup::DATA_PARALLEL, 8), full_replay());
    CHECK(task_time(tl, 0, 0) == doctest::Approx(expected).epsilon(1e-3));
  }

  TEST_CASE("in a whole step, a block's TENSOR all-reduce takes its ring time")
  {
    // Llama-2-7B, 1 node x 4 GPUs, t = 2, ZeRO-1: every block's forward ends with the attention-output and MLP-output
    // all-reduces of H = micro_batch x seq_len x hidden x 2 bytes among 2 GPUs (no other traffic during the forward
    // on that node's NVLink): 2(t-1)/t H / B_nvlink + route + the plan's phase latency.
    const int t = 2;
    const spec::Scenario s = load(node_yaml(4, 4) + "  nodes: 1\n  gpus_per_node: 4\n",
                                  "training: {seq_len: 1024, micro_batch: 1, grad_accum: 1, precision: bf16, "
                                  "tensor_parallel: 2}\ndeepspeed: {zero_optimization: {stage: 1}}\n");
    const workload::Workload w = workload::build_workload(s.model, workload::workload_options(s));
    const engine::Timeline tl = run::simulate_step(s, w);
    const std::int64_t H = std::int64_t{1} * 1024 * s.model.hidden * 2;
    const collectives::Plan p =
        collectives::plan(spec::CollectiveKind::ALL_REDUCE, H, fabric_of(s, 1, t, 4), collectives::Options{});
    REQUIRE(p.phases.size() == 1);
    const double expected =
        2.0 * (t - 1) / t * static_cast<double>(H) / (efficiency_of(p, false) * s.cluster.node.nvlink.bandwidth_Bps) +
        2 * s.cluster.node.nvlink.latency_s + p.phases[0].latency_s;
    int checked = 0;
    for (std::size_t r = 0; r < tl.ranks.size(); ++r) {
      const auto& tasks = tl.ranks[r].graph.tasks;
      for (std::size_t i = 0; i < tasks.size(); ++i)
        if (tasks[i].name == "mb0.tp_allreduce.fwd.block.5.mlp.out") {
          CHECK(tasks[i].group == CommGroup::TENSOR);
          CHECK(tasks[i].bytes == H);
          CHECK(task_time(tl, r, i) == doctest::Approx(expected).epsilon(1e-6));
          ++checked;
        }
    }
    CHECK(checked == 4);
  }
}
