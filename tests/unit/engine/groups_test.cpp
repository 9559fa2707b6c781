// How the replay matches communication (docs/engine.md "How collectives are matched", "SEND and RECV"): a
// collective is the k-th call on one communicator, a group instance, and starts when the simulated ranks of that
// instance have reached it; a SEND and its RECV are one flow between two GPUs. Hand-made graphs; every expected
// time is the platform's latency + bytes / bandwidth (a ring's 2(n-1)/n S or (n-1)/n S per edge, docs/collectives.md)
// from the inline node's figures, or a host delay (a SYNC task's host_seconds, exact).
#include "collectives/nccl.hpp"
#include "core/error.hpp"
#include "engine/engine.hpp"
#include "spec/placement.hpp"
#include "spec/task_graph.hpp"

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

/// A node of `gpus` A100s on NVLink at 100 GB/s per direction (1 us), PCIe 25 GB/s (1 us), one GPU per PCIe switch,
/// `nics` NICs of 100 Gb/s (12.5 GB/s, NIC k on switch k).
std::string node_yaml(int gpus, int nics)
{
  return "  node:\n"
         "    name: groups test node\n"
         "    gpu: {model: A100-SXM4-80GB, memory: 80 GiB, memory_bandwidth: 2039 GB/s, peak: {bf16: 312 TFLOPS}}\n"
         "    gpus: " +
         std::to_string(gpus) +
         "\n"
         "    nvlink: {bandwidth: 100 GB/s, latency: 1 us}\n"
         "    pcie: {bandwidth: 25 GB/s, gpus_per_switch: 1, switch_uplink: 25 GB/s, latency: 1 us}\n"
         "    cpu: {sockets: 2, cores: 64, memory: 1 TiB, memory_bandwidth: 300 GB/s}\n"
         "    nics: {count: " +
         std::to_string(nics) + ", bandwidth: 100 Gbps}\n";
}

/// `nodes` nodes of `gpus` GPUs and as many NICs, network latency 5 us.
spec::Scenario cluster(int nodes, int gpus)
{
  return load(node_yaml(gpus, gpus) + "  nodes: " + std::to_string(nodes) +
                  "\n  gpus_per_node: " + std::to_string(gpus) + "\n  network: {latency: 5 us}\n",
              TRAIN);
}

engine::EngineOptions full_replay()
{
  engine::EngineOptions o;
  o.replay = engine::Replay::FULL;
  return o;
}

/// The planner's ring on one group of n NVLink GPUs of `s`'s node: the fabric the engine passes (intra = NVLink,
/// route latency 2 x nvlink.latency).
collectives::Plan ring_of(const spec::Scenario& s, spec::CollectiveKind kind, std::int64_t bytes, int n)
{
  collectives::Fabric f;
  f.nodes = 1;
  f.gpus_per_node = n;
  f.nics_per_node = s.cluster.network.nics_per_node;
  f.intra_Bps = s.cluster.node.nvlink.bandwidth_Bps;
  f.intra_latency_s = 2 * s.cluster.node.nvlink.latency_s;
  f.inter_Bps = s.cluster.network.nic_bandwidth_Bps;
  f.inter_latency_s = s.cluster.network.latency_s + 2 * s.cluster.node.pcie.latency_s;
  const collectives::Plan p = collectives::plan(kind, bytes, f);
  REQUIRE(p.algorithm == "ring");
  REQUIRE(p.phases.size() == 1);
  REQUIRE_FALSE(p.phases[0].flows.empty());
  return p;
}

/// A ring collective of S bytes among n NVLink GPUs alone: each edge carries 2(n-1)/n S (all-reduce) or (n-1)/n S
/// (all-gather) at the flows' achieved efficiency e of B, after the route latency 2 x nvlink.latency, plus the
/// ring's remaining per-step latency (PlanPhase::latency_s).
double ring_time(const spec::Scenario& s, spec::CollectiveKind kind, std::int64_t S, int n)
{
  const collectives::Plan p = ring_of(s, kind, S, n);
  const double per_edge = (kind == spec::CollectiveKind::ALL_REDUCE ? 2.0 : 1.0) * (n - 1) / n * static_cast<double>(S);
  const double e = p.phases[0].flows.front().efficiency;
  return per_edge / (e * s.cluster.node.nvlink.bandwidth_Bps) + 2 * s.cluster.node.nvlink.latency_s +
         p.phases[0].latency_s;
}

