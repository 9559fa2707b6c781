// PyTorch's caching allocator (sim/memory/caching_allocator.hpp) on hand-worked sequences of allocations and frees.
// Every expected figure is derived in the comment beside it from the constants of c10/cuda/CUDACachingAllocator.cpp
// (kMinBlockSize 512 B, kSmallSize 1 MiB, kSmallBuffer 2 MiB, kMinLargeAlloc 10 MiB, kLargeBuffer 20 MiB, kRoundLarge
// 2 MiB) and its rules (a request takes the smallest cached block of its pool and stream that is large enough, else
// a new segment; a block is split when the rest is >= 512 B in the small pool or > 1 MiB in the large one; freed
// blocks stay cached on their stream and merge with free neighbours of their segment; cached whole segments are
// freed only when cudaMalloc would fail). Not a restatement of the code: the segment arithmetic is worked by hand.
#include "memory/caching_allocator.hpp"
#include "memory/memory_model.hpp"
#include "spec/scenario_spec.hpp"
#include "spec/task_graph.hpp"

#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>

using namespace zerosim;
using spec::Buffer;
using spec::BufferId;
using spec::Device;
using spec::MemCategory;
using spec::Stream;
using spec::Task;
using spec::TaskGraph;

namespace {

constexpr std::int64_t MiB = 1024 * 1024;
constexpr std::int64_t GiB = 1024 * MiB;
constexpr std::int64_t UNLIMITED = 1LL << 50;

BufferId gpu_buffer(TaskGraph& g, const std::string& name, std::int64_t bytes)
{
  Buffer b;
  b.name = name;
  b.device = Device::GPU;
  b.category = MemCategory::OTHER;
  b.bytes = bytes;
  return g.add_buffer(b);
}

void task(TaskGraph& g, const std::string& name, Stream stream, std::vector<BufferId> allocs,
          std::vector<BufferId> frees)
{
  Task t;
  t.name = name;
  t.stream = stream;
  t.allocs = std::move(allocs);
  t.frees = std::move(frees);
  g.add_task(t);
}

spec::Scenario scenario(std::int64_t gpu_memory, bool allocator)
{
  spec::Scenario s;
  s.cluster.nodes = 1;
  s.cluster.gpus_per_node = 1;
  s.cluster.node.gpu.memory_bytes = gpu_memory;
  s.cluster.node.cpu.memory_bytes = 1024 * GiB;
  s.mechanisms.allocator = allocator;
  return s;
}

} // namespace

