// Peak memory per GPU, per host and per NVMe device, from the schedule's allocation events
// replayed in issue order; the fit verdict per tier; the allocator and runtime terms (stated models).
#pragma once

#include "schedule/task_graph.hpp"
#include "spec/scenario_spec.hpp"

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace zerosim::memory {

struct MemoryReport {
  // peak_memory_bytes (scenario-format.md "Results")
  std::int64_t gpu = 0;                 ///< max over the step of the live sum on one GPU (torch max allocated)
  std::int64_t gpu_reserved = 0;        ///< + caching-allocator fragmentation (stated model)
  std::int64_t gpu_device = 0;          ///< + CUDA context and NCCL buffers (stated model)
  std::int64_t cpu_per_node = 0;        ///< all ranks of the node
  std::int64_t cpu_pinned_per_node = 0;
  std::int64_t nvme_per_node = 0;
  /// memory_breakdown_bytes at the GPU peak, indexed by schedule::MemCategory; sums to `gpu`.
  std::array<std::int64_t, schedule::MEM_CATEGORY_COUNT> breakdown{};
  std::string peak_task;                ///< the task at which the GPU peak occurs

  // the stated model terms (for the report)
  std::int64_t fragmentation_bytes = 0;
  std::int64_t cuda_context_bytes = 0;
  std::int64_t nccl_bytes = 0;

  // capacities and verdict
  std::int64_t gpu_capacity = 0;
  std::int64_t cpu_capacity = 0;        ///< cpu.memory - cpu.reserved
  std::int64_t nvme_capacity = 0;       ///< devices x capacity
  bool fit_gpu = true, fit_cpu = true, fit_nvme = true;
  bool fits = true;
  std::int64_t shortfall_bytes = 0;     ///< the largest overflow over the tiers
};

/// Replay `g`'s allocation events in issue order.
MemoryReport replay_memory(const spec::Scenario& s, const schedule::TaskGraph& g);

/// Workload, schedule and replay for `s`.
MemoryReport analyze_memory(const spec::Scenario& s);

/// One rung of the seed's ladder (scenario-format.md "Command line"), applied cumulatively.
struct LadderStep {
  std::string change;                   ///< e.g. "activation_checkpointing: full"
  spec::Scenario scenario;              ///< with this and every earlier rung applied
  MemoryReport report;
};

/// Climb the ladder (micro-batch 1, activation checkpointing, stage 2, optimizer offload, stage 3,
/// parameter offload, NVMe) from `s` until the memory fits. Returns the rungs tried, the last one
/// fitting; empty if `s` already fits. If no rung fits, the last rung tried is returned with fits=false.
std::vector<LadderStep> climb_ladder(const spec::Scenario& s);

} // namespace zerosim::memory
