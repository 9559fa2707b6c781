#include "memory/memory_model.hpp"

#include "core/error.hpp"

#include <algorithm>
#include <cmath>
#include <queue>
#include <tuple>

namespace zerosim::memory {

namespace {

std::int64_t round_up(std::int64_t bytes, std::int64_t unit)
{
  return (bytes + unit - 1) / unit * unit;
}

/// The live sums of one rank at one instant of the replay.
struct LiveSums {
  std::int64_t gpu = 0;
  std::int64_t gpu_rounded = 0;
  std::array<std::int64_t, spec::MEM_CATEGORY_COUNT> gpu_by_category{};
  std::int64_t host = 0;
  std::int64_t pinned = 0;
  std::int64_t nvme = 0;

  void apply(const spec::Buffer& b, std::int64_t sign)
  {
    switch (b.device) {
    case spec::Device::GPU:
      gpu += sign * b.bytes;
      gpu_rounded += sign * allocator_block_bytes(b.bytes);
      gpu_by_category[static_cast<size_t>(b.category)] += sign * b.bytes;
      break;
    case spec::Device::HOST:
      host += sign * b.bytes;
      if (b.pinned)
        pinned += sign * b.bytes;
      break;
    case spec::Device::NVME:
      nvme += sign * b.bytes;
      break;
    }
  }
};

/// The stream a buffer is allocated on: the allocating task's; the resident set (allocated before the step) and the
/// host-side tasks (the Python thread's current stream) use the default stream.
int allocator_stream(const spec::TaskGraph& g, spec::TaskId task)
{
  if (task < 0)
    return static_cast<int>(spec::Stream::COMPUTE);
  const spec::Stream st = g.tasks[static_cast<size_t>(task)].stream;
  if (st == spec::Stream::HOST || st == spec::Stream::NVME)
    return static_cast<int>(spec::Stream::COMPUTE);
  return static_cast<int>(st);
}

/// The caching allocator's requests for one buffer: one per tensor it stands for (Buffer::tensors), sized in
/// proportion so that they sum to the buffer's bytes (the last takes the rounding); one request without a list.
std::vector<std::int64_t> allocator_requests(const spec::Buffer& b)
{
  std::int64_t listed = 0;
  for (std::int64_t t : b.tensors)
    listed += std::max<std::int64_t>(t, 0);
  if (b.tensors.size() < 2 || listed <= 0)
    return {b.bytes};
  std::vector<std::int64_t> sizes;
  std::int64_t given = 0;
  for (size_t i = 0; i + 1 < b.tensors.size(); ++i) {
    const auto share = static_cast<std::int64_t>(
        static_cast<long double>(b.bytes) * std::max<std::int64_t>(b.tensors[i], 0) / static_cast<long double>(listed));
    if (share > 0)
      sizes.push_back(share);
    given += share;
  }
  if (b.bytes - given > 0)
    sizes.push_back(b.bytes - given);
  return sizes;
}

/// What the caching allocator's cudaMalloc calls can get: the device less the CUDA context and the NCCL buffers of
/// one communicator per group kind a rank belongs to (data-parallel and, with tensor parallelism, its TP group).
std::int64_t allocator_room(const spec::Scenario& s)
{
  return s.cluster.node.gpu.memory_bytes - CUDA_CONTEXT_BYTES - nccl_buffer_bytes(s.dp()) - nccl_buffer_bytes(s.tp());
}

/// Reserved as reported: the allocator's (or, without the mechanism, the old fraction over `allocated`), bounded by
/// `room` and never below the live blocks `rounded`.
std::int64_t bounded_reserved(const spec::Scenario& s, std::int64_t allocated, std::int64_t rounded,
                              std::int64_t allocator_reserved, std::int64_t room)
{
  const std::int64_t cached =
      s.mechanisms.allocator
          ? allocator_reserved
          : allocated + std::llround(ALLOCATOR_FRAGMENTATION_FRACTION * static_cast<double>(allocated));
  return std::max(rounded, std::min(cached, room));
}

} // namespace

std::int64_t allocator_block_bytes(std::int64_t bytes)
{
  if (bytes <= 0)
    return 0;
  if (bytes >= ALLOCATOR_LARGE_ALLOC_BYTES)
    return round_up(bytes, ALLOCATOR_ROUND_LARGE_BYTES);
  return round_up(bytes, ALLOCATOR_BLOCK_BYTES);
}

std::int64_t nccl_buffer_bytes(int dp)
{
  if (dp <= 1)
    return 0;
  return NCCL_BUFFSIZE_BYTES * NCCL_CHANNELS * NCCL_RING_CONNECTIONS;
}

std::vector<ReplayEvent> issue_order_events(const spec::TaskGraph& g)
{
  using Kind = ReplayEvent::Kind;
  std::vector<ReplayEvent> events;
  // Model states and every other buffer alive across steps, then the tasks in issue order:
  // a task's allocations are live while it runs, its frees take effect when it completes.
  for (auto id : g.resident)
    events.push_back({Kind::ALLOC, id, -1});
  events.push_back({Kind::SAMPLE, -1, -1});
  for (size_t i = 0; i < g.tasks.size(); ++i) {
    const auto task = static_cast<spec::TaskId>(i);
    for (auto id : g.tasks[i].allocs)
      events.push_back({Kind::ALLOC, id, task});
    events.push_back({Kind::SAMPLE, -1, task});
    for (auto id : g.tasks[i].frees)
      events.push_back({Kind::FREE, id, task});
  }
  return events;
}

void settle_gpu_terms(const spec::Scenario& s, const spec::TaskGraph& g, const std::vector<ReplayEvent>& events,
                      MemoryReport& r)
{
  // GPU: allocated -> reserved -> device (docs/memory.md §2). The CUDA context and the NCCL buffers are outside the
  // caching allocator; what is left of the device is what its cudaMalloc calls can get.
  r.cuda_context_bytes = CUDA_CONTEXT_BYTES;
  // One communicator per group kind a rank belongs to: data-parallel and, with tensor parallelism, its TP group.
  r.nccl_bytes = nccl_buffer_bytes(s.dp()) + nccl_buffer_bytes(s.tp());
  const std::int64_t room = allocator_room(s);
  r.allocator_mechanism = s.mechanisms.allocator;
  if (s.mechanisms.allocator) {
    // The caching allocator replayed over the same events: reserved is the peak of the segments it holds. When the
    // device has no room for a new segment it frees its cached ones and retries (release_cached_blocks), so the cache
    // alone never makes a run fail; a segment that does not fit even then is an out-of-memory (reserved > room).
    const AllocatorReplay a = replay_allocator(g, events, room);
    // The fit verdict does not follow the allocator past the device: buffers without a tensor list (a unit's gathered
    // parameters, buckets) are coarser than the tensors PyTorch allocates, so the fragmentation the replay sees near
    // the device's limit is an upper bound (docs/memory.md §2.1). Reserved is bounded by what the context and NCCL
    // leave, as the 19 % rule was, and never below what is allocated; `allocator_ooms` tells when the replay would
    // have run out.
    r.gpu_reserved = bounded_reserved(s, r.gpu, r.gpu_rounded, a.peak_reserved, room);
    r.allocator_ooms = a.ooms;
    r.allocator_retries = a.retries;
    r.allocator_steps = a.steps;
    r.allocator_pending_bytes = a.peak_pending;
  } else {
    // The old rule (the ablation): ALLOCATOR_FRAGMENTATION_FRACTION over allocated when the GPU has room for it,
    // bounded by what the context and NCCL leave, and never below the rounded live blocks, which cannot be freed.
    r.gpu_reserved = bounded_reserved(s, r.gpu, r.gpu_rounded, 0, room);
  }
  r.fragmentation_bytes = r.gpu_reserved - r.gpu;
  r.gpu_device = r.gpu_reserved + r.cuda_context_bytes + r.nccl_bytes;

  // Per node: every rank of a node runs the same program on its own share (symmetric ranks).
  const int ranks_per_node = s.cluster.gpus_per_node;
  if (ranks_per_node < 1)
    throw core::InternalError("memory replay: the scenario has no GPUs per node (not resolved?)");
  r.cpu_per_node = ranks_per_node * r.cpu_per_rank;
  r.cpu_pinned_per_node = ranks_per_node * r.cpu_pinned_per_rank;
  r.nvme_per_node = ranks_per_node * r.nvme_per_rank;

  // Capacities and the verdict (docs/scenario-format.md "Results").
  const auto& node = s.cluster.node;
  r.gpu_capacity = node.gpu.memory_bytes;
  r.cpu_capacity = node.cpu.memory_bytes - node.cpu.reserved_bytes;
  r.nvme_capacity = static_cast<std::int64_t>(node.nvme.devices) * node.nvme.capacity_bytes;
  r.fit_gpu = r.gpu_device <= r.gpu_capacity;
  r.fit_cpu = r.cpu_per_node <= r.cpu_capacity;
  r.fit_nvme = r.nvme_per_node <= r.nvme_capacity;
  r.fits = r.fit_gpu && r.fit_cpu && r.fit_nvme;
  r.tight_gpu = is_tight(static_cast<double>(r.gpu_device), static_cast<double>(r.gpu_capacity), DEFAULT_HEADROOM);
  r.shortfall_bytes = std::max({std::int64_t{0}, r.gpu_device - r.gpu_capacity, r.cpu_per_node - r.cpu_capacity,
                                r.nvme_per_node - r.nvme_capacity});
}

MemoryReport replay_events(const spec::Scenario& s, const spec::TaskGraph& g, const std::vector<ReplayEvent>& events)
{
  const auto buffer_count = static_cast<spec::BufferId>(g.buffers.size());
  const auto task_count = static_cast<spec::TaskId>(g.tasks.size());
  std::vector<bool> live(g.buffers.size(), false);
  LiveSums now;

  // Names the event's owner in a message; built only when a message is.
  auto who = [&](spec::TaskId task) -> std::string {
    if (task < 0)
      return "the resident set";
    return "task '" + g.tasks[static_cast<size_t>(task)].name + "'";
  };
  auto check_ids = [&](spec::BufferId id, spec::TaskId task) {
    if (task >= task_count)
      throw core::InternalError("memory replay: an event names task " + std::to_string(task) + ", but the graph has " +
                                std::to_string(task_count) + " tasks");
    if (id < 0 || id >= buffer_count)
      throw core::InternalError("memory replay: " + who(task) + " names buffer " + std::to_string(id) +
                                ", but the graph has " + std::to_string(buffer_count) + " buffers");
    if (g.buffers[static_cast<size_t>(id)].bytes < 0)
      throw core::InternalError("memory replay: buffer '" + g.buffers[static_cast<size_t>(id)].name +
                                "' has negative size");
  };
  auto alloc = [&](spec::BufferId id, spec::TaskId task) {
    check_ids(id, task);
    const auto& b = g.buffers[static_cast<size_t>(id)];
    if (live[static_cast<size_t>(id)])
      throw core::InternalError("memory replay: " + who(task) + " allocates buffer '" + b.name +
                                "', which is already live");
    live[static_cast<size_t>(id)] = true;
    now.apply(b, +1);
  };
  auto release = [&](spec::BufferId id, spec::TaskId task) {
    check_ids(id, task);
    const auto& b = g.buffers[static_cast<size_t>(id)];
    if (!live[static_cast<size_t>(id)])
      throw core::InternalError("memory replay: " + who(task) + " frees buffer '" + b.name + "', which is not live");
    live[static_cast<size_t>(id)] = false;
    now.apply(b, -1);
  };

  MemoryReport r;
  r.rank = g.rank;
  bool first = true;
  auto record = [&](spec::TaskId task) {
    if (first || now.gpu > r.gpu) { // the first instant reaching the maximum names the peak
      r.gpu = now.gpu;
      r.breakdown = now.gpu_by_category;
      if (task < 0)
        r.peak_task = "(resident before the step)";
      else
        r.peak_task = g.tasks[static_cast<size_t>(task)].name;
    }
    first = false;
    r.gpu_rounded = std::max(r.gpu_rounded, now.gpu_rounded);
    r.cpu_per_rank = std::max(r.cpu_per_rank, now.host);
    r.cpu_pinned_per_rank = std::max(r.cpu_pinned_per_rank, now.pinned);
    r.nvme_per_rank = std::max(r.nvme_per_rank, now.nvme);
  };

  for (const auto& e : events) {
    switch (e.kind) {
    case ReplayEvent::Kind::ALLOC:
      alloc(e.buffer, e.task);
      break;
    case ReplayEvent::Kind::FREE:
      release(e.buffer, e.task);
      break;
    case ReplayEvent::Kind::RELEASE:
      break; // the allocator's business: the live sums dropped at the FREE
    case ReplayEvent::Kind::SAMPLE:
      if (e.task >= task_count)
        throw core::InternalError("memory replay: a sample names task " + std::to_string(e.task) +
                                  ", but the graph has " + std::to_string(task_count) + " tasks");
      record(e.task);
      break;
    }
  }

  settle_gpu_terms(s, g, events, r);
  return r;
}

std::vector<MemorySample> memory_samples(const spec::Scenario& s, const spec::TaskGraph& g,
                                         const std::vector<ReplayEvent>& events)
{
  // The live sums as replay_events counts them (it has checked the events: the caller replayed them first).
  std::vector<MemorySample> samples;
  std::vector<std::int64_t> rounded;
  LiveSums now;
  for (const auto& e : events) {
    if (e.kind == ReplayEvent::Kind::ALLOC || e.kind == ReplayEvent::Kind::FREE)
      now.apply(g.buffers[static_cast<size_t>(e.buffer)], e.kind == ReplayEvent::Kind::ALLOC ? +1 : -1);
    if (e.kind != ReplayEvent::Kind::SAMPLE)
      continue;
    samples.push_back({e.task, now.gpu, now.gpu_by_category, 0});
    rounded.push_back(now.gpu_rounded);
  }
  const std::int64_t room = allocator_room(s);
  std::vector<std::int64_t> reserved;
  if (s.mechanisms.allocator)
    replay_allocator(g, events, room, &reserved);
  if (s.mechanisms.allocator && reserved.size() != samples.size())
    throw core::InternalError("memory replay: the allocator saw " + std::to_string(reserved.size()) + " samples of " +
                              std::to_string(samples.size()));
  for (size_t i = 0; i < samples.size(); ++i)
    samples[i].reserved =
        bounded_reserved(s, samples[i].allocated, rounded[i], s.mechanisms.allocator ? reserved[i] : 0, room);
  return samples;
}

AllocatorReplay replay_allocator(const spec::TaskGraph& g, const std::vector<ReplayEvent>& events,
                                 std::int64_t device_limit_bytes, std::vector<std::int64_t>* reserved_at_samples)
{
  auto stream_of = [&](spec::TaskId task) { return allocator_stream(g, task); };
  CachingAllocator a(device_limit_bytes);
  // Per buffer, one block per tensor it stands for (Buffer::tensors): their handles while allocated, their tokens
  // while freed with `deferred` and awaiting their RELEASE.
  std::vector<std::vector<int>> handles(g.buffers.size());
  std::vector<std::vector<int>> tokens(g.buffers.size());
  std::vector<std::vector<std::int64_t>> requests(g.buffers.size()); // allocator_requests, computed once
  auto malloc_all = [&](size_t id, spec::TaskId task) {
    const spec::Buffer& b = g.buffers[id];
    if (!b.trace.empty()) {
      // The requests in the framework's order (Buffer::trace): the ones never freed there are the buffer's blocks.
      std::vector<int> block(b.trace_bytes.size(), -1);
      std::vector<bool> freed(b.trace_bytes.size(), false);
      for (int step : b.trace) {
        if (step >= 0) {
          block[static_cast<size_t>(step)] = a.malloc(b.trace_bytes[static_cast<size_t>(step)], stream_of(task));
        } else {
          a.free(block[static_cast<size_t>(-step - 1)]);
          freed[static_cast<size_t>(-step - 1)] = true;
        }
      }
      for (size_t k = 0; k < block.size(); ++k)
        if (!freed[k] && block[k] >= 0)
          handles[id].push_back(block[k]);
      return;
    }
    if (requests[id].empty())
      requests[id] = allocator_requests(b);
    for (std::int64_t bytes : requests[id])
      handles[id].push_back(a.malloc(bytes, stream_of(task)));
  };
  AllocatorReplay out;
  std::int64_t previous_peak = -1;
  auto free_all = [&](size_t id, bool deferred) {
    for (int h : handles[id]) {
      if (deferred)
        tokens[id].push_back(a.free_deferred(h));
      else
        a.free(h);
    }
    handles[id].clear();
  };
  // torch.optim's lazily created state (Buffer::lazy): allocated in the first step, before the first event of its
  // optimizer (the first OPTIMIZER task in issue order), or at the step's end when no event follows.
  spec::TaskId first_optimizer = static_cast<spec::TaskId>(g.tasks.size());
  for (size_t i = 0; i < g.tasks.size(); ++i)
    if (g.tasks[i].phase == spec::Phase::OPTIMIZER) {
      first_optimizer = static_cast<spec::TaskId>(i);
      break;
    }
  bool lazy_done = false;
  auto create_lazy = [&]() {
    if (lazy_done)
      return;
    lazy_done = true;
    for (auto id : g.resident) {
      const spec::Buffer& b = g.buffers[static_cast<size_t>(id)];
      if (b.lazy && b.device == spec::Device::GPU && b.bytes > 0)
        malloc_all(static_cast<size_t>(id), -1);
    }
  };
  std::vector<std::int64_t> sampled; // this step's reserved at its samples
  for (int step = 0; step < ALLOCATOR_MAX_STEPS; ++step) {
    sampled.clear();
    for (const auto& e : events) {
      if (e.task >= first_optimizer && e.kind != ReplayEvent::Kind::RELEASE)
        create_lazy();
      if (e.kind == ReplayEvent::Kind::SAMPLE) {
        if (reserved_at_samples)
          sampled.push_back(a.reserved());
        continue;
      }
      const auto id = static_cast<size_t>(e.buffer);
      const spec::Buffer& b = g.buffers[id];
      if (b.device != spec::Device::GPU || b.bytes <= 0 || b.in_trace)
        continue; // torch hands out no block for an empty tensor; a traced working set is in its layer's trace
      switch (e.kind) {
      case ReplayEvent::Kind::ALLOC:
        if ((step > 0 && e.task < 0) || (e.task < 0 && b.lazy))
          continue;          // the resident set lives across steps; torch.optim's state comes at the first step
        free_all(id, false); // still live from the previous step: the new tensor replaces it
        malloc_all(id, e.task);
        break;
      case ReplayEvent::Kind::FREE:
        free_all(id, e.deferred);
        out.peak_pending = std::max(out.peak_pending, a.pending());
        break;
      case ReplayEvent::Kind::RELEASE:
        for (int t : tokens[id])
          a.release(t);
        tokens[id].clear();
        break;
      case ReplayEvent::Kind::SAMPLE:
        break;
      }
    }
    create_lazy();
    for (auto& ts : tokens) { // the step's end: its streams are done
      for (int t : ts)
        a.release(t);
      ts.clear();
    }
    out.steps = step + 1;
    if (reserved_at_samples &&
        (reserved_at_samples->empty() || std::find(sampled.begin(), sampled.end(), a.peak_reserved()) != sampled.end()))
      *reserved_at_samples = sampled; // the last step whose samples reach the peak so far
    if (a.peak_reserved() == previous_peak)
      break; // steady state: this step's cache served it without a new segment beyond the peak
    previous_peak = a.peak_reserved();
  }
  out.peak_reserved = a.peak_reserved();
  out.peak_allocated = a.peak_allocated();
  out.ooms = a.ooms();
  out.retries = a.alloc_retries();
  return out;
}

std::vector<ReplayEvent> deferred_free_events(const spec::TaskGraph& g, const std::vector<TaskClock>& clock)
{
  using Kind = ReplayEvent::Kind;
  if (clock.size() != g.tasks.size())
    throw core::InternalError("memory replay: " + std::to_string(clock.size()) + " task times for " +
                              std::to_string(g.tasks.size()) + " tasks");
  // The stream each buffer was allocated on (allocator_stream), to tell a free on another stream.
  std::vector<int> born_on(g.buffers.size(), allocator_stream(g, -1));
  for (size_t i = 0; i < g.tasks.size(); ++i)
    for (auto id : g.tasks[i].allocs)
      if (id >= 0 && static_cast<size_t>(id) < born_on.size())
        born_on[static_cast<size_t>(id)] = allocator_stream(g, static_cast<spec::TaskId>(i));

  struct Pending {
    double at;          // the freeing task's end
    spec::TaskId order; // the freeing task (ties)
    spec::BufferId buffer;
    bool operator>(const Pending& o) const { return std::tie(at, order, buffer) > std::tie(o.at, o.order, o.buffer); }
  };
  std::priority_queue<Pending, std::vector<Pending>, std::greater<>> pending;
  std::vector<ReplayEvent> events;
  for (auto id : g.resident)
    events.push_back({Kind::ALLOC, id, -1});
  events.push_back({Kind::SAMPLE, -1, -1});
  double last_issue = 0;
  for (size_t i = 0; i < g.tasks.size(); ++i) {
    const auto task = static_cast<spec::TaskId>(i);
    // The host reaches the tasks in issue order: a clock that says otherwise (a hand-made timeline) is read as the
    // running latest.
    const double issue = std::max(clock[i].issue, last_issue);
    last_issue = issue;
    // process_events at the next malloc: every event completed by now returns its block.
    while (!pending.empty() && pending.top().at <= issue) {
      events.push_back({Kind::RELEASE, pending.top().buffer, pending.top().order});
      pending.pop();
    }
    for (auto id : g.tasks[i].allocs)
      events.push_back({Kind::ALLOC, id, task});
    events.push_back({Kind::SAMPLE, -1, task});
    const int stream = allocator_stream(g, task);
    for (auto id : g.tasks[i].frees) {
      const bool other = id >= 0 && static_cast<size_t>(id) < born_on.size() &&
                         g.buffers[static_cast<size_t>(id)].record_stream && born_on[static_cast<size_t>(id)] != stream;
      ReplayEvent e{Kind::FREE, id, task};
      e.deferred = other;
      events.push_back(e);
      if (other)
        pending.push({std::max(issue, clock[i].end), task, id});
    }
  }
  while (!pending.empty()) {
    events.push_back({Kind::RELEASE, pending.top().buffer, pending.top().order});
    pending.pop();
  }
  return events;
}

bool has_record_stream(const spec::TaskGraph& g)
{
  return std::any_of(g.buffers.begin(), g.buffers.end(), [](const spec::Buffer& b) { return b.record_stream; });
}

MemoryReport replay_memory(const spec::Scenario& s, const spec::TaskGraph& g)
{
  return replay_events(s, g, issue_order_events(g));
}

} // namespace zerosim::memory