constexpr std::int64_t S_AR = 2'000'000'000, S_AG = 1'000'000'000;

} // namespace

TEST_SUITE("engine: communicators")
{
  TEST_CASE("group_instance names the communicator of each rank: node, local index, rank / t, local % t")
  {
    // 2 nodes x 8 GPUs, t = 2 (docs/tensor-parallel.md: TENSOR groups are t consecutive GPUs of a node, the
    // DATA_PARALLEL groups the GPUs of one tensor-parallel index). Global rank 13 is node 1's GPU 5.
    const spec::Gpu g{1, 5};
    CHECK(spec::group_instance(CommGroup::WORLD, g, 8, 2) == 0);
    CHECK(spec::group_instance(CommGroup::INTRA_NODE, g, 8, 2) == 1);
    CHECK(spec::group_instance(CommGroup::INTER_NODE, g, 8, 2) == 5);
    CHECK(spec::group_instance(CommGroup::TENSOR, g, 8, 2) == 13 / 2);
    CHECK(spec::group_instance(CommGroup::DATA_PARALLEL, g, 8, 2) == 5 % 2);
    CHECK(spec::group_instance(CommGroup::DATA_PARALLEL, g, 8, 1) == 0); // without tensor parallelism: the world
    CHECK_THROWS_AS(spec::group_instance(CommGroup::TENSOR, g, 8, 3), core::InternalError);
    CHECK_THROWS_AS(spec::group_instance(CommGroup::WORLD, spec::Gpu{0, 8}, 8, 1), core::InternalError);
  }

  TEST_CASE("two nodes' INTRA_NODE groups issue different collectives in different orders, each on its own time")
  {
    // 2 nodes x 2 GPUs, full replay. Node 0's ranks issue an all-reduce of 2 GB then an all-gather of 1 GB; node 1's
    // an all-gather of 1 GB, an all-reduce of 2 GB and another all-gather: different calls and counts on two
    // communicators (the engine once matched the k-th collective of every rank and refused this). The groups share
    // no link (each node's NVLinks), so each call takes its ring time alone, T_AR = 2(n-1)/n S / (e B) + latency and
    // T_AG = (n-1)/n S / (e B) + latency with n = 2, one after the other on each node.
    const spec::Scenario s = cluster(2, 2);
    const auto AR = spec::CollectiveKind::ALL_REDUCE;
    const auto AG = spec::CollectiveKind::ALL_GATHER;
    std::vector<TaskGraph> g;
    for (int r = 0; r < 2; ++r)
      g.push_back(graph_of({collective_task("ar", AR, S_AR, CommGroup::INTRA_NODE, 2),
                            collective_task("ag", AG, S_AG, CommGroup::INTRA_NODE, 2)}));
    for (int r = 2; r < 4; ++r)
      g.push_back(graph_of({collective_task("ag", AG, S_AG, CommGroup::INTRA_NODE, 2),
                            collective_task("ar", AR, S_AR, CommGroup::INTRA_NODE, 2),
                            collective_task("ag.2", AG, S_AG, CommGroup::INTRA_NODE, 2)}));
    const double t_ar = ring_time(s, AR, S_AR, 2), t_ag = ring_time(s, AG, S_AG, 2);
    CHECK(t_ar == doctest::Approx(2e9 / (collectives::NVLINK_BUSBW_FRACTION * 100e9)).epsilon(0.01));
    const engine::Timeline tl = engine::simulate_graphs(s, EMPTY, g, full_replay());
    REQUIRE(tl.ranks.size() == 4);
    for (std::size_t r = 0; r < 2; ++r) {
      CAPTURE(r);
      CHECK(tl.ranks[r].times[0].end == doctest::Approx(t_ar).epsilon(1e-6));
      CHECK(tl.ranks[r].times[1].end == doctest::Approx(t_ar + t_ag).epsilon(1e-6));
    }
    for (std::size_t r = 2; r < 4; ++r) {
      CAPTURE(r);
      CHECK(tl.ranks[r].times[0].end == doctest::Approx(t_ag).epsilon(1e-6));
      CHECK(tl.ranks[r].times[1].end == doctest::Approx(t_ag + t_ar).epsilon(1e-6));
      CHECK(tl.ranks[r].times[2].end == doctest::Approx(2 * t_ag + t_ar).epsilon(1e-6));
    }
  }

  TEST_CASE("the symmetric replay is refused for graphs whose nodes differ, and AUTO replays them all")
  {
    // docs/engine.md "Nodes alike": the symmetric replay simulates node 0 and stands the others behind its NICs, which
    // is right only when every node issues node 0's communications (spec::same_communications). The graphs of the
    // test above differ between the nodes: --replay symmetric is an input error; AUTO falls back to every rank. Given
    // nodes that are alike, AUTO replays node 0's ranks only, and the other nodes' own work does not matter.
    const spec::Scenario s = cluster(2, 2);
    const auto AR = spec::CollectiveKind::ALL_REDUCE;
    const auto AG = spec::CollectiveKind::ALL_GATHER;
    std::vector<TaskGraph> differ;
    for (int r = 0; r < 4; ++r)
      differ.push_back(r < 2 ? graph_of({collective_task("ar", AR, S_AR, CommGroup::INTRA_NODE, 2)})
                             : graph_of({collective_task("ag", AG, S_AG, CommGroup::INTRA_NODE, 2)}));
    engine::EngineOptions symmetric;
    symmetric.replay = engine::Replay::SYMMETRIC;
    CHECK_THROWS_AS(engine::simulate_graphs(s, EMPTY, differ, symmetric), core::InputError);
    const engine::Timeline all = engine::simulate_graphs(s, EMPTY, differ);
    CHECK(all.replay == "full");
    CHECK(all.ranks.size() == 4);

    std::vector<TaskGraph> alike;
    for (int r = 0; r < 4; ++r) // node 1's ranks also compute before the all-reduce: local work, not communication
      alike.push_back(
          r < 2 ? graph_of({collective_task("ar", AR, S_AR, CommGroup::INTER_NODE, 2)})
                : graph_of({kernel_task("work", 1e12), collective_task("ar", AR, S_AR, CommGroup::INTER_NODE, 2)}));
    for (int r = 0; r < 4; ++r)
      alike[static_cast<std::size_t>(r)].rank = r;
    const engine::Timeline sym = engine::simulate_graphs(s, EMPTY, alike);
    CHECK(sym.replay == "symmetric");
    CHECK(sym.ranks.size() == 2);

    // From the spec: --replay symmetric with the property's reason is refused, AUTO resolves to full.
    CHECK_THROWS_AS(engine::resolve_replay(s, engine::Replay::SYMMETRIC, "the stages differ"), core::InputError);
    CHECK(engine::resolve_replay(s, engine::Replay::AUTO, "the stages differ") == engine::Replay::FULL);
    CHECK(engine::resolve_replay(s, engine::Replay::AUTO, "") == engine::Replay::SYMMETRIC);
  }

  TEST_CASE("TENSOR groups of one node that reach their collective at different times each start when theirs has")
  {
    // One node of 4 GPUs, tensor parallelism 2: TENSOR groups {0, 1} and {2, 3}. The second group's ranks first wait
    // 10 ms on the host; the first group's all-reduce starts at 0 and the second's at 10 ms, each taking the 2-GPU
    // ring time (NVSwitch: each GPU has its own NVLink, so the groups do not slow each other).
    const spec::Scenario s =
        load(node_yaml(4, 4) + "  nodes: 1\n",
             "training: {seq_len: 1024, micro_batch: 1, grad_accum: 1, precision: bf16, tensor_parallel: 2}\n"
             "deepspeed: {zero_optimization: {stage: 0}}\n");
    REQUIRE(s.tp() == 2);
    const auto AR = spec::CollectiveKind::ALL_REDUCE;
    const double wait = 0.010;
    std::vector<TaskGraph> g;
    for (int r = 0; r < 4; ++r) {
      Task ar = collective_task("tp.ar", AR, S_AR, CommGroup::TENSOR, 2);
      if (r >= 2)
        ar.deps = {0};
      g.push_back(r < 2 ? graph_of({ar}) : graph_of({host_wait_task("host", wait), ar}));
    }
    const double t_ar = ring_time(s, AR, S_AR, 2);
    const engine::Timeline tl = engine::simulate_graphs(s, EMPTY, g);
    for (std::size_t r = 0; r < 2; ++r) {
      CHECK(tl.ranks[r].times[0].start == doctest::Approx(0.0));
      CHECK(tl.ranks[r].times[0].end == doctest::Approx(t_ar).epsilon(1e-6));
    }
    for (std::size_t r = 2; r < 4; ++r) {
      CHECK(tl.ranks[r].times[1].start == doctest::Approx(wait).epsilon(1e-9));
      CHECK(tl.ranks[r].times[1].end == doctest::Approx(wait + t_ar).epsilon(1e-6));
    }
  }

  TEST_CASE("a rank outside a collective's group is not held by it, and keeps its SMs")
  {
    // 2 nodes x 2 GPUs, full replay: node 0's ranks all-reduce on their INTRA_NODE group and then wait 1 ms on the
    // host; node 1's ranks issue no collective: two host waits of 10 ms (exact delays: the second starts at 10 ms and
    // ends at 20 ms, whatever node 0 does) and, on the compute stream from 0, a compute-bound kernel, which takes its
    // time alone (no NCCL kernel runs on their GPUs, so no SM share is taken from it: docs/engine.md "Interference").
    const spec::Scenario s = cluster(2, 2);
    const auto AR = spec::CollectiveKind::ALL_REDUCE;
    const double flops = 3e12;
    std::vector<TaskGraph> g, alone;
    for (int r = 0; r < 2; ++r) {
      Task after = host_wait_task("after", 0.001);
      after.deps = {0};
      g.push_back(graph_of({collective_task("ar", AR, S_AR, CommGroup::INTRA_NODE, 2), after}));
      alone.push_back(graph_of({kernel_task("kernel", flops)}));
    }
    for (int r = 2; r < 4; ++r) {
      g.push_back(graph_of({host_wait_task("w0", 0.010), host_wait_task("w1", 0.010), kernel_task("kernel", flops)}));
      alone.push_back(graph_of({kernel_task("kernel", flops)}));
    }
    const double t_ar = ring_time(s, AR, S_AR, 2);
    REQUIRE(t_ar > 0.020); // the all-reduce outlasts node 1's work
    const engine::Timeline tl = engine::simulate_graphs(s, EMPTY, g, full_replay());
    const engine::Timeline ref = engine::simulate_graphs(s, EMPTY, alone, full_replay());
    for (std::size_t r = 0; r < 2; ++r) {
      CHECK(tl.ranks[r].times[0].end == doctest::Approx(t_ar).epsilon(1e-6));
      CHECK(tl.ranks[r].times[1].end == doctest::Approx(t_ar + 0.001).epsilon(1e-6));
    }
    for (std::size_t r = 2; r < 4; ++r) {
      CHECK(tl.ranks[r].times[0].end == doctest::Approx(0.010).epsilon(1e-9));
      CHECK(tl.ranks[r].times[1].start == doctest::Approx(0.010).epsilon(1e-9));
      CHECK(tl.ranks[r].times[1].end == doctest::Approx(0.020).epsilon(1e-9));
      CHECK(tl.ranks[r].times[2].start == doctest::Approx(0.0));
      CHECK(task_time(tl, r, 2) == doctest::Approx(task_time(ref, r, 0)).epsilon(1e-9));
    }
  }

  TEST_CASE("ranks that issue different numbers of calls on one group are refused before the replay")
  {
    // NCCL would hang: the k-th call of a group's ranks is one collective, and one rank never makes it.
    const spec::Scenario s = cluster(1, 2);
    const auto AR = spec::CollectiveKind::ALL_REDUCE;
    std::vector<TaskGraph> g{graph_of({collective_task("ar", AR, 1000, CommGroup::WORLD, 2),
                                       collective_task("ar.2", AR, 1000, CommGroup::WORLD, 2)}),
                             graph_of({collective_task("ar", AR, 1000, CommGroup::WORLD, 2)})};
    CHECK_THROWS_AS(engine::simulate_graphs(s, EMPTY, g), core::InternalError);
    // The same call number with two different kinds.
    std::vector<TaskGraph> h{
        graph_of({collective_task("ar", AR, 1000, CommGroup::WORLD, 2)}),
        graph_of({collective_task("ag", spec::CollectiveKind::ALL_GATHER, 1000, CommGroup::WORLD, 2)})};
    CHECK_THROWS_AS(engine::simulate_graphs(s, EMPTY, h), core::InternalError);
  }
}

