// The memory replay on hand-built task graphs: every expected value is worked out beside it.
#include "memory/memory_model.hpp"

#include "core/error.hpp"

#include <doctest/doctest.h>

#include <cmath>
#include <numeric>

using namespace zerosim;
using spec::Buffer;
using spec::Device;
using spec::MemCategory;
using spec::Task;
using spec::TaskGraph;

namespace {

constexpr std::int64_t MiB = 1024LL * 1024;
constexpr std::int64_t GiB = 1024LL * MiB;

/// One node of `gpus_per_node` GPUs with the given capacities; dp = nodes x gpus_per_node.
spec::Scenario scenario(int gpus_per_node, int nodes, std::int64_t gpu_memory, std::int64_t cpu_memory,
                        std::int64_t cpu_reserved, int nvme_devices = 0, std::int64_t nvme_capacity = 0)
{
  spec::Scenario s;
  s.cluster.gpus_per_node = gpus_per_node;
  s.cluster.nodes = nodes;
  s.cluster.node.gpus = gpus_per_node;
  s.cluster.node.gpu.memory_bytes = gpu_memory;
  s.cluster.node.cpu.memory_bytes = cpu_memory;
  s.cluster.node.cpu.reserved_bytes = cpu_reserved;
  s.cluster.node.nvme.devices = nvme_devices;
  s.cluster.node.nvme.capacity_bytes = nvme_capacity;
  return s;
}

spec::BufferId gpu_buffer(TaskGraph& g, const std::string& name, MemCategory c, std::int64_t bytes)
{
  Buffer b;
  b.name = name;
  b.device = Device::GPU;
  b.category = c;
  b.bytes = bytes;
  return g.add_buffer(b);
}

spec::BufferId host_buffer(TaskGraph& g, const std::string& name, bool pinned, std::int64_t bytes,
                           Device d = Device::HOST)
{
  Buffer b;
  b.name = name;
  b.device = d;
  b.pinned = pinned;
  b.category = MemCategory::OPTIMIZER;
  b.bytes = bytes;
  return g.add_buffer(b);
}

void task(TaskGraph& g, const std::string& name, std::vector<spec::BufferId> allocs, std::vector<spec::BufferId> frees)
{
  Task t;
  t.name = name;
  t.allocs = std::move(allocs);
  t.frees = std::move(frees);
  g.add_task(t);
}

std::int64_t breakdown_sum(const memory::MemoryReport& r)
{
  return std::accumulate(r.breakdown.begin(), r.breakdown.end(), std::int64_t{0});
}

std::int64_t at(const memory::MemoryReport& r, MemCategory c)
{
  return r.breakdown[static_cast<size_t>(c)];
}

/// A small forward/backward: resident params 1000 B + optimizer 4000 B; fwd0 keeps A0 (300 B), fwd1 keeps A1
/// (500 B); bwd1 makes grads G (200 B) and frees A1 when it completes; bwd0 frees A0.
TaskGraph fwd_bwd_graph()
{
  TaskGraph g;
  const auto p = gpu_buffer(g, "params", MemCategory::PARAMS, 1000);
  const auto o = gpu_buffer(g, "optimizer", MemCategory::OPTIMIZER, 4000);
  const auto a0 = gpu_buffer(g, "act.0", MemCategory::ACTIVATIONS, 300);
  const auto a1 = gpu_buffer(g, "act.1", MemCategory::ACTIVATIONS, 500);
  const auto gr = gpu_buffer(g, "grads", MemCategory::GRADS, 200);
  g.resident = {p, o};
  task(g, "fwd0", {a0}, {});
  task(g, "fwd1", {a1}, {});
  task(g, "bwd1", {gr}, {a1});
  task(g, "bwd0", {}, {a0});
  return g;
}

} // namespace

