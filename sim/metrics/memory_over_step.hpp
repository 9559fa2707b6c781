// GPU memory over the step, for `zerosim run --plots` (docs/outputs.md "Plots"): torch's allocated count and the
// caching allocator's reserved bytes at every task the host issues, placed at the task's issue time in the real step
// (metrics::StepTimeMap). Their maxima are the reported peaks (RunMetrics::memory.gpu and .gpu_reserved).
#pragma once

#include "engine/timeline.hpp"
#include "memory/memory_model.hpp"
#include "metrics/run_metrics.hpp"
#include "spec/scenario_spec.hpp"

#include <string>
#include <vector>

namespace zerosim::metrics {

/// One sample: when the host issued the task (s from the step's start, in the real step; 0 for the resident set),
/// the task's name and micro-step (-1: none), and the memory there.
struct MemoryPoint {
  double time_s = 0;
  std::string task; ///< "(resident before the step)" for the resident set
  int micro_step = -1;
  memory::MemorySample sample;
};

/// The memory of the reported rank (`m.rank`) over the step, replayed on the events the metrics replayed (issue order;
/// at simulated times for a graph with record_stream buffers), timed by the simulated rank `m.timeline_rank`, whose
/// program it shares. Throws core::InternalError when the two ranks' graphs do not hold the same tasks.
std::vector<MemoryPoint> memory_over_step(const spec::Scenario& s, const engine::Timeline& t, const RunMetrics& m);

} // namespace zerosim::metrics
