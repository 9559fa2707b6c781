// Offload placements: PCIe and NVMe volumes (docs/deepspeed-schedule.md §3.6, §6.1, §6.2, §7) and host
// residency (§10.1), read from the task graph.
#include "schedule_test_util.hpp"

#include <doctest/doctest.h>

using namespace zerosim;
using namespace zerosim::schedule;
using namespace zerosim::schedule::test;

TEST_SUITE("schedule")
{
  TEST_CASE("offload: stage 2 + cpu optimizer, g = 1: D2H 4P of fp32 grads, H2D 2P of lp params at the step")
  {
    // N = 2, 4 tensors of 1000: Ψ_pad = 4000, P = 2000, rank 0 owns tensors 0-1 exactly (P_in = P).
    const std::int64_t p = 2000;
    const auto w = synthetic(2, {{"a.weight", 1000}, {"b.weight", 1000}});
    spec::Scenario s = scenario(2, 2, 1);
    s.deepspeed.zero.offload_optimizer.device = spec::OffloadDevice::CPU;
    const TaskGraph gr = build_step_graph(s, w, 0);
    // §3.6 "Per-step PCIe traffic", g = 1: D2H 4P (fp32 grads) + H2D 2P (updated lp params).
    CHECK(copies(gr, CopyDirection::D2H, Phase::GRAD_REDUCE) == 4 * p);
    CHECK(copies(gr, CopyDirection::H2D, Phase::GRAD_REDUCE) == 0);
    CHECK(copies(gr, CopyDirection::H2D, Phase::OPTIMIZER) == 2 * p);
    // CPU Adam over P on the host, 28 B/elem (§9.1).
    const int adam = find_task(gr, "step.cpu_adam");
    REQUIRE(adam >= 0);
    CHECK(gr.tasks[static_cast<std::size_t>(adam)].kind == TaskKind::CPU_COMPUTE);
    CHECK(gr.tasks[static_cast<std::size_t>(adam)].stream == Stream::HOST);
    CHECK(gr.tasks[static_cast<std::size_t>(adam)].elements == p);
    CHECK(gr.tasks[static_cast<std::size_t>(adam)].mem_bytes == doctest::Approx(28.0 * p));
    // A node file's cpu.adam_bytes_per_param replaces the 28 (the GPU optimizer's traffic is not the node's CPU's).
    spec::Scenario node32 = s;
    node32.cluster.node.cpu.adam_bytes_per_param = 32;
    const TaskGraph g32 = build_step_graph(node32, w, 0);
    CHECK(g32.tasks[static_cast<std::size_t>(find_task(g32, "step.cpu_adam"))].mem_bytes == doctest::Approx(32.0 * p));
    // The post-step AG waits for the H2D (§3.6: CPU Adam -> H2D 2P -> AG(Ψ)).
    CHECK(collectives(gr, CollectiveKind::ALL_GATHER).bytes == 4000 * 2);
    // Host (§10.1 row "1/2 + offload cpu", g = 1): fp32 4P + fp32 grad 4P + m,v 8P + lp staging 2P
    // + temp_grad_buffer_for_cpu_offload (largest param 1000 x 2); GPU: lp 2Ψ + the GPU temp buffer.
    CHECK(resident_bytes(gr, Device::HOST) == 4 * p + 4 * p + 8 * p + 2 * p + 1000 * 2);
    CHECK(resident_bytes(gr, Device::GPU) == 2 * 4000 + 1000 * 2);
  }

  TEST_CASE("offload: stage 2 + cpu optimizer, g > 1 accumulates through the CPU every micro-step")
  {
    const std::int64_t p = 2000;
    const int g = 4;
    const auto w = synthetic(2, {{"a.weight", 1000}, {"b.weight", 1000}});
    spec::Scenario s = scenario(2, 2, g);
    s.deepspeed.zero.offload_optimizer.device = spec::OffloadDevice::CPU;
    const TaskGraph gr = build_step_graph(s, w, 0);
    // §3.6, g > 1: micro 0 D2H 2P_in; micro 1..g-1 H2D 2P_in + D2H 2P_in; boundary + D2H 4P; step H2D 2P.
    CHECK(copies(gr, CopyDirection::D2H, Phase::GRAD_REDUCE) == 2 * p + (g - 1) * 2 * p + 4 * p);
    CHECK(copies(gr, CopyDirection::H2D, Phase::GRAD_REDUCE) == (g - 1) * 2 * p);
    CHECK(copies(gr, CopyDirection::H2D, Phase::OPTIMIZER) == 2 * p);
    // 0.16 (§3.6, §14): the D2H back was skipped for micro-step > 0, and the step copies fp32 (4P).
    s.deepspeed_version = "0.16";
    s.deepspeed.zero.offload_optimizer.pin_memory = false;
    const TaskGraph old = build_step_graph(s, w, 0);
    CHECK(copies(old, CopyDirection::D2H, Phase::GRAD_REDUCE) == 2 * p + 4 * p);
    CHECK(copies(old, CopyDirection::H2D, Phase::OPTIMIZER) == 4 * p);
  }

  TEST_CASE("offload: stage 1 + cpu optimizer with g > 1 round-trips the zero accumulator at the boundary")
  {
    const std::int64_t p = 2000;
    const auto w = synthetic(2, {{"a.weight", 1000}, {"b.weight", 1000}});
    spec::Scenario s = scenario(1, 2, 3);
    s.deepspeed.zero.offload_optimizer.device = spec::OffloadDevice::CPU;
    const TaskGraph gr = build_step_graph(s, w, 0);
    // §3.6: at the boundary micro_step_id = g-1 > 0: H2D 2P_in + D2H 2P_in, plus the fp32 D2H 4P.
    CHECK(copies(gr, CopyDirection::H2D, Phase::GRAD_REDUCE) == 2 * p);
    CHECK(copies(gr, CopyDirection::D2H, Phase::GRAD_REDUCE) == 2 * p + 4 * p);
  }

  TEST_CASE("offload: a param straddling the partition boundary is accumulated whole by both ranks")
  {
    // 3 tensors of 1000, N = 2: Ψ_pad = 3000 (multiple of 4), P = 1500; the middle tensor straddles
    // [0,1500) and [1500,3000): P_in = 2000 on both ranks, the fp32 slice stays P = 1500.
    const auto w = synthetic(1, {{"a.weight", 1000}, {"b.weight", 1000}, {"c.weight", 1000}});
    spec::Scenario s = scenario(2, 2, 2);
    s.deepspeed.zero.offload_optimizer.device = spec::OffloadDevice::CPU;
    for (int rank : {0, 1}) {
      const TaskGraph gr = build_step_graph(s, w, rank);
      // micro 0 D2H 2·P_in, micro 1 H2D + D2H 2·P_in, boundary D2H 4P.
      CHECK(copies(gr, CopyDirection::D2H, Phase::GRAD_REDUCE) == 2 * 2000 + 2 * 2000 + 4 * 1500);
      CHECK(copies(gr, CopyDirection::H2D, Phase::GRAD_REDUCE) == 2 * 2000);
    }
  }

  TEST_CASE("offload: stage 3 + cpu optimizer moves D2H (2g+4)P and H2D 2gP in backward, H2D 2P at the step")
  {
    // 4 layers of 4000-element weights, N = 4: P = 4000 (no persistent params: threshold 0).
    const std::int64_t p = 4000;
    const int g = 3;
    const auto w = synthetic(4, {{"mlp.weight", 4000}});
    spec::Scenario s = scenario(3, 4, g);
    s.deepspeed.zero.stage3_param_persistence_threshold = 0;
    s.deepspeed.zero.offload_optimizer.device = spec::OffloadDevice::CPU;
    const TaskGraph gr = build_step_graph(s, w);
    // §6.1 with b_ga = 2: D2H (g·2 + 4)·P and H2D (g·2)·P per optimizer step.
    CHECK(copies(gr, CopyDirection::D2H, Phase::GRAD_REDUCE) == (2 * g + 4) * p);
    CHECK(copies(gr, CopyDirection::H2D, Phase::GRAD_REDUCE) == 2 * g * p);
    // Step: CPU Adam, then the fp32 (CPU) -> lp (GPU) copy_: a pageable H2D of P·b_lp (§6.1, unverified).
    CHECK(copies(gr, CopyDirection::H2D, Phase::OPTIMIZER) == 2 * p);
    bool pageable = false;
    for (const Task& t : gr.tasks)
      if (t.kind == TaskKind::COPY && t.phase == Phase::OPTIMIZER)
        pageable |= !t.pinned;
    CHECK(pageable);
    // Host (§10.1 row "3 + offload_optimizer cpu"): grad accumulation 2P + fp32 4P + fp32 grads 4P + m,v 8P.
    CHECK(resident_bytes(gr, Device::HOST) == 18 * p);
    // GPU: lp partition 2P + IPG bucket (5e8 x 2 bytes by default).
    CHECK(resident_bytes(gr, Device::GPU) == 2 * p + 500'000'000LL * 2);
  }

  TEST_CASE("offload: stage 3 + cpu params copies every gathered partition H2D inside the all-gather")
  {
    const std::int64_t p = 4000;
    const auto w = synthetic(4, {{"mlp.weight", 4000}});
    spec::Scenario s = scenario(3, 4, 2);
    s.deepspeed.zero.stage3_param_persistence_threshold = 0;
    s.deepspeed.zero.offload_optimizer.device = spec::OffloadDevice::CPU;
    s.deepspeed.zero.offload_param.device = spec::OffloadDevice::CPU;
    const TaskGraph gr = build_step_graph(s, w);
    // §6.2: H2D of each gathered partition (n/N·b_lp) = the fetch all-gather bytes / N, on the AG stream.
    std::int64_t ag = 0;
    for (const Task& t : gr.tasks)
      if (t.kind == TaskKind::COLLECTIVE && t.phase == Phase::PARAM_GATHER)
        ag += t.bytes;
    CHECK(copies(gr, CopyDirection::H2D, Phase::PARAM_GATHER) == ag / 4);
    for (const Task& t : gr.tasks)
      if (t.kind == TaskKind::COPY && t.phase == Phase::PARAM_GATHER)
        CHECK(t.stream == Stream::ALLGATHER);
    // The step's lp update is a CPU-only cast: no PCIe at the step (§6.2).
    CHECK(copies(gr, CopyDirection::H2D, Phase::OPTIMIZER) == 0);
    // Host (§10.1 row "3 + offload_param cpu + offload_optimizer cpu"): lp 2P (pinned) + 2P + 4P + 4P + 8P = 20P.
    CHECK(resident_bytes(gr, Device::HOST) == 20 * p);
  }

  TEST_CASE("offload: stage 3 + nvme optimizer reads 16P and writes 12P at the step, 4P of grads in backward")
  {
    // 8 layers of 4e6 elements, N = 4: P = 8e6, one sub-group of 8e6·4 bytes >= 1 MiB: swappable (§7).
    const std::int64_t p = 8'000'000;
    const auto w = synthetic(8, {{"mlp.weight", 4'000'000}});
    spec::Scenario s = scenario(3, 4, 2);
    s.deepspeed.zero.stage3_param_persistence_threshold = 0;
    s.deepspeed.zero.offload_optimizer.device = spec::OffloadDevice::NVME;
    const TaskGraph gr = build_step_graph(s, w);
    // §7 non-pipelined: read param, m, v (12P) + grads (4P); write param, m, v (12P); grads 4P at the boundary.
    CHECK(io_bytes(gr, TaskKind::NVME_READ, Phase::OPTIMIZER) == 16 * p);
    CHECK(io_bytes(gr, TaskKind::NVME_WRITE, Phase::OPTIMIZER) == 12 * p);
    CHECK(io_bytes(gr, TaskKind::NVME_WRITE, Phase::GRAD_REDUCE) == 4 * p);
    // On NVMe: fp32 param, m, v (12P) + fp32 grads (4P) (§10.1 row "3 + nvme optimizer").
    CHECK(resident_bytes(gr, Device::NVME) == 16 * p);
    // Host: grad accumulation 2P (pinned) + 4 pinned swap buffers of io_aligned(P) fp32 elements
    // (P = 8e6 is a multiple of 1024/4 = 256).
    CHECK(resident_bytes(gr, Device::HOST) == 2 * p + 4 * p * 4);
  }

  TEST_CASE("offload: Twin-Flow ratio picks CPU sub-groups from the end (0.19) or the start (0.16)")
  {
    // 4 sub-groups of 1000 partition elements; ratio 0.5: 0.19 puts i >= int(0.5·4) = 2 on the CPU,
    // 0.16 puts i < 2 on the CPU (§6.1, §13).
    const auto w = synthetic(4, {{"mlp.weight", 4000}});
    spec::Scenario s = scenario(3, 4, 1);
    s.deepspeed.zero.stage3_param_persistence_threshold = 0;
    s.deepspeed.zero.sub_group_size = 1000;
    s.deepspeed.zero.offload_optimizer.device = spec::OffloadDevice::CPU;
    s.deepspeed.zero.offload_optimizer.ratio = 0.5;
    for (std::string ver : {"0.19", "0.16"}) {
      s.deepspeed_version = ver;
      const TaskGraph gr = build_step_graph(s, w);
      const bool first_on_cpu = find_task(gr, "step.subgroup.0.cpu_adam") >= 0;
      const bool last_on_cpu = find_task(gr, "step.subgroup.3.cpu_adam") >= 0;
      CHECK(first_on_cpu == (ver == "0.16"));
      CHECK(last_on_cpu == (ver == "0.19"));
      // Half the fp32 states on each side: 2 x 1000 elements x (4 + 8) bytes.
      CHECK(resident_bytes(gr, Device::HOST, MemCategory::OPTIMIZER, false) == 2 * 1000 * 12);
    }
  }
}
