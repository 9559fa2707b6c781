// DeepSpeed ZeRO stages 0-3 with their offload placements, turned into the task graph of one
// optimizer step (zero-schedule.md §1-§10, §12). Every rule that is not obvious cites its section.
#pragma once

#include "schedule/task_graph.hpp"
#include "spec/scenario_spec.hpp"
#include "workload/transformer.hpp"

namespace zerosim::schedule {

/// The graph of one optimizer step (all `grad_accum` micro-steps and the step) of `rank`.
/// Throws core::UnsupportedError for configurations not modelled yet (FSDP and DDP before issue 4).
TaskGraph build_step_graph(const spec::Scenario& s, const workload::Workload& w, int rank = 0);

} // namespace zerosim::schedule
