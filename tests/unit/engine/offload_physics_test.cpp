// Physics of offload traffic: PCIe switch sharing, NIC traffic beside parameter fetches, NVMe
// (aio request waves, RAID-0 striping), NVMe pipelining and pinned against pageable copies. Every expected value
// comes from a formula stated beside it, evaluated from the node's own figures (docs/engine.md).
#include "config/scenario_loader.hpp"
#include "core/error.hpp"
#include "engine/engine.hpp"
#include "run/run_scenario.hpp"
#include "schedule/schedule_builder.hpp"
#include "spec/task_graph.hpp"
#include "workload/transformer.hpp"

#include "physics_test_util.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

using namespace zerosim;
using spec::Task;
using spec::TaskGraph;
using spec::TaskKind;
using namespace zerosim::physics_test;

namespace {

/// The figures of an inline node the tests read back (4 GPUs, no NVLink).
struct NodeFigures {
  std::string pcie = "25 GB/s";
  int gpus_per_switch = 2;
  std::string uplink = "25 GB/s";
  std::string dram = "300 GB/s";
  std::string nvme = "{devices: 0}";
};

std::string node_yaml(const NodeFigures& f)
{
  return "  node:\n"
         "    name: offload test node\n"
         "    gpu: {model: A100-SXM4-80GB, memory: 80 GiB, memory_bandwidth: 2039 GB/s, peak: {bf16: 312 TFLOPS}}\n"
         "    gpus: 4\n"
         "    pcie: {bandwidth: " +
         f.pcie + ", gpus_per_switch: " + std::to_string(f.gpus_per_switch) + ", switch_uplink: " + f.uplink +
         ", latency: 1 us}\n"
         "    cpu: {sockets: 2, cores: 64, memory: 1 TiB, memory_bandwidth: " +
         f.dram +
         "}\n"
         "    nvme: " +
         f.nvme +
         "\n"
         "    nics: {count: 1, bandwidth: 200 Gbps}\n";
}

/// An NVMe task as the schedule makes it: its request waves counted from the scenario's aio block.
Task nvme_task(const spec::Scenario& s, const std::string& name, std::int64_t bytes, bool write)
{
  Task t;
  t.kind = write ? TaskKind::NVME_WRITE : TaskKind::NVME_READ;
  t.stream = spec::Stream::NVME;
  t.name = name;
  t.bytes = bytes;
  t.request_waves = schedule::detail::aio_request_waves(s.deepspeed.aio, bytes);
  return t;
}

Task all_gather_task(std::int64_t bytes, int group_size, spec::CommGroup group = spec::CommGroup::WORLD)
{
  return collective_task("allgather", spec::CollectiveKind::ALL_GATHER, bytes, group, group_size);
}

constexpr double PCIE_LATENCY_S = 1e-6; // the node's pcie.latency above: the first-byte delay of every PCIe flow
constexpr std::int64_t GB = 1'000'000'000;

} // namespace

TEST_CASE("two GPUs behind one PCIe switch share its uplink, GPUs on different switches do not")
{
  // GPU links of B = 25 GB/s, an uplink of U = 32 GB/s < 2B, two GPUs per switch (GPUs 0, 1 on switch 0; 2, 3
  // on switch 1). Two H2D copies of S bytes at once:
  //   same switch:       each gets U/2 (the uplink is the bottleneck): T = latency + 2S/U
  //   different switches: each has its own uplink:                    T = latency + S/min(B, U)
  NodeFigures f;
  f.uplink = "32 GB/s";
  const spec::Scenario s = load(node_yaml(f) + "  nodes: 1\n  gpus_per_node: 4\n", TRAIN);
  const double B = s.cluster.node.pcie.bandwidth_Bps, U = s.cluster.node.pcie.switch_uplink_Bps;
  REQUIRE(U < 2 * B);
  const std::int64_t S = GB;
  const auto h2d = spec::CopyDirection::H2D;

  const engine::Timeline same = engine::simulate_graphs(
      s, EMPTY,
      {graph_of({copy_task("h2d.0", S, h2d)}), graph_of({copy_task("h2d.1", S, h2d)}), graph_of({}), graph_of({})});
  const double t_same = PCIE_LATENCY_S + 2.0 * static_cast<double>(S) / U;
  CHECK(task_time(same, 0, 0) == doctest::Approx(t_same).epsilon(1e-6));
  CHECK(task_time(same, 1, 0) == doctest::Approx(t_same).epsilon(1e-6));

  const engine::Timeline apart = engine::simulate_graphs(
      s, EMPTY,
      {graph_of({copy_task("h2d.0", S, h2d)}), graph_of({}), graph_of({copy_task("h2d.2", S, h2d)}), graph_of({})});
  const double t_apart = PCIE_LATENCY_S + static_cast<double>(S) / std::min(B, U);
  CHECK(task_time(apart, 0, 0) == doctest::Approx(t_apart).epsilon(1e-6));
  CHECK(task_time(apart, 2, 0) == doctest::Approx(t_apart).epsilon(1e-6));
  CHECK(t_apart < t_same);
}

