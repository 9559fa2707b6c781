// Physics of the replay: every expected value comes from a formula stated beside it,
// evaluated from the node's own figures. Hand-made graphs isolate one mechanism; whole scenarios check the
// monotonic properties a user relies on.
#include "collectives/nccl.hpp"
#include "config/scenario_loader.hpp"
#include "engine/engine.hpp"
#include "metrics/run_metrics.hpp"
#include "run/run_scenario.hpp"
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

/// A node whose figures the tests read back: 4 GPUs, 2 per PCIe switch.
std::string node_yaml(const std::string& extra_cpu = "memory_bandwidth: 300 GB/s", const std::string& nvlink = "")
{
  return "  node:\n"
         "    name: test node\n"
         "    gpu: {model: A100-SXM4-80GB, memory: 80 GiB, memory_bandwidth: 2039 GB/s, peak: {bf16: 312 TFLOPS}}\n"
         "    gpus: 4\n" +
         (nvlink.empty() ? std::string() : "    nvlink: {" + nvlink + "}\n") +
         "    pcie: {bandwidth: 25 GB/s, gpus_per_switch: 2, switch_uplink: 25 GB/s, latency: 1 us}\n"
         "    cpu: {sockets: 2, cores: 64, memory: 1 TiB, " +
         extra_cpu +
         "}\n"
         "    nics: {count: 2, bandwidth: 200 Gbps}\n";
}

} // namespace