TEST_SUITE("memory")
{
  TEST_CASE("replay: the GPU peak is the largest live sum at the task that reaches it")
  {
    const auto r = memory::replay_memory(scenario(1, 1, 80 * GiB, 1024 * GiB, 0), fwd_bwd_graph());
    // live sums: resident 1000 + 4000 = 5000; fwd0 +300 = 5300; fwd1 +500 = 5800;
    // bwd1 +200 = 6000 (act.1 is freed only when bwd1 completes); bwd0: 6000 - 500 = 5500.
    CHECK(r.gpu == 6000);
    CHECK(r.peak_task == "bwd1");
    // breakdown at bwd1: params 1000, optimizer 4000, activations 300 + 500, grads 200 -> sums to 6000
    CHECK(at(r, MemCategory::PARAMS) == 1000);
    CHECK(at(r, MemCategory::OPTIMIZER) == 4000);
    CHECK(at(r, MemCategory::ACTIVATIONS) == 800);
    CHECK(at(r, MemCategory::GRADS) == 200);
    CHECK(at(r, MemCategory::BUFFERS) == 0);
    CHECK(breakdown_sum(r) == r.gpu);
  }

  TEST_CASE("replay: issue order matters: freeing before the next allocation lowers the peak")
  {
    // The same five buffers, but each activation is freed by the task that made it:
    // resident 5000; fwd0 +300 = 5300, then -300; fwd1 +500 = 5500, then -500; bwd +200 = 5200.
    TaskGraph g;
    const auto p = gpu_buffer(g, "params", MemCategory::PARAMS, 1000);
    const auto o = gpu_buffer(g, "optimizer", MemCategory::OPTIMIZER, 4000);
    const auto a0 = gpu_buffer(g, "act.0", MemCategory::ACTIVATIONS, 300);
    const auto a1 = gpu_buffer(g, "act.1", MemCategory::ACTIVATIONS, 500);
    const auto gr = gpu_buffer(g, "grads", MemCategory::GRADS, 200);
    g.resident = {p, o};
    task(g, "fwd0", {a0}, {a0});
    task(g, "fwd1", {a1}, {a1});
    task(g, "bwd", {gr}, {});
    const auto r = memory::replay_memory(scenario(1, 1, 80 * GiB, 1024 * GiB, 0), g);
    CHECK(r.gpu == 5500); // at fwd1, against 6000 when act.1 stays live into the backward
    CHECK(r.peak_task == "fwd1");
    CHECK(at(r, MemCategory::ACTIVATIONS) == 500);
    CHECK(breakdown_sum(r) == 5500);
  }

  TEST_CASE("replay: with no task the peak is the resident set")
  {
    TaskGraph g;
    g.resident = {gpu_buffer(g, "params", MemCategory::PARAMS, 4096)};
    const auto r = memory::replay_memory(scenario(1, 1, 80 * GiB, 1024 * GiB, 0), g);
    CHECK(r.gpu == 4096);
    CHECK(r.peak_task == "(resident before the step)");
  }

  TEST_CASE("replay: host and NVMe per node are gpus_per_node times the per-rank peak")
  {
    TaskGraph g;
    const auto pinned = host_buffer(g, "fp32_master", true, 1 * GiB);
    const auto pageable = host_buffer(g, "adam_states", false, 3 * GiB);
    const auto staging = host_buffer(g, "staging", true, 2 * GiB);
    const auto swap = host_buffer(g, "nvme_states", false, 10 * GiB, Device::NVME);
    g.resident = {pinned, pageable, swap};
    task(g, "step.stage", {staging}, {staging});
    task(g, "step.done", {}, {});
    const auto r = memory::replay_memory(scenario(8, 2, 80 * GiB, 2048 * GiB, 64 * GiB, 4, 4000 * GiB), g);
    // per rank: host 1 + 3 = 4 GiB resident, 6 GiB while step.stage holds the 2 GiB pinned staging buffer;
    // pinned 1 GiB resident, 3 GiB at step.stage; NVMe 10 GiB.
    CHECK(r.cpu_per_rank == 6 * GiB);
    CHECK(r.cpu_pinned_per_rank == 3 * GiB);
    CHECK(r.nvme_per_rank == 10 * GiB);
    // per node: 8 ranks x 6 = 48 GiB host, 8 x 3 = 24 GiB pinned, 8 x 10 = 80 GiB NVMe
    CHECK(r.cpu_per_node == 48 * GiB);
    CHECK(r.cpu_pinned_per_node == 24 * GiB);
    CHECK(r.nvme_per_node == 80 * GiB);
    // capacities: host 2048 - 64 reserved = 1984 GiB; NVMe 4 x 4000 GiB = 16000 GiB
    CHECK(r.cpu_capacity == 1984 * GiB);
    CHECK(r.nvme_capacity == 16000 * GiB);
    CHECK(r.fit_cpu);
    CHECK(r.fit_nvme);
    CHECK(r.gpu == 0); // nothing on the GPU
  }

  TEST_CASE("replay: the old rule (allocator mechanism off) adds 19 % and device adds the CUDA context and NCCL")
  {
    TaskGraph g;
    g.resident = {gpu_buffer(g, "params", MemCategory::PARAMS, 10 * GiB)};
    auto s = scenario(8, 1, 80 * GiB, 1024 * GiB, 0);
    s.mechanisms.allocator = false; // the ablation: tests/unit/memory/allocator_test.cpp has the mechanism
    const auto r = memory::replay_memory(s, g);
    // 10 GiB is a multiple of 2 MiB, so the rounding floor is 10 GiB; fragmentation 0.19 x 10 GiB
    const auto frag = std::llround(memory::ALLOCATOR_FRAGMENTATION_FRACTION * static_cast<double>(10 * GiB));
    CHECK(r.gpu_rounded == 10 * GiB);
    CHECK(r.fragmentation_bytes == frag);
    CHECK(r.gpu_reserved == 10 * GiB + frag);
    // dp = 8 > 1: NCCL 4 MiB x 16 channels x 2 ring connections = 128 MiB; CUDA context 500 MiB
    CHECK(r.nccl_bytes == 128 * MiB);
    CHECK(r.cuda_context_bytes == 500 * MiB);
    CHECK(r.gpu_device == r.gpu_reserved + 500 * MiB + 128 * MiB);
    // one GPU: no peers, no NCCL connections
    CHECK(memory::replay_memory(scenario(1, 1, 80 * GiB, 1024 * GiB, 0), g).nccl_bytes == 0);
    // with the mechanism (the default) the 10 GiB are one segment of exactly 10 GiB (a multiple of kRoundLarge)
    CHECK(memory::replay_memory(scenario(8, 1, 80 * GiB, 1024 * GiB, 0), g).gpu_reserved == 10 * GiB);
  }

  TEST_CASE("replay: the old rule's floor is the block rounding, the allocator packs small blocks in 2 MiB")
  {
    // PyTorch rounds every block to 512 B; requests >= 10 MiB get their own segment rounded to 2 MiB.
    CHECK(memory::allocator_block_bytes(1) == 512);
    CHECK(memory::allocator_block_bytes(512) == 512);
    CHECK(memory::allocator_block_bytes(513) == 1024);
    CHECK(memory::allocator_block_bytes(10 * MiB - 1) == 10 * MiB); // 512-B multiple: 10 MiB exactly
    CHECK(memory::allocator_block_bytes(10 * MiB) == 10 * MiB);
    CHECK(memory::allocator_block_bytes(10 * MiB + 1) == 12 * MiB);
    TaskGraph g;
    for (int i = 0; i < 1000; ++i)
      g.resident.push_back(gpu_buffer(g, "small." + std::to_string(i), MemCategory::OTHER, 513));
    auto s = scenario(1, 1, 80 * GiB, 1024 * GiB, 0);
    s.mechanisms.allocator = false;
    const auto r = memory::replay_memory(s, g);
    // allocated 1000 x 513 = 513,000; rounded 1000 x 1024 = 1,024,000 > 513,000 x 1.19 = 610,470
    CHECK(r.gpu == 513'000);
    CHECK(r.gpu_rounded == 1'024'000);
    CHECK(r.gpu_reserved == 1'024'000);
    // the mechanism: 1000 blocks of 1024 B (513 rounded to 512 B multiples) = 1,024,000 B <= one 2 MiB small segment
    CHECK(memory::replay_memory(scenario(1, 1, 80 * GiB, 1024 * GiB, 0), g).gpu_reserved == 2 * MiB);
  }

  TEST_CASE("replay: fit verdict per tier and the shortfall is the largest overflow")
  {
    TaskGraph g;
    g.resident = {gpu_buffer(g, "params", MemCategory::PARAMS, 10 * GiB), host_buffer(g, "states", false, 100 * GiB)};
    // GPU: the live blocks (10 GiB, already 2-MiB rounded) + CUDA context 500 MiB + NCCL 128 MiB (dp 4) = 10 GiB
    // + 628 MiB cannot be released; capacity 10 GiB + 300 MiB: 328 MiB over.
    // host: 4 ranks x 100 GiB = 400 GiB against 512 - 32 = 480 GiB: fits
    auto r = memory::replay_memory(scenario(4, 1, 10 * GiB + 300 * MiB, 512 * GiB, 32 * GiB), g);
    CHECK(r.gpu_device == 10 * GiB + 628 * MiB);
    CHECK_FALSE(r.fit_gpu);
    CHECK(r.fit_cpu);
    CHECK(r.fit_nvme); // 0 B on NVMe against no NVMe
    CHECK_FALSE(r.fits);
    CHECK(r.shortfall_bytes == 328 * MiB);
  }

  TEST_CASE("replay: the old rule's cache never pushes a run over capacity (the allocator frees it and retries)")
  {
    TaskGraph g;
    g.resident = {gpu_buffer(g, "params", MemCategory::PARAMS, 10 * GiB)};
    // capacity 12 GiB: the cached 10 GiB x 1.19 = 11.9 GiB does not fit beside 628 MiB of context and NCCL,
    // so reserved is what is left, 12 GiB - 628 MiB, and the device total is exactly the capacity: it fits.
    auto s = scenario(4, 1, 12 * GiB, 512 * GiB, 32 * GiB);
    s.mechanisms.allocator = false;
    auto r = memory::replay_memory(s, g);
    CHECK(r.gpu_reserved == 12 * GiB - 628 * MiB);
    CHECK(r.gpu_device == 12 * GiB);
    CHECK(r.fit_gpu);
    CHECK(r.shortfall_bytes == 0);
  }

  TEST_CASE("replay: the shortfall is the largest overflow over the tiers")
  {
    TaskGraph g;
    g.resident = {gpu_buffer(g, "params", MemCategory::PARAMS, 10 * GiB), host_buffer(g, "states", false, 100 * GiB)};
    // host 400 GiB against 256 - 32 = 224 GiB: 176 GiB over, more than the GPU's 328 MiB
    auto r = memory::replay_memory(scenario(4, 1, 10 * GiB + 300 * MiB, 256 * GiB, 32 * GiB), g);
    CHECK_FALSE(r.fit_gpu);
    CHECK_FALSE(r.fit_cpu);
    CHECK(r.shortfall_bytes == 176 * GiB);

    // everything within capacity: fits, no shortfall
    r = memory::replay_memory(scenario(4, 1, 16 * GiB, 512 * GiB, 32 * GiB), g);
    CHECK(r.fits);
    CHECK(r.shortfall_bytes == 0);
  }

  TEST_CASE("replay: NVMe bytes on a node without NVMe do not fit")
  {
    TaskGraph g;
    g.resident = {host_buffer(g, "swap", false, 1 * GiB, Device::NVME)};
    const auto r = memory::replay_memory(scenario(2, 1, 80 * GiB, 1024 * GiB, 0), g);
    CHECK(r.nvme_per_node == 2 * GiB); // 2 ranks x 1 GiB
    CHECK(r.nvme_capacity == 0);
    CHECK_FALSE(r.fit_nvme);
    CHECK(r.shortfall_bytes == 2 * GiB);
  }

  TEST_CASE("replay: a broken graph is an internal error")
  {
    TaskGraph g;
    const auto a = gpu_buffer(g, "a", MemCategory::OTHER, 10);
    task(g, "t0", {a}, {});
    task(g, "t1", {a}, {}); // allocated twice
    CHECK_THROWS_AS(memory::replay_memory(scenario(1, 1, GiB, GiB, 0), g), core::InternalError);

    TaskGraph h;
    const auto b = gpu_buffer(h, "b", MemCategory::OTHER, 10);
    task(h, "t0", {}, {b}); // freed while not live
    CHECK_THROWS_AS(memory::replay_memory(scenario(1, 1, GiB, GiB, 0), h), core::InternalError);

    TaskGraph k;
    task(k, "t0", {7}, {}); // no such buffer
    CHECK_THROWS_AS(memory::replay_memory(scenario(1, 1, GiB, GiB, 0), k), core::InternalError);
  }
}