TEST_CASE("inter-node traffic into a GPU slows a parameter fetch into it by the max-min share of its PCIe link")
{
  // Two nodes of one GPU each, the NIC on GPU 0's switch (NIC N = 80 Gb/s = 10 GB/s per direction), GPU link
  // B = 25 GB/s, uplink U = 25 GB/s. An H2D copy of S bytes into GPU 0 (route: DRAM, uplink DOWN, GPU link DOWN):
  //   alone:                     T = latency + S / min(B, U)
  //   beside an all-gather whose inbound flow crosses NIC DOWN and the same GPU link DOWN (GPU -> NIC and
  //   NIC -> GPU are peer-to-peer through the switch, no uplink), max-min on the GPU link gives the inbound
  //   flow r_in = min(N, B/2) and the copy r = min(U, B - r_in), so T = latency + S / r
  //   (the all-gather's outbound flow goes UP the GPU link and shares nothing with the copy).
  NodeFigures f;
  const spec::Scenario s = load(
      node_yaml(f) + "  nodes: 2\n  gpus_per_node: 1\n  network: {nic_bandwidth: 80 Gbps, nics_per_node: 1}\n", TRAIN);
  const double B = s.cluster.node.pcie.bandwidth_Bps, U = s.cluster.node.pcie.switch_uplink_Bps;
  const double N = s.cluster.network.nic_bandwidth_Bps;
  const std::int64_t S = GB;
  const auto h2d = spec::CopyDirection::H2D;

  const engine::Timeline alone = engine::simulate_graphs(s, EMPTY, {graph_of({copy_task("fetch", S, h2d)})});
  const double t_alone = PCIE_LATENCY_S + static_cast<double>(S) / std::min(B, U);
  CHECK(task_time(alone, 0, 0) == doctest::Approx(t_alone).epsilon(1e-6));

  // The all-gather (20 GB: its inbound flow of 10 GB at r_in lasts ~1 s) outlasts the copy, so the shares hold
  // for the whole copy.
  const engine::Timeline busy =
      engine::simulate_graphs(s, EMPTY, {graph_of({all_gather_task(20 * GB, 2), copy_task("fetch", S, h2d)})});
  const double r_in = std::min(N, B / 2);
  const double r = std::min(U, B - r_in);
  REQUIRE(busy.ranks[0].times[0].end > busy.ranks[0].times[1].end);
  CHECK(task_time(busy, 0, 1) == doctest::Approx(PCIE_LATENCY_S + static_cast<double>(S) / r).epsilon(1e-4));
  CHECK(task_time(busy, 0, 1) > t_alone * 1.5); // 15 GB/s against 25 GB/s
}

