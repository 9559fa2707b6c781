// `zerosim memory`'s pipeline, beside run_scenario: the workload and the step graphs of the ranks that matter
// (schedule/), each replayed in issue order (memory/), and the seed's ladder climbed when the step does not fit
// (docs/memory.md §1, §4).
#pragma once

#include "memory/memory_model.hpp"
#include "spec/scenario_spec.hpp"

#include <string>
#include <utility>
#include <vector>

namespace zerosim::run {

/// Workload, schedule and replay for `s`, of the rank with the largest GPU peak (lowest rank on ties), as
/// `zerosim run` reports: ZeRO-1/2 ranks hold different partition ends (schedule::memory_ranks lists the ranks among
/// which the largest lies); everywhere else every rank runs one program and rank 0 stands for all.
memory::MemoryReport analyze_memory(const spec::Scenario& s);

/// One rung of the seed's ladder (docs/scenario-format.md "Command line"), applied cumulatively.
struct LadderStep {
  std::string change;      ///< e.g. "activation_checkpointing: full"
  spec::Scenario scenario; ///< with this and every earlier rung applied
  memory::MemoryReport report;
};

/// The ladder's rungs applied cumulatively to `s` (without computing memory): each entry is the change
/// made and the scenario with it and every earlier rung. Rungs already in effect or that would be a step
/// back are skipped. Rungs: training.micro_batch 1 (the global batch is kept when the user gave it: grad_accum
/// grows), activation checkpointing full (training only), ZeRO stage 2, offload_optimizer cpu, stage 3,
/// offload_param cpu, both offloads nvme. The ZeRO rungs apply to DeepSpeed scenarios only; FSDP climbs to
/// sharding_strategy FULL_SHARD, then cpu_offload (docs/fsdp.md); DDP has no rung of its own.
std::vector<std::pair<std::string, spec::Scenario>> ladder_scenarios(const spec::Scenario& s);

/// Climb the ladder (micro-batch 1, activation checkpointing, stage 2, optimizer offload, stage 3, parameter
/// offload, NVMe) from `s`, for a caller that already knows `s` does not fit: each rung judged by analyze_memory,
/// until the first that fits, or all of them (the last with fits=false).
std::vector<LadderStep> climb_ladder(const spec::Scenario& s);

/// What `zerosim memory` reports.
struct MemoryResult {
  memory::MemoryReport report; ///< analyze_memory of the scenario
  /// The ladder when the scenario does not fit (climb_ladder); empty when it fits.
  std::vector<LadderStep> ladder;
};

/// `zerosim memory`'s pipeline for one scenario, as run_scenario is `zerosim run`'s: analyze_memory, then the ladder
/// when the step does not fit.
MemoryResult analyze_memory_scenario(const spec::Scenario& s);

} // namespace zerosim::run
