// Peak memory per GPU, per host and per NVMe device, from a task graph's allocation events
// replayed in issue order; the fit verdict per tier; the allocator and runtime terms (stated models).
// The pure graph -> peak replay: building the workload and the graphs, and the ladder, are
// run/memory_analysis.hpp's.
#pragma once

#include "memory/caching_allocator.hpp"
#include "spec/scenario_spec.hpp"
#include "spec/task_graph.hpp"

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace zerosim::memory {

// ---- Stated models (docs/memory.md gives each term with its source) ----

/// The reserved share of the old rule (spec::Mechanisms::allocator off): (reserved - allocated) / allocated, the
/// median of the ten T5-11B FSDP rows (331-344) of results/validation/published.csv, "peak allocated X / active Y /
/// reserved Z GB": 0.146, 0.171, 0.175, 0.175, 0.175, 0.209, 0.261, 0.333, 0.381, 0.444 (median 0.192). Kept for the
/// ablation only: with the mechanism on, reserved is the caching allocator's replay (caching_allocator.hpp).
inline constexpr double ALLOCATOR_FRAGMENTATION_FRACTION = 0.19;
/// Replays of the step the allocator runs at most to reach its steady state (the cache a step leaves is the next
/// step's): it stops at the first replay that does not raise the reserved peak (docs/memory.md §2.1).
inline constexpr int ALLOCATOR_MAX_STEPS = 4;
/// CUDA context (driver state, module images under CUDA 12 lazy loading, cuBLAS/cuDNN handles): a stated
/// 500 MiB per process on A100/H100 (docs/memory.md).
inline constexpr std::int64_t CUDA_CONTEXT_BYTES = 500LL * 1024 * 1024;
/// NCCL_BUFFSIZE: the Simple-protocol buffer of one connection of one channel, 4 MiB by default (NCCL docs).
inline constexpr std::int64_t NCCL_BUFFSIZE_BYTES = 4LL * 1024 * 1024;
/// Channels of a communicator: a stated 16 (NCCL's ring channel count on NVLink/NVSwitch A100/H100 nodes is
/// typically 16 to 32; docs/memory.md).
inline constexpr int NCCL_CHANNELS = 16;
/// Peer connections per channel of one rank in a ring: one to the next rank (send), one from the previous (recv).
inline constexpr int NCCL_RING_CONNECTIONS = 2;

/// The bytes the caching allocator holds for one live request of `bytes` on its own: 512-B blocks below kMinLargeAlloc,
/// a segment rounded to 2 MiB at or above it (gpu_rounded; the floor of the old rule's gpu_reserved).
std::int64_t allocator_block_bytes(std::int64_t bytes);

/// NCCL buffers of one rank: NCCL_BUFFSIZE x NCCL_CHANNELS x NCCL_RING_CONNECTIONS for the data-parallel
/// communicator when dp > 1; 0 when dp == 1 (no peers, no connections).
std::int64_t nccl_buffer_bytes(int dp);

/// The share of GPU memory advice keeps free by default (docs/recommend.md "Headroom"): max(5 %, the median |error|
/// of the reserved-memory predictions over the published runs, results/validation/memory.md: 17.7 % over 9 rows).
/// tests/unit/cli/headroom_test.cpp fails when memory.md's figure and this one part.
constexpr double DEFAULT_HEADROOM = 0.177;

/// Whether a GPU peak of `device` bytes on `capacity` fits but leaves less than `headroom` (a fraction) free.
inline bool is_tight(double device, double capacity, double headroom)
{
  return device <= capacity && capacity - device < headroom * capacity;
}

struct MemoryReport {
  int rank = 0; ///< the global rank these figures are of (the replayed graph's TaskGraph::rank)
  // peak_memory_bytes (docs/scenario-format.md "Results")
  std::int64_t gpu = 0;          ///< max over the step of the live sum on one GPU (torch max allocated)
  std::int64_t gpu_reserved = 0; ///< peak of the caching allocator's segments (torch max reserved)
  std::int64_t gpu_device = 0;   ///< + CUDA context and NCCL buffers (stated model)
  std::int64_t cpu_per_node = 0; ///< all ranks of the node
  std::int64_t cpu_pinned_per_node = 0;
  std::int64_t nvme_per_node = 0;
  /// memory_breakdown_bytes at the GPU peak, indexed by spec::MemCategory; sums to `gpu`.
  std::array<std::int64_t, spec::MEM_CATEGORY_COUNT> breakdown{};
  std::string peak_task; ///< the task at which the GPU peak occurs
  // per rank (one process; the node figures above are gpus_per_node times these)
  std::int64_t cpu_per_rank = 0;        ///< max over the step of the rank's live host bytes (pinned included)
  std::int64_t cpu_pinned_per_rank = 0; ///< max over the step of the rank's live pinned host bytes
  std::int64_t nvme_per_rank = 0;       ///< max over the step of the rank's live NVMe bytes
  std::int64_t gpu_rounded = 0;         ///< max over the step of the live sum, each buffer in allocator blocks

  // the stated model terms (for the report)
  std::int64_t fragmentation_bytes = 0; ///< gpu_reserved - gpu
  /// Which rule gave gpu_reserved: the caching allocator's replay (spec::Mechanisms::allocator, the default) or the
  /// old fraction ALLOCATOR_FRAGMENTATION_FRACTION.
  bool allocator_mechanism = true;
  int allocator_ooms =
      0; ///< segments the allocator could not fit beside the context and NCCL, even after freeing its cache
  int allocator_retries = 0; ///< times it freed its cached segments to make room (num_alloc_retries)
  int allocator_steps = 0;   ///< steps replayed to reach the steady state
  /// The most bytes the allocator held freed but awaiting another stream's event (record_stream); 0 in issue order.
  std::int64_t allocator_pending_bytes = 0;
  std::int64_t cuda_context_bytes = 0;
  std::int64_t nccl_bytes = 0;

  // capacities and verdict
  std::int64_t gpu_capacity = 0;
  std::int64_t cpu_capacity = 0;  ///< cpu.memory - cpu.reserved
  std::int64_t nvme_capacity = 0; ///< devices x capacity
  bool fit_gpu = true, fit_cpu = true, fit_nvme = true;
  bool fits = true;
  /// The GPU fits but leaves less than DEFAULT_HEADROOM of its memory free (is_tight): within the error of the
  /// reserved-memory prediction, so a real run may not fit.
  bool tight_gpu = false;
  std::int64_t shortfall_bytes = 0; ///< the largest overflow over the tiers
};

/// One event of a memory replay on a task graph's buffers.
struct ReplayEvent {
  enum class Kind {
    ALLOC,  ///< `buffer` becomes live
    FREE,   ///< `buffer` is released
    SAMPLE, ///< the live sums are a candidate peak; the instant is named after `task`
    /// The caching allocator only: the block of `buffer`, freed earlier with `deferred`, returns to its pool (the
    /// event recorded on the stream that used it has completed). The live sums ignore it.
    RELEASE,
  };
  Kind kind = Kind::SAMPLE;
  spec::BufferId buffer = -1; ///< ALLOC, FREE, RELEASE
  spec::TaskId task = -1;     ///< the task the event belongs to; -1: the resident set (before the step)
  /// FREE only: the buffer was used on a stream other than the one it was allocated on (record_stream), so its
  /// block awaits a RELEASE before the allocator can reuse it. The live sums drop at the FREE all the same.
  bool deferred = false;
};

/// When the host issued each task of a graph and when its work ended on the device (seconds from the step's
/// start, by task index): plain data from a simulated timeline.
struct TaskClock {
  double issue = 0;
  double end = 0;
};

/// The issue-order sequence of `g` (what replay_memory replays): the resident set, a sample, then per task
/// in issue order its allocations, a sample, its frees (a task's allocations are live while it runs).
std::vector<ReplayEvent> issue_order_events(const spec::TaskGraph& g);

/// Replay `events` on `g`'s buffers in the order given: the peaks at the samples (the first sample reaching
/// the GPU maximum names it), then the allocator, CUDA context and NCCL terms, the per-node sums and the
/// verdict. Throws core::InternalError when an event names an unknown buffer, allocates a live one or frees
/// one that is not live. The order is the caller's: issue order here, simulated times in metrics/.
MemoryReport replay_events(const spec::Scenario& s, const spec::TaskGraph& g, const std::vector<ReplayEvent>& events);

/// The caching allocator replayed over `events` (their GPU buffers of positive size; the stream of a buffer is that of
/// the task allocating it, the default stream for the resident set and host-side tasks), step after step until a
/// step leaves the reserved peak unchanged (at most ALLOCATOR_MAX_STEPS): buffers alive across steps (the resident
/// set) are allocated once, a buffer still live when the next step allocates it again is freed first.
/// `device_limit_bytes`: what cudaMalloc may hand out (the device less the CUDA context and NCCL buffers).
struct AllocatorReplay {
  std::int64_t peak_reserved = 0;
  std::int64_t peak_allocated = 0; ///< in allocator blocks (torch's allocated_bytes counts whole blocks)
  int ooms = 0;
  int retries = 0;
  int steps = 0;
  std::int64_t peak_pending = 0; ///< the most bytes freed at once but awaiting another stream's event
};
/// `reserved_at_samples`, when given, receives the reserved bytes at every SAMPLE of `events` in the replayed step that
/// reaches the reserved peak (the last such step): the step drawn by `run --plots`.
AllocatorReplay replay_allocator(const spec::TaskGraph& g, const std::vector<ReplayEvent>& events,
                                 std::int64_t device_limit_bytes,
                                 std::vector<std::int64_t>* reserved_at_samples = nullptr);

/// The caching allocator's events at simulated times (docs/design.md "Memory": `zerosim run` replays at simulated
/// times): issue order (the host allocates and frees when it reaches a task; `clock` issue times are in issue order),
/// with every buffer the framework frees with record_stream (Buffer::record_stream) by a task of another stream than
/// the one that allocated it freed `deferred`, and its RELEASE placed before the first task the host issues at or after
/// the freeing task's end (process_events runs at the start of every malloc). `clock` has one entry per task of `g`.
std::vector<ReplayEvent> deferred_free_events(const spec::TaskGraph& g, const std::vector<TaskClock>& clock);

/// Whether some buffer of `g` is freed with record_stream (Buffer::record_stream: FSDP1's). Only then does the caching
/// allocator at simulated times (deferred_free_events) differ from the replay in issue order.
bool has_record_stream(const spec::TaskGraph& g);

/// Re-derives `r`'s reserved, device and verdict terms from the caching allocator replayed over `events` (the
/// live sums in `r` stay): what `zerosim run` does with deferred_free_events. Without spec::Mechanisms::allocator
/// the old fraction applies and `events` are not used.
void settle_gpu_terms(const spec::Scenario& s, const spec::TaskGraph& g, const std::vector<ReplayEvent>& events,
                      MemoryReport& r);

/// The GPU memory at one SAMPLE of a replay (what `run --plots` draws over the step).
struct MemorySample {
  spec::TaskId task = -1;     ///< the task the sample is named after; -1: the resident set, before the step
  std::int64_t allocated = 0; ///< the live sum, torch's allocated count (MemoryReport::gpu is its maximum)
  std::array<std::int64_t, spec::MEM_CATEGORY_COUNT> by_category{}; ///< `allocated` by spec::MemCategory
  /// The caching allocator's segments in the replayed step that reaches the reserved peak, bounded as
  /// settle_gpu_terms bounds the peak (never below the live blocks, never above what the context and NCCL leave);
  /// MemoryReport::gpu_reserved is its maximum. Without spec::Mechanisms::allocator: the old fraction of `allocated`.
  std::int64_t reserved = 0;
};

/// Allocated and reserved at every SAMPLE of `events` on `g`, counted as replay_events and settle_gpu_terms count
/// them: the maximum of `allocated` is their `gpu`, the maximum of `reserved` their `gpu_reserved`.
std::vector<MemorySample> memory_samples(const spec::Scenario& s, const spec::TaskGraph& g,
                                         const std::vector<ReplayEvent>& events);

/// Replay `g`'s allocation events in issue order (replay_events over issue_order_events).
MemoryReport replay_memory(const spec::Scenario& s, const spec::TaskGraph& g);

} // namespace zerosim::memory