TEST_CASE("traffic from a NIC on another switch climbs the NIC's uplink and descends the GPU's")
{
  // One GPU per switch (GPU 0 on switch 0, GPU 1 on switch 1), one NIC on switch 0 (N = 100 Gb/s = 12.5 GB/s),
  // B = U = 25 GB/s. An all-gather over the inter-node groups (each GPU with its peer on the other node) at the
  // same time as an H2D copy into GPU 0 (DRAM, uplink 0 DOWN, GPU link 0 DOWN). The flows and their routes:
  //   into GPU 0:    NIC DOWN, GPU link 0 DOWN
  //   into GPU 1:    NIC DOWN, uplink 0 UP, uplink 1 DOWN, GPU link 1 DOWN   (up from the NIC's switch)
  //   out of GPU 0:  GPU link 0 UP, NIC UP
  //   out of GPU 1:  GPU link 1 UP, uplink 1 UP, uplink 0 DOWN, NIC UP
  // Max-min: the NIC saturates first in each direction, each inter-node flow gets r = N/2; the copy gets
  // min(U - r (beside "out of GPU 1" on uplink 0 DOWN), B - r (beside "into GPU 0" on GPU link 0 DOWN)).
  // (Were the inbound flow into GPU 1 routed DOWN uplink 0, the copy would get only U - 2r.)
  NodeFigures f;
  f.gpus_per_switch = 1;
  const spec::Scenario s = load(
      node_yaml(f) + "  nodes: 2\n  gpus_per_node: 2\n  network: {nic_bandwidth: 100 Gbps, nics_per_node: 1}\n", TRAIN);
  const double B = s.cluster.node.pcie.bandwidth_Bps, U = s.cluster.node.pcie.switch_uplink_Bps;
  const double N = s.cluster.network.nic_bandwidth_Bps;
  const std::int64_t S = GB;
  const auto inter = spec::CommGroup::INTER_NODE;
  const engine::Timeline tl = engine::simulate_graphs(
      s, EMPTY,
      {graph_of({all_gather_task(20 * GB, 2, inter), copy_task("fetch", S, spec::CopyDirection::H2D)}),
       graph_of({all_gather_task(20 * GB, 2, inter)})});
  REQUIRE(tl.ranks[0].times[0].end > tl.ranks[0].times[1].end);
  const double r = N / 2;
  const double copy_rate = std::min(U - r, B - r);
  CHECK(task_time(tl, 0, 1) == doctest::Approx(PCIE_LATENCY_S + static_cast<double>(S) / copy_rate).epsilon(1e-4));
}

namespace {

/// The aio formula of docs/engine.md "NVMe": waves = ceil(S / (block_size · queue_depth · threads)); then the
/// PCIe route's latency; then one flow of S over the volume's media link (d drives at rate D) and its PCIe
/// link of d x max(read, write): the narrower bounds it (max-min).
double nvme_expected(const spec::Scenario& s, std::int64_t S, bool write)
{
  const spec::NvmeSpec& nv = s.cluster.node.nvme;
  const spec::AioSpec& aio = s.deepspeed.aio;
  const double per_wave =
      static_cast<double>(aio.block_size) * aio.queue_depth * static_cast<double>(aio.intra_op_parallelism);
  const double waves = std::ceil(static_cast<double>(S) / per_wave);
  const double L = write ? nv.write_latency_s : nv.read_latency_s;
  const double d = nv.devices;
  const double disk = static_cast<double>(S) / (d * (write ? nv.write_Bps : nv.read_Bps));
  const double pcie = static_cast<double>(S) / (d * std::max(nv.read_Bps, nv.write_Bps));
  return waves * L + PCIE_LATENCY_S + std::max(disk, pcie);
}

std::string nvme_node(int devices)
{
  NodeFigures f;
  f.nvme = "{devices: " + std::to_string(devices) + ", read: 7.0 GB/s, write: 3.8 GB/s, capacity: 3.84 TB}";
  return node_yaml(f) + "  nodes: 1\n  gpus_per_node: 1\n";
}

std::string aio_body(int queue_depth)
{
  return "training: {seq_len: 1024, micro_batch: 1, grad_accum: 1, precision: bf16}\n"
         "deepspeed: {zero_optimization: {stage: 0}, aio: {queue_depth: " +
         std::to_string(queue_depth) + "}}\n";
}

} // namespace