TEST_SUITE("memory.allocator")
{
  TEST_CASE("allocator: rounding and segment sizes are PyTorch's constants")
  {
    // round_size: multiples of 512 B, at least 512 B
    CHECK(memory::allocator_round_size(1) == 512);
    CHECK(memory::allocator_round_size(512) == 512);
    CHECK(memory::allocator_round_size(513) == 1024);
    // get_allocation_size: <= 1 MiB -> 2 MiB; below 10 MiB -> 20 MiB; else rounded up to 2 MiB
    CHECK(memory::allocator_segment_bytes(512) == 2 * MiB);
    CHECK(memory::allocator_segment_bytes(1 * MiB) == 2 * MiB);
    CHECK(memory::allocator_segment_bytes(1 * MiB + 512) == 20 * MiB);
    CHECK(memory::allocator_segment_bytes(10 * MiB - 512) == 20 * MiB);
    CHECK(memory::allocator_segment_bytes(10 * MiB) == 10 * MiB);
    CHECK(memory::allocator_segment_bytes(10 * MiB + 512) == 12 * MiB);
  }

  TEST_CASE("allocator: the small pool packs requests into 2 MiB segments")
  {
    memory::CachingAllocator a(UNLIMITED);
    // 1 B -> a 512 B block carved from a new 2 MiB segment; the rest, 2 MiB - 512 = 2,096,640 B, stays cached.
    a.malloc(1, 0);
    CHECK(a.reserved() == 2 * MiB);
    CHECK(a.allocated() == 512);
    // 1 MiB (still small: <= kSmallSize) fits the cached 2,096,640 B; the rest 1,048,064 B stays cached.
    a.malloc(1 * MiB, 0);
    CHECK(a.reserved() == 2 * MiB);
    CHECK(a.allocated() == 512 + 1 * MiB);
    // another 1 MiB does not fit 1,048,064 B: a second 2 MiB segment.
    a.malloc(1 * MiB, 0);
    CHECK(a.reserved() == 4 * MiB);
    CHECK(a.segments() == 2);
  }

  TEST_CASE("allocator: the large pool uses 20 MiB segments below 10 MiB and 2 MiB rounding above")
  {
    memory::CachingAllocator a(UNLIMITED);
    // 5 MiB: a 20 MiB segment (kLargeBuffer), split: 15 MiB cached.
    a.malloc(5 * MiB, 0);
    CHECK(a.reserved() == 20 * MiB);
    // 12 MiB + 1 B -> 12 MiB + 512 B, served from the cached 15 MiB; the rest 3 MiB - 512 B > 1 MiB is split off.
    a.malloc(12 * MiB + 1, 0);
    CHECK(a.reserved() == 20 * MiB);
    CHECK(a.allocated() == 5 * MiB + 12 * MiB + 512);
    // 10 MiB: the cached 3 MiB - 512 B is too small: a segment of exactly 10 MiB (a multiple of 2 MiB).
    a.malloc(10 * MiB, 0);
    CHECK(a.reserved() == 30 * MiB);
    // 10 MiB + 1 B -> 10 MiB + 512 B: a 12 MiB segment; its rest 2 MiB - 512 B > 1 MiB is split off and cached.
    a.malloc(10 * MiB + 1, 0);
    CHECK(a.reserved() == 42 * MiB);
    CHECK(a.segments() == 3);
    // 1.5 MiB (1,572,864 B, large pool): the smallest cached block large enough is the 2 MiB - 512 B rest (the other
    // is 3 MiB - 512 B); its own rest, 2,096,640 - 1,572,864 = 523,776 B, is not above 1 MiB: not split, the whole
    // block is handed out (and counted as allocated).
    a.malloc(3 * MiB / 2, 0);
    CHECK(a.reserved() == 42 * MiB);
    CHECK(a.allocated() == 5 * MiB + 12 * MiB + 512 + 10 * MiB + 10 * MiB + 512 + 2 * MiB - 512);
  }

  TEST_CASE("allocator: freed blocks stay cached on their stream and merge within their segment")
  {
    memory::CachingAllocator a(UNLIMITED);
    const int x = a.malloc(100 * MiB, 0);
    a.free(x);
    // nothing goes back to the driver
    CHECK(a.reserved() == 100 * MiB);
    CHECK(a.allocated() == 0);
    // the cached 100 MiB belongs to stream 0: a request on stream 1 takes a segment of its own
    a.malloc(100 * MiB, 1);
    CHECK(a.reserved() == 200 * MiB);
    // 60 MiB on stream 0: the cached block, split (rest 40 MiB > 1 MiB)
    const int c = a.malloc(60 * MiB, 0);
    CHECK(a.reserved() == 200 * MiB);
    // freed, it merges with its 40 MiB neighbour into the whole 100 MiB segment again, which serves 100 MiB
    a.free(c);
    a.malloc(100 * MiB, 0);
    CHECK(a.reserved() == 200 * MiB);
    CHECK(a.peak_reserved() == 200 * MiB);
  }

  TEST_CASE("allocator: fragmentation: cached segments do not merge across segments")
  {
    memory::CachingAllocator a(UNLIMITED);
    // four 30 MiB segments, all freed: 120 MiB reserved, 0 allocated
    int h[4];
    for (int& i : h)
      i = a.malloc(30 * MiB, 0);
    for (int i : h)
      a.free(i);
    CHECK(a.reserved() == 120 * MiB);
    // 40 MiB fits none of the 30 MiB blocks: a fifth segment; reserved 160 MiB with 40 MiB allocated
    a.malloc(40 * MiB, 0);
    CHECK(a.reserved() == 160 * MiB);
    CHECK(a.allocated() == 40 * MiB);
  }

  TEST_CASE("allocator: the cache is freed when the device is full, and what still does not fit is out of memory")
  {
    // cudaMalloc may hand out 150 MiB in all
    memory::CachingAllocator a(150 * MiB);
    int h[4];
    for (int& i : h)
      i = a.malloc(30 * MiB, 0);
    for (int i : h)
      a.free(i);
    // 120 + 40 > 150: release_cached_blocks frees the four whole cached segments (120 MiB), then 40 MiB fits
    a.malloc(40 * MiB, 0);
    CHECK(a.alloc_retries() == 1);
    CHECK(a.ooms() == 0);
    CHECK(a.reserved() == 40 * MiB);
    CHECK(a.peak_reserved() == 120 * MiB);
    // 40 + 200 > 150 and nothing cached to free: out of memory
    a.malloc(200 * MiB, 0);
    CHECK(a.ooms() == 1);
  }

  TEST_CASE("allocator: reserved of a replay is the peak of the segments, the ablation keeps the old 19 % rule")
  {
    // Resident: 10 GiB of parameters (one segment, a multiple of 2 MiB). Then per step: a 3 MiB activation on the
    // compute stream (a 20 MiB segment), a 30 MiB all-gather output on the all-gather stream (its own 30 MiB
    // segment), freed by the next task; a 25 MiB gradient on the compute stream: the cached 30 MiB block is the
    // all-gather stream's and the 17 MiB rest of the 20 MiB segment is too small, so a new 26 MiB segment
    // (25 MiB rounded up to 2 MiB).
    TaskGraph g;
    const auto params = gpu_buffer(g, "params", 10 * GiB);
    const auto act = gpu_buffer(g, "act", 3 * MiB);
    const auto gathered = gpu_buffer(g, "gathered", 30 * MiB);
    const auto grad = gpu_buffer(g, "grad", 25 * MiB);
    g.resident = {params};
    task(g, "allgather", Stream::ALLGATHER, {gathered}, {});
    task(g, "fwd", Stream::COMPUTE, {act}, {gathered});
    task(g, "bwd", Stream::COMPUTE, {grad}, {act});
    task(g, "step", Stream::COMPUTE, {}, {grad});

    const auto on = memory::replay_memory(scenario(80 * GiB, true), g);
    // allocated peak: 10 GiB + 30 + 3 MiB at fwd (the all-gather output is freed when fwd completes)
    CHECK(on.gpu == 10 * GiB + 33 * MiB);
    // reserved: 10 GiB + 30 + 20 + 26 MiB = 10 GiB + 76 MiB; the second step reuses the cache (steady: 2 steps)
    CHECK(on.gpu_reserved == 10 * GiB + 76 * MiB);
    CHECK(on.allocator_steps == 2);
    CHECK(on.allocator_mechanism);
    CHECK(on.fragmentation_bytes == 43 * MiB);

    const auto off = memory::replay_memory(scenario(80 * GiB, false), g);
    CHECK(off.gpu == on.gpu);
    CHECK(off.gpu_reserved ==
          on.gpu + std::llround(memory::ALLOCATOR_FRAGMENTATION_FRACTION * static_cast<double>(on.gpu)));
    CHECK_FALSE(off.allocator_mechanism);
  }

  TEST_CASE("allocator: a replay that does not fit even without its cache does not fit the device")
  {
    // 79 GiB resident + a 2 GiB transient on an 80 GiB GPU (context 500 MiB, one GPU: no NCCL): the allocator cannot
    // get the 2 GiB segment even after freeing its (empty) cache: out of memory, reserved 81 GiB.
    TaskGraph g;
    g.resident = {gpu_buffer(g, "states", 79 * GiB)};
    const auto t = gpu_buffer(g, "transient", 2 * GiB);
    task(g, "op", Stream::COMPUTE, {t}, {t});
    const auto r = memory::replay_memory(scenario(80 * GiB, true), g);
    CHECK(r.allocator_ooms >= 1);
    CHECK(r.gpu_reserved == 81 * GiB);
    CHECK_FALSE(r.fit_gpu);
  }

  TEST_CASE("allocator: record_stream: a block freed while another stream uses it is reused only once released")
  {
    // DeviceCachingAllocator::free with stream_uses: allocated drops at once, the block waits for its event
    // (insert_events) and returns to the pool when process_events sees it complete.
    memory::CachingAllocator a(UNLIMITED);
    const int p = a.malloc(100 * MiB, 0); // its own 100 MiB segment (>= 10 MiB, a multiple of 2 MiB)
    const int token = a.free_deferred(p);
    CHECK(a.allocated() == 0);
    CHECK(a.pending() == 100 * MiB);
    a.malloc(100 * MiB, 0); // the pending block cannot serve it: a second 100 MiB segment
    CHECK(a.reserved() == 200 * MiB);
    a.release(token);
    CHECK(a.pending() == 0);
    a.malloc(100 * MiB, 0); // the released block serves it: no new segment
    CHECK(a.reserved() == 200 * MiB);
    a.release(token); // already settled: nothing happens
    CHECK(a.reserved() == 200 * MiB);
  }

  TEST_CASE("allocator: before freeing its cache for room the allocator waits for pending blocks")
  {
    // release_cached_blocks starts with synchronize_and_free_events: on a 150 MiB device, 100 MiB pending plus a new
    // 100 MiB request does not fit; the pending block returns, its whole segment goes back to the driver (one retry),
    // and the new 100 MiB segment fits: reserved 100 MiB, no out-of-memory.
    memory::CachingAllocator a(150 * MiB);
    a.free_deferred(a.malloc(100 * MiB, 0));
    a.malloc(100 * MiB, 0);
    CHECK(a.alloc_retries() == 1);
    CHECK(a.ooms() == 0);
    CHECK(a.reserved() == 100 * MiB);
    CHECK(a.pending() == 0);
  }

  TEST_CASE("allocator: at simulated times a record_stream buffer is released at its user's end")
  {
    // FSDP1's unsharded parameter: allocated by the all-gather (unshard stream), freed by the forward on the compute
    // stream with record_stream. The host issues the next all-gather at `next_issue`; the forward ends at 1.0 s.
    auto graph = [](bool record_stream) {
      TaskGraph g;
      const auto p0 = gpu_buffer(g, "unsharded.0", 100 * MiB);
      const auto p1 = gpu_buffer(g, "unsharded.1", 100 * MiB);
      g.buffers[static_cast<std::size_t>(p0)].record_stream = record_stream;
      task(g, "allgather.0", Stream::ALLGATHER, {p0}, {});
      task(g, "fwd.0", Stream::COMPUTE, {}, {p0});
      task(g, "allgather.1", Stream::ALLGATHER, {p1}, {});
      task(g, "fwd.1", Stream::COMPUTE, {}, {p1});
      return g;
    };
    auto reserved = [&](bool record_stream, double next_issue) {
      const TaskGraph g = graph(record_stream);
      const std::vector<memory::TaskClock> clock = {
          {0, 0.1}, {0, 1.0}, {next_issue, next_issue + 0.1}, {next_issue, 2}};
      return memory::replay_allocator(g, memory::deferred_free_events(g, clock), UNLIMITED).peak_reserved;
    };
    // the host is ahead (0.5 s < 1.0 s): unsharded.0's block still awaits the forward, so a second segment
    CHECK(reserved(true, 0.5) == 200 * MiB);
    // the host issues after the forward's end: the block is back in the pool and serves unsharded.1
    CHECK(reserved(true, 1.5) == 100 * MiB);
    // without record_stream (FSDP2, DeepSpeed) the free is immediate, in issue order
    CHECK(reserved(false, 0.5) == 100 * MiB);
  }

  TEST_CASE("allocator: a buffer standing for several tensors is several requests")
  {
    // 40 MiB as one tensor: one 40 MiB segment. As two 20 MiB tensors (Buffer::tensors {1, 1}, shares of the bytes):
    // each >= 10 MiB gets its own 20 MiB segment, 40 MiB in all; freed, a 30 MiB request fits neither 20 MiB block
    // (segments do not merge): a third segment (30 MiB), where the single 40 MiB block would have served it.
    auto reserved = [](std::vector<std::int64_t> tensors) {
      TaskGraph g;
      const auto act = gpu_buffer(g, "act", 40 * MiB);
      g.buffers[static_cast<std::size_t>(act)].tensors = std::move(tensors);
      const auto next = gpu_buffer(g, "next", 30 * MiB);
      task(g, "fwd", Stream::COMPUTE, {act}, {act});
      task(g, "bwd", Stream::COMPUTE, {next}, {next});
      return memory::replay_allocator(g, memory::issue_order_events(g), UNLIMITED).peak_reserved;
    };
    CHECK(reserved({}) == 40 * MiB);
    CHECK(reserved({1, 1}) == 70 * MiB);
  }

  TEST_CASE("allocator: torch.optim's lazily created state is carved out of the first step's cache")
  {
    // Adam's state (60 MiB, resident) and a 100 MiB activation freed before the optimizer step. Created up front the
    // state has its own 60 MiB segment and the activation its 100 MiB one: 160 MiB. Created at the first step
    // (Buffer::lazy) the state takes 60 MiB of the cached 100 MiB block (split: the 40 MiB rest is > 1 MiB), so the
    // next step's activation needs a new 100 MiB segment: 200 MiB.
    auto reserved = [](bool lazy) {
      TaskGraph g;
      const auto states = gpu_buffer(g, "optimizer_states", 60 * MiB);
      g.buffers[static_cast<std::size_t>(states)].lazy = lazy;
      g.resident = {states};
      const auto act = gpu_buffer(g, "act", 100 * MiB);
      task(g, "fwd", Stream::COMPUTE, {act}, {act});
      Task opt;
      opt.name = "step.optimizer";
      opt.phase = spec::Phase::OPTIMIZER;
      g.add_task(opt);
      return memory::replay_allocator(g, memory::issue_order_events(g), UNLIMITED).peak_reserved;
    };
    CHECK(reserved(false) == 160 * MiB);
    CHECK(reserved(true) == 200 * MiB);
  }
}