TEST_SUITE("engine: SEND and RECV")
{
  TEST_CASE("a SEND/RECV pair over NVLink takes 2 x nvlink.latency + S / B_nvlink, from when both sides are issued")
  {
    // One node of 2 GPUs: the route GPU 0 -> GPU 1 is GPU 0's NVLink up and GPU 1's down (NVSwitch), 100 GB/s and
    // 1 us each: 1 GB takes 2e-6 + 1e9 / 100e9 = 0.010002 s. The receiver first waits 5 ms on the host, so the
    // transfer starts at 5 ms on both sides and ends at 5 ms + 0.010002 s.
    const spec::Scenario s = cluster(1, 2);
    const std::int64_t S = 1'000'000'000;
    const double B = s.cluster.node.nvlink.bandwidth_Bps, lat = 2 * s.cluster.node.nvlink.latency_s;
    REQUIRE(B == doctest::Approx(100e9));
    const double expected = lat + static_cast<double>(S) / B;
    CHECK(expected == doctest::Approx(0.010002));
    {
      std::vector<TaskGraph> g{graph_of({p2p_task(TaskKind::SEND, "send", 1, S, 0, spec::Stream::COMPUTE)}),
                               graph_of({p2p_task(TaskKind::RECV, "recv", 0, S, 0, spec::Stream::COMPUTE)})};
      const engine::Timeline tl = engine::simulate_graphs(s, EMPTY, g);
      CHECK(task_time(tl, 0, 0) == doctest::Approx(expected).epsilon(1e-9));
      CHECK(task_time(tl, 1, 0) == doctest::Approx(expected).epsilon(1e-9));
    }
    Task recv = p2p_task(TaskKind::RECV, "recv", 0, S, 0, spec::Stream::COMPUTE);
    recv.deps = {0};
    std::vector<TaskGraph> g{graph_of({p2p_task(TaskKind::SEND, "send", 1, S, 0, spec::Stream::COMPUTE)}),
                             graph_of({host_wait_task("host", 0.005), recv})};
    const engine::Timeline tl = engine::simulate_graphs(s, EMPTY, g);
    CHECK(tl.ranks[0].times[0].start == doctest::Approx(0.0));
    CHECK(tl.ranks[0].times[0].end == doctest::Approx(0.005 + expected).epsilon(1e-9));
    CHECK(tl.ranks[1].times[1].start == doctest::Approx(0.005).epsilon(1e-9));
    CHECK(tl.ranks[1].times[1].end == doctest::Approx(0.005 + expected).epsilon(1e-9));
  }

  TEST_CASE("a SEND/RECV pair across nodes takes pcie + network + pcie latency + S / B_nic, in both replays")
  {
    // 2 nodes x 1 GPU, one NIC each beside its GPU: the route is the sender's PCIe link (25 GB/s, 1 us), its NIC
    // (12.5 GB/s, half of the 5 us network latency), the receiver's NIC (the other half) and PCIe link (1 us). The
    // bottleneck is the NIC: 1 GB takes 7e-6 + 1e9 / 12.5e9 = 0.080007 s. The symmetric replay simulates rank 0 only;
    // rank 1 stands behind its NIC and the transfer pays the whole route's latency.
    const spec::Scenario s = cluster(2, 1);
    const std::int64_t S = 1'000'000'000;
    const double B_nic = s.cluster.network.nic_bandwidth_Bps;
    REQUIRE(B_nic == doctest::Approx(12.5e9));
    REQUIRE(B_nic < s.cluster.node.pcie.bandwidth_Bps);
    const double lat = s.cluster.node.pcie.latency_s + s.cluster.network.latency_s + s.cluster.node.pcie.latency_s;
    const double expected = lat + static_cast<double>(S) / B_nic;
    CHECK(expected == doctest::Approx(0.080007));
    std::vector<TaskGraph> g{graph_of({p2p_task(TaskKind::SEND, "send", 1, S, 0, spec::Stream::COMPUTE)}),
                             graph_of({p2p_task(TaskKind::RECV, "recv", 0, S, 0, spec::Stream::COMPUTE)})};
    const engine::Timeline full = engine::simulate_graphs(s, EMPTY, g, full_replay());
    REQUIRE(full.ranks.size() == 2);
    CHECK(task_time(full, 0, 0) == doctest::Approx(expected).epsilon(1e-9));
    CHECK(task_time(full, 1, 0) == doctest::Approx(expected).epsilon(1e-9));
    for (const TaskKind kind : {TaskKind::SEND, TaskKind::RECV}) {
      const engine::Timeline sym =
          engine::simulate_graphs(s, EMPTY, {graph_of({p2p_task(kind, "p2p", 1, S, 0, spec::Stream::COMPUTE)})});
      REQUIRE(sym.ranks.size() == 1);
      CHECK(task_time(sym, 0, 0) == doctest::Approx(expected).epsilon(1e-9));
    }
  }

  TEST_CASE("two transfers of one pair of ranks run one after the other, whatever their streams")
  {
    // docs/engine.md "SEND and RECV": PyTorch's unbatched send/receive pair has one NCCL communicator, whose kernels
    // run one at a time. Two 1 GB transfers 0 -> 1 issued on two streams: the second starts when the first ends, each
    // taking T = 2 x nvlink.latency + S / B = 0.010002 s. Switched off (mechanism `communicator`), both start at 0 and
    // share GPU 0's NVLink: each moves 1 GB at B / 2 and ends at 2e-6 + 2 S / B = 0.020002 s.
    const spec::Scenario s = cluster(1, 2);
    const std::int64_t S = 1'000'000'000;
    const double T = 2 * s.cluster.node.nvlink.latency_s + static_cast<double>(S) / s.cluster.node.nvlink.bandwidth_Bps;
    std::vector<TaskGraph> g{graph_of({p2p_task(TaskKind::SEND, "send.0", 1, S, 0, spec::Stream::COMPUTE),
                                       p2p_task(TaskKind::SEND, "send.1", 1, S, 0, spec::Stream::REDUCTION)}),
                             graph_of({p2p_task(TaskKind::RECV, "recv.0", 0, S, 0, spec::Stream::COMPUTE),
                                       p2p_task(TaskKind::RECV, "recv.1", 0, S, 0, spec::Stream::REDUCTION)})};
    const engine::Timeline tl = engine::simulate_graphs(s, EMPTY, g);
    for (std::size_t r = 0; r < 2; ++r) {
      CHECK(tl.ranks[r].times[0].end == doctest::Approx(T).epsilon(1e-9));
      CHECK(tl.ranks[r].times[1].start == doctest::Approx(T).epsilon(1e-9));
      CHECK(tl.ranks[r].times[1].end == doctest::Approx(2 * T).epsilon(1e-9));
    }
    spec::Scenario off = s;
    off.mechanisms.communicator = false;
    const engine::Timeline conc = engine::simulate_graphs(off, EMPTY, g);
    const double shared = 2 * s.cluster.node.nvlink.latency_s + 2 * static_cast<double>(S) / 100e9;
    for (std::size_t r = 0; r < 2; ++r)
      for (std::size_t t = 0; t < 2; ++t) {
        CHECK(conc.ranks[r].times[t].start == doctest::Approx(0.0));
        CHECK(conc.ranks[r].times[t].end == doctest::Approx(shared).epsilon(1e-9));
      }
  }

  TEST_CASE("a SEND without its RECV is refused before the replay")
  {
    const spec::Scenario s = cluster(1, 2);
    std::vector<TaskGraph> g{graph_of({p2p_task(TaskKind::SEND, "send", 1, 1000, 0, spec::Stream::COMPUTE)}),
                             graph_of({host_wait_task("host", 0.001)})};
    CHECK_THROWS_AS(engine::simulate_graphs(s, EMPTY, g), core::InternalError);
    std::vector<TaskGraph> self{graph_of({p2p_task(TaskKind::SEND, "send", 0, 1000, 0, spec::Stream::COMPUTE)}),
                                graph_of({host_wait_task("host", 0.001)})};
    CHECK_THROWS_AS(engine::simulate_graphs(s, EMPTY, self), core::InternalError);
  }

  TEST_CASE("interference: NCCL's send and receive kernels hold their CTAs' SMs while the transfer runs")
  {
    // docs/engine.md "SEND and RECV": a peer in the node gets NCCL's p2p channels per peer, the node's collective
    // channels rounded up to a power of two (src/graph/paths.cc ncclTopoComputeP2pChannels): 24 on an H100 node
    // (kernels.yaml) -> 32 CTAs of 132 SMs, so a compute-bound kernel under the transfer takes 132/100 of its time;
    // a peer across nodes gets NCCL_NCHANNELS_PER_NET_PEER = 2 CTAs: 132/130.
    const std::string h100 =
        "  node:\n"
        "    name: test node\n"
        "    gpu: {model: H100-SXM5-80GB, memory: 80 GiB, memory_bandwidth: 3350 GB/s, peak: {bf16: 989 TFLOPS}}\n"
        "    gpus: 2\n"
        "    nvlink: {bandwidth: 450 GB/s, latency: 1 us}\n"
        "    pcie: {bandwidth: 50 GB/s, gpus_per_switch: 1, switch_uplink: 50 GB/s, latency: 1 us}\n"
        "    cpu: {sockets: 2, cores: 64, memory: 1 TiB, memory_bandwidth: 300 GB/s}\n"
        "    nics: {count: 2, bandwidth: 400 Gbps}\n";
    const double flops = 3e12;
    const std::int64_t big = 400'000'000'000; // outlasts the kernel
    CHECK(collectives::nccl_p2p_ctas(true, true, 24) == 32);
    CHECK(collectives::nccl_p2p_ctas(false, true, 24) == 2);
    // NVIDIA/nccl#892's H800 node (8 NVLinks, 16 collective channels): "16 p2p channels per peer"; over PCIe: 2.
    CHECK(collectives::nccl_p2p_ctas(true, true, 16) == 16);
    CHECK(collectives::nccl_p2p_ctas(true, false, 24) == 2);
    struct Case {
      const char* cluster;
      double ctas;
    };
    for (const Case& c :
         {Case{"  nodes: 1\n  gpus_per_node: 2\n", 32.0}, Case{"  nodes: 2\n  gpus_per_node: 1\n", 2.0}}) {
      CAPTURE(c.ctas);
      const spec::Scenario s = load(h100 + c.cluster, TRAIN);
      engine::EngineOptions o = full_replay();
      std::vector<TaskGraph> alone{graph_of({kernel_task("kernel", flops)}), graph_of({kernel_task("kernel", flops)})};
      std::vector<TaskGraph> over{graph_of({kernel_task("kernel", flops),
                                            p2p_task(TaskKind::SEND, "send", 1, big, 0, spec::Stream::REDUCTION)}),
                                  graph_of({kernel_task("kernel", flops),
                                            p2p_task(TaskKind::RECV, "recv", 0, big, 0, spec::Stream::REDUCTION)})};
      const double t_alone = task_time(engine::simulate_graphs(s, EMPTY, alone, o), 0, 0);
      const engine::Timeline tl = engine::simulate_graphs(s, EMPTY, over, o);
      for (std::size_t r = 0; r < 2; ++r) {
        REQUIRE(task_time(tl, r, 1) > task_time(tl, r, 0));
        CHECK(task_time(tl, r, 0) / t_alone == doctest::Approx(132.0 / (132.0 - c.ctas)).epsilon(1e-3));
      }
    }
  }
}