TEST_CASE("an NVMe read of S bytes takes its request waves plus S over the RAID-0 stripe of every drive")
{
  // T = ceil(S / (block_size · queue_depth · threads)) · L + latency + max(S/(d·R), S/(d·link)) with the node's
  // default read latency L (Micron 9200 datasheet, 92 us), aio defaults (1 MiB, 8, 1), d drives of R = 7 GB/s.
  const std::int64_t S = std::int64_t{1} << 30; // 1 GiB: 128 waves of 8 MiB
  const spec::Scenario two = load(nvme_node(2), aio_body(8));
  REQUIRE(two.cluster.node.nvme.read_latency_s == doctest::Approx(92e-6));
  REQUIRE(two.cluster.node.nvme.write_latency_s == doctest::Approx(21e-6));
  const double t_read =
      task_time(engine::simulate_graphs(two, EMPTY, {graph_of({nvme_task(two, "r", S, false)})}), 0, 0);
  CHECK(t_read == doctest::Approx(nvme_expected(two, S, false)).epsilon(1e-6));
  const double t_write =
      task_time(engine::simulate_graphs(two, EMPTY, {graph_of({nvme_task(two, "w", S, true)})}), 0, 0);
  CHECK(t_write == doctest::Approx(nvme_expected(two, S, true)).epsilon(1e-6));

  // Striping: one GPU sees the aggregate bandwidth of every drive, so one drive is slower by S/R - S/(2R).
  const spec::Scenario one = load(nvme_node(1), aio_body(8));
  const double t_one =
      task_time(engine::simulate_graphs(one, EMPTY, {graph_of({nvme_task(one, "r", S, false)})}), 0, 0);
  CHECK(t_one == doctest::Approx(nvme_expected(one, S, false)).epsilon(1e-6));
  CHECK(t_one - t_read == doctest::Approx(static_cast<double>(S) / 7e9 / 2).epsilon(1e-3));

  // A shallower queue: more waves, each paying L: 4x the waves at queue depth 2.
  const spec::Scenario shallow = load(nvme_node(2), aio_body(2));
  const double t_shallow =
      task_time(engine::simulate_graphs(shallow, EMPTY, {graph_of({nvme_task(shallow, "r", S, false)})}), 0, 0);
  CHECK(t_shallow == doctest::Approx(nvme_expected(shallow, S, false)).epsilon(1e-6));
  CHECK(t_shallow - t_read == doctest::Approx((512 - 128) * 92e-6).epsilon(1e-3));
  CHECK(t_shallow > t_read);
}

TEST_CASE("NVMe latency keys: units, defaults, errors")
{
  NodeFigures f;
  f.nvme = "{devices: 1, read: 7 GB/s, write: 3.8 GB/s, capacity: 1 TB, read_latency: 80 us, write_latency: 0 us}";
  const spec::Scenario s = load(node_yaml(f) + "  nodes: 1\n  gpus_per_node: 1\n", TRAIN);
  CHECK(s.cluster.node.nvme.read_latency_s == doctest::Approx(80e-6));
  CHECK(s.cluster.node.nvme.write_latency_s == 0);
  // No request latency, no waves: an NVMe write is its PCIe latency and its transfer alone.
  const std::int64_t S = GB;
  const double t = task_time(engine::simulate_graphs(s, EMPTY, {graph_of({nvme_task(s, "w", S, true)})}), 0, 0);
  CHECK(t == doctest::Approx(PCIE_LATENCY_S + static_cast<double>(S) / 3.8e9).epsilon(1e-6));
  for (const char* bad : {"read_latency: -5 us", "read_latency: 5", "write_latency: 3 GB/s"}) {
    CAPTURE(bad);
    f.nvme = std::string("{devices: 1, read: 7 GB/s, write: 3.8 GB/s, capacity: 1 TB, ") + bad + "}";
    CHECK_THROWS_AS(load(node_yaml(f) + "  nodes: 1\n  gpus_per_node: 1\n", TRAIN), core::InputError);
  }
}

namespace {

double nvme_offload_step(bool pipeline_read, bool pipeline_write)
{
  // ZeRO-3 with the optimizer on NVMe: a 1B model (ZeRO-Offload paper, 20 x 2048) on one GPU of a DGX A100
  // (8 NVMe drives), sub-groups of 5e7 elements (about 20 of them, each a read, CPU Adam, a write), 12 swap
  // buffers (enough for both pipelines: 4 x (1 + 1 + 1), docs/deepspeed-schedule.md §7).
  const std::string body = std::string("training: {seq_len: 1024, micro_batch: 1, grad_accum: 1, precision: bf16, "
                                       "activation_checkpointing: full}\n"
                                       "deepspeed:\n  zero_optimization:\n    stage: 3\n    sub_group_size: 5.0e7\n"
                                       "    offload_optimizer: {device: nvme, nvme_path: /raid, buffer_count: 12, "
                                       "pipeline_read: ") +
                           (pipeline_read ? "true" : "false") +
                           ", pipeline_write: " + (pipeline_write ? "true" : "false") + "}\n";
  const std::string text = "name: nvme-pipeline\nmodel: zero-offload-1b\ncluster:\n  node: dgx-a100-80gb\n  nodes: 1\n"
                           "  gpus_per_node: 1\n" +
                           body;
  const spec::Scenario s =
      config::load_scenario_text(text, std::string(ZEROSIM_SOURCE_DIR) + "/scenarios/nvme-pipeline-test.yaml");
  const workload::Workload w = workload::build_workload(s.model, workload::workload_options(s));
  return run::simulate_step(s, w).step_time_s;
}

} // namespace