TEST_CASE("one transfer takes latency + size / bandwidth")
{
  // GPU 0 -> host memory: the GPU's PCIe link (25 GB/s, 1 us), its switch uplink (25 GB/s), DRAM (300 GB/s):
  // the bottleneck is 25 GB/s, the latency the GPU link's 1 us. 1 GB: 1e-6 + 1e9 / 25e9 = 0.040001 s.
  const spec::Scenario s = load(node_yaml() + "  nodes: 1\n  gpus_per_node: 1\n", TRAIN);
  std::vector<TaskGraph> g{graph_of({copy_task("d2h", 1'000'000'000, spec::CopyDirection::D2H)})};
  const engine::Timeline tl = engine::simulate_graphs(s, EMPTY, g);
  CHECK(task_time(tl, 0, 0) == doctest::Approx(1e-6 + 1e9 / 25e9).epsilon(1e-6));
}

TEST_CASE("two transfers sharing a link take twice as long")
{
  // GPUs 0 and 1 share one switch uplink of 25 GB/s: each gets 12.5 GB/s, so 1 GB takes 1e-6 + 1e9 / 12.5e9.
  const spec::Scenario s = load(node_yaml() + "  nodes: 1\n  gpus_per_node: 2\n", TRAIN);
  std::vector<TaskGraph> g{graph_of({copy_task("d2h.0", 1'000'000'000, spec::CopyDirection::D2H)}),
                           graph_of({copy_task("d2h.1", 1'000'000'000, spec::CopyDirection::D2H)})};
  const engine::Timeline tl = engine::simulate_graphs(s, EMPTY, g);
  CHECK(task_time(tl, 0, 0) == doctest::Approx(1e-6 + 1e9 / 12.5e9).epsilon(1e-6));
  CHECK(task_time(tl, 1, 0) == doctest::Approx(1e-6 + 1e9 / 12.5e9).epsilon(1e-6));
  // Opposite directions do not share a split-duplex PCIe link: H2D beside D2H keeps 25 GB/s each.
  std::vector<TaskGraph> g2{graph_of({copy_task("d2h.0", 1'000'000'000, spec::CopyDirection::D2H)}),
                            graph_of({copy_task("h2d.1", 1'000'000'000, spec::CopyDirection::H2D)})};
  const engine::Timeline tl2 = engine::simulate_graphs(s, EMPTY, g2);
  CHECK(task_time(tl2, 0, 0) == doctest::Approx(1e-6 + 1e9 / 25e9).epsilon(1e-6));
}

TEST_CASE("a ring all-reduce of S bytes over N ranks at bandwidth B takes 2(N-1)/N S/B plus latency")
{
  // One node, 4 GPUs on NVLink at B = 100 GB/s per direction (latency 1 us per link): one ring, every edge one
  // flow of 2(N-1)/N S bytes at B; the latency is the route's (2 x 1 us) plus the plan's per-step remainder.
  const spec::Scenario s =
      load(node_yaml("memory_bandwidth: 300 GB/s", "bandwidth: 100 GB/s, latency: 1 us") + "  nodes: 1\n", TRAIN);
  const std::int64_t S = 4'000'000'000;
  const int N = 4;
  std::vector<TaskGraph> g;
  for (int r = 0; r < N; ++r) {
    Task t;
    t.kind = TaskKind::COLLECTIVE;
    t.stream = spec::Stream::COMPUTE;
    t.name = "allreduce";
    t.collective = spec::CollectiveKind::ALL_REDUCE;
    t.bytes = S;
    t.group_size = N;
    g.push_back(graph_of({t}));
  }
  collectives::Fabric f;
  f.nodes = 1;
  f.gpus_per_node = N;
  f.nics_per_node = 2;
  f.intra_Bps = 100e9;
  f.intra_latency_s = 2e-6;
  f.inter_Bps = 25e9;
  f.inter_latency_s = 5e-6;
  const collectives::Plan p = collectives::plan(spec::CollectiveKind::ALL_REDUCE, S, f);
  REQUIRE(p.phases.size() == 1);
  // The flows run at NCCL's achieved NVLink bus bandwidth, not line rate (docs/collectives.md "Achieved bus
  // bandwidth"; a 4 GB all-reduce takes the Simple protocol, factor 1).
  REQUIRE(p.protocol == collectives::Protocol::SIMPLE);
  const double bandwidth_term =
      2.0 * (N - 1) / N * static_cast<double>(S) / (collectives::NVLINK_BUSBW_FRACTION * 100e9);
  const double latency_term = 2e-6 + p.phases[0].latency_s;
  const engine::Timeline tl = engine::simulate_graphs(s, EMPTY, g);
  for (std::size_t r = 0; r < static_cast<std::size_t>(N); ++r)
    CHECK(task_time(tl, r, 0) == doctest::Approx(bandwidth_term + latency_term).epsilon(1e-6));
  CHECK(latency_term > 0);
}

TEST_CASE("CPU Adam grows with parameters per node, shrinks with DRAM bandwidth, and DMA into host memory slows it")
{
  // A DRAM-bound host: 64 cores but 20 GB/s of DRAM, so 28 B/element of traffic bounds the step.
  const std::string slow_dram = node_yaml("memory_bandwidth: 20 GB/s");
  const spec::Scenario s1 = load(slow_dram + "  nodes: 1\n  gpus_per_node: 1\n", TRAIN);
  const double t_1g = task_time(engine::simulate_graphs(s1, EMPTY, {graph_of({cpu_adam_task(1'000'000'000)})}), 0, 0);
  const double t_2g = task_time(engine::simulate_graphs(s1, EMPTY, {graph_of({cpu_adam_task(2'000'000'000)})}), 0, 0);
  CHECK(t_2g > t_1g);
  // DRAM-bound: 28e9 B / 20 GB/s = 1.4 s (the cores alone would take less).
  CHECK(t_1g == doctest::Approx(28e9 / 20e9).epsilon(1e-3));

  // More DRAM bandwidth: never slower, and faster here.
  const spec::Scenario fast = load(node_yaml("memory_bandwidth: 40 GB/s") + "  nodes: 1\n  gpus_per_node: 1\n", TRAIN);
  const double t_fast =
      task_time(engine::simulate_graphs(fast, EMPTY, {graph_of({cpu_adam_task(1'000'000'000)})}), 0, 0);
  CHECK(t_fast < t_1g);

  // Parameters per node: two ranks of one node stepping 1e9 elements each share the DRAM: twice the time.
  const spec::Scenario s2 = load(slow_dram + "  nodes: 1\n  gpus_per_node: 2\n", TRAIN);
  const engine::Timeline two = engine::simulate_graphs(
      s2, EMPTY, {graph_of({cpu_adam_task(1'000'000'000)}), graph_of({cpu_adam_task(1'000'000'000)})});
  CHECK(task_time(two, 0, 0) == doctest::Approx(2 * 28e9 / 20e9).epsilon(1e-3));

  // DMA into host memory crosses the same DRAM link: a 10 GB D2H copy of the other rank slows the step.
  const engine::Timeline dma =
      engine::simulate_graphs(s2, EMPTY,
                              {graph_of({cpu_adam_task(1'000'000'000)}),
                               graph_of({copy_task("d2h", 10'000'000'000, spec::CopyDirection::D2H)})});
  CHECK(task_time(dma, 0, 0) > t_1g * 1.05);
}

TEST_CASE("CPU Adam on the DGX-2 host against the ZeRO-Offload paper's measured latencies")
{
  // Ren et al. 2021 (ZeRO-Offload), Table 4: DeepSpeedCPUAdam on a DGX-2 host (2 x Xeon Platinum 8168, 48
  // cores) takes 0.22 / 0.51 / 1.03 / 2.41 s for 1 / 2 / 4 / 8 B parameters (docs/deepspeed-schedule.md §9.2). The
  // engine runs the CPU_COMPUTE task on the modelled CPU and DRAM link; the single per-core rate of compute_model is
  // fitted to these four points, so each is within the 17 % docs/compute.md derives for one constant.
  const spec::Scenario s = load("  node: dgx-2\n  nodes: 1\n  gpus_per_node: 1\n",
                                "training: {seq_len: 1024, micro_batch: 1, grad_accum: 1, precision: fp16}\n"
                                "deepspeed: {zero_optimization: {stage: 0}}\n");
  const double params[] = {1e9, 2e9, 4e9, 8e9};
  const double measured[] = {0.22, 0.51, 1.03, 2.41};
  for (int i = 0; i < 4; ++i) {
    CAPTURE(params[i]);
    const auto e = static_cast<std::int64_t>(params[i]);
    const double t = task_time(engine::simulate_graphs(s, EMPTY, {graph_of({cpu_adam_task(e)})}), 0, 0);
    CHECK(std::abs(t - measured[i]) / measured[i] < 0.17);
  }
}

namespace {

spec::Scenario small_job(int stage, const std::string& extra_ds = "", int grad_accum = 1, int nodes = 1,
                         const std::string& nic = "200 Gbps")
{
  const std::string cluster = "  node: dgx-a100-80gb\n  nodes: " + std::to_string(nodes) +
                              "\n  gpus_per_node: 4\n  network: {nic_bandwidth: " + nic + ", nics_per_node: 2}\n";
  const std::string body = "training: {seq_len: 1024, micro_batch: 1, grad_accum: " + std::to_string(grad_accum) +
                           ", precision: bf16, activation_checkpointing: full}\n"
                           "deepspeed: {zero_optimization: {stage: " +
                           std::to_string(stage) + extra_ds + "}}\n";
  spec::Scenario s = load(cluster, body);
  return s;
}

struct Run {
  engine::Timeline t;
  metrics::RunMetrics m;
};

Run replay_step(const spec::Scenario& s, const run::RunOptions& o = {})
{
  const workload::Workload w = workload::build_workload(s.model, workload::workload_options(s));
  Run r;
  r.t = run::simulate_step(s, w, o);
  r.m = metrics::compute_metrics(s, w, r.t);
  return r;
}

} // namespace

TEST_CASE("overlap_comm never raises exposed communication")
{
  // Llama-2-7B on 4 GPUs, stages 1, 2 and 3: with overlap_comm the reductions run on their own stream beside
  // the backward; without it they block the compute stream. Exposed communication can only shrink.
  for (int stage : {1, 2, 3}) {
    CAPTURE(stage);
    const Run off = replay_step(small_job(stage, ", overlap_comm: false"));
    const Run on = replay_step(small_job(stage, ", overlap_comm: true"));
    CHECK(on.m.breakdown.exposed_comm <= off.m.breakdown.exposed_comm + 1e-9);
    CHECK(on.m.step_time_s <= off.m.step_time_s + 1e-9);
  }
}

TEST_CASE("the first stage-3 micro-step is slower than the later ones")
{
  // docs/deepspeed-schedule.md §5.2: the run's first micro-step records the trace and fetches every module on demand,
  // blocking, with no prefetch; later micro-steps prefetch along the recorded trace. Interference off: micro-step 1's
  // kernels also lose SMs to the collectives they now overlap (prefetches, micro-step 0's trailing
  // reduce-scatters), which is the point of prefetching but not of this test (docs/engine.md "Interference").
  spec::Scenario s = small_job(3, "", 2);
  s.mechanisms.interference = false;
  run::RunOptions o;
  o.step.first_step = true;
  const Run r = replay_step(s, o);
  const auto& rk = r.t.ranks[0];
  double mb_end[2] = {0, 0}, mb_start[2] = {1e30, 1e30};
  for (std::size_t i = 0; i < rk.graph.tasks.size(); ++i) {
    const int mb = rk.graph.tasks[i].micro_step;
    if (mb < 0 || mb > 1 || rk.graph.tasks[i].kind != TaskKind::COMPUTE)
      continue;
    mb_start[mb] = std::min(mb_start[mb], rk.times[i].start);
    mb_end[mb] = std::max(mb_end[mb], rk.times[i].end);
  }
  CHECK(mb_end[0] - mb_start[0] > mb_end[1] - mb_start[1]);
}

TEST_CASE("stage-3 prefetching still pays with interference on")
{
  // The test above turns interference off; this one keeps it on. A prefetched all-gather overlaps the compute before
  // the module that needs it, and interference slows that compute by up to 1 / (1 - s) (s = 24 / 108 of an A100's
  // SMs, docs/engine.md "Interference"); a blocking fetch instead leaves the GPU idle for the whole gather
  // (docs/deepspeed-schedule.md §5.3). Prefetching must still shorten the step. stage3_prefetch_bucket_size 0 turns it
  // off: the prefetcher's budget is min(max_live - available, bucket size) elements (stage3.cpp).
  for (int nodes : {1, 2}) {
    CAPTURE(nodes);
    const spec::Scenario on = small_job(3, "", 2, nodes);
    const spec::Scenario off = small_job(3, ", stage3_prefetch_bucket_size: 0", 2, nodes);
    REQUIRE(on.mechanisms.interference);
    REQUIRE(off.deepspeed.zero.stage3_prefetch_bucket_size == 0);
    const Run with = replay_step(on);
    const Run without = replay_step(off);
    CHECK(with.m.step_time_s < without.m.step_time_s);
    // ... while interference does act on the prefetched step (its compute overlaps the gathers).
    spec::Scenario quiet = on;
    quiet.mechanisms.interference = false;
    CHECK(replay_step(quiet).m.step_time_s < with.m.step_time_s);
  }
}

TEST_CASE("peak GPU memory orders stage 0 >= 1 >= 2 >= 3 when model states dominate (7B on 8 GPUs)")
{
  // 16 B/param of mixed-precision Adam state: stage 0 keeps all of it, 1 partitions the optimizer, 2 also the
  // gradients, 3 also the parameters (ZeRO paper §5, Fig. 1).
  std::int64_t prev = -1;
  for (int stage : {0, 1, 2, 3}) {
    CAPTURE(stage);
    const spec::Scenario s = load("  node: dgx-a100-80gb\n  nodes: 1\n",
                                  "training: {seq_len: 1024, micro_batch: 1, grad_accum: 1, precision: bf16, "
                                  "activation_checkpointing: full}\n"
                                  "deepspeed: {zero_optimization: {stage: " +
                                      std::to_string(stage) + "}}\n");
    const Run r = replay_step(s);
    if (prev >= 0)
      CHECK(r.m.memory.gpu <= prev);
    prev = r.m.memory.gpu;
  }
}

TEST_CASE("more NIC bandwidth never slows a step")
{
  // With NCCL's protocols (docs/collectives.md "Protocols") the (algorithm, protocol) of each collective is chosen
  // from NCCL's own time estimate, not from the simulated time: a faster NIC can switch a collective to a choice the
  // contention model finds a few microseconds slower (NCCL's tuner mispredicts the same way), hence 1e-4 relative.
  // With one protocol (Simple, the ablation `--without protocols`) the choice cannot flip that way and the step is
  // monotone to 1e-9.
  for (const auto& [protocols, tolerance] : {std::pair{true, 1e-4}, std::pair{false, 1e-9}}) {
    CAPTURE(protocols);
    double prev = 1e30;
    for (const char* nic : {"50 Gbps", "100 Gbps", "200 Gbps", "400 Gbps"}) {
      CAPTURE(nic);
      spec::Scenario s = small_job(3, "", 1, 2, nic);
      s.mechanisms.nccl_protocols = protocols;
      const Run r = replay_step(s);
      CHECK(r.m.step_time_s <= prev * (1 + tolerance));
      prev = r.m.step_time_s;
    }
  }
}

TEST_CASE("the time breakdown sums to the step time")
{
  for (int stage : {0, 2, 3}) {
    CAPTURE(stage);
    const Run r = replay_step(small_job(stage, "", 2, 2));
    CHECK(r.m.breakdown.sum() == doctest::Approx(r.m.step_time_s).epsilon(1e-9));
  }
}