TEST_CASE("pipelining NVMe reads and writes never makes a step slower")
{
  // pipeline_read overlaps sub-group i+1's read with i's CPU Adam; pipeline_write lets i's write run during
  // i+1's step (docs/deepspeed-schedule.md §7). Each only removes host waits, so each variant <= the unpipelined step.
  const double none = nvme_offload_step(false, false);
  const double read = nvme_offload_step(true, false);
  const double write = nvme_offload_step(false, true);
  const double both = nvme_offload_step(true, true);
  MESSAGE("step: none " << none << " s, read " << read << " s, write " << write << " s, both " << both << " s");
  CHECK(read <= none * (1 + 1e-9));
  CHECK(write <= none * (1 + 1e-9));
  CHECK(both <= read * (1 + 1e-9));
  CHECK(both <= write * (1 + 1e-9));
  CHECK(both < none);
}

TEST_CASE("a pinned copy is never slower than a pageable one, and faster when DRAM is the bottleneck")
{
  // Pageable = the same DMA flow plus the driver's staging memcpy, 2S of DRAM traffic at the same time
  // (docs/engine.md "COPY"); the task ends when both end.
  const std::int64_t S = GB;
  const auto h2d = spec::CopyDirection::H2D;
  {
    // Alone on a 300 GB/s DRAM: the staging flow (2S) runs beside the DMA (25 GB/s) at 275 GB/s and ends
    // first, so both take latency + S/B.
    NodeFigures f;
    const spec::Scenario s = load(node_yaml(f) + "  nodes: 1\n  gpus_per_node: 1\n", TRAIN);
    const double B = s.cluster.node.pcie.bandwidth_Bps;
    const double pinned =
        task_time(engine::simulate_graphs(s, EMPTY, {graph_of({copy_task("c", S, h2d, true)})}), 0, 0);
    const double pageable =
        task_time(engine::simulate_graphs(s, EMPTY, {graph_of({copy_task("c", S, h2d, false)})}), 0, 0);
    CHECK(pinned == doctest::Approx(PCIE_LATENCY_S + static_cast<double>(S) / B).epsilon(1e-6));
    CHECK(pageable == doctest::Approx(pinned).epsilon(1e-6));
    CHECK(pinned <= pageable);
  }
  {
    // DRAM of M = 30 GB/s shared with CPU Adam's traffic (28 B per element of 1e9 elements: 28 GB, it outlasts
    // the copy). Pinned: DMA and Adam share M: r = M/2 = 15 GB/s (< B), T = S / (M/2).
    // Pageable: DMA, staging and Adam share M: M/3 each until the DMA's S are done (S / (M/3)), then staging
    // and Adam M/2 each for the staging's remaining 2S - S = S: T = S/(M/3) + S/(M/2).
    NodeFigures f;
    f.dram = "30 GB/s";
    const spec::Scenario s = load(node_yaml(f) + "  nodes: 1\n  gpus_per_node: 1\n", TRAIN);
    const double M = s.cluster.node.cpu.memory_bandwidth_Bps;
    const auto Sd = static_cast<double>(S);
    // The copy runs on the compute stream so that it starts beside the CPU task (host stream) at time 0.
    auto copy_beside = [&](bool is_pinned) {
      Task c = copy_task("c", S, h2d, is_pinned);
      c.stream = spec::Stream::COMPUTE;
      const engine::Timeline tl = engine::simulate_graphs(s, EMPTY, {graph_of({cpu_adam_task(1'000'000'000), c})});
      REQUIRE(tl.ranks[0].times[0].end > tl.ranks[0].times[1].end); // the DRAM traffic outlasts the copy
      return task_time(tl, 0, 1);
    };
    const double pinned = copy_beside(true), pageable = copy_beside(false);
    CHECK(pinned == doctest::Approx(PCIE_LATENCY_S + Sd / (M / 2)).epsilon(1e-4));
    CHECK(pageable == doctest::Approx(PCIE_LATENCY_S + Sd / (M / 3) + Sd / (M / 2)).epsilon(1e-4));
    CHECK(pinned < pageable);
  }
}
