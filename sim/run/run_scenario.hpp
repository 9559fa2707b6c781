// One scenario end to end, the pipeline every command shares: the workload, the schedule's task graphs of the ranks
// the replay simulates, the engine's replay of them, the metrics and, when the step does not fit, the ladder. `zerosim
// run`, the sweep's points, the validation's cases and the benchmarks call this; the report formats its result.
// docs/architecture.md.
#pragma once

#include "engine/engine.hpp"
#include "engine/timeline.hpp"
#include "metrics/run_metrics.hpp"
#include "run/memory_analysis.hpp"
#include "schedule/step_graph.hpp"
#include "spec/scenario_spec.hpp"
#include "workload/transformer.hpp"

#include <vector>

namespace zerosim::run {

/// What a run replays: the engine's choices, which step the graphs describe, and whether accumulation reuse applies.
struct RunOptions {
  engine::EngineOptions engine;
  schedule::StepOptions step; ///< its simulated_micro_steps is set from reuse_accumulation
  /// Simulate only schedule::REUSE_SIMULATED_MICRO_STEPS micro-steps of a longer accumulation and add one measured
  /// period per other micro-step (engine::Timeline::reuse). false: simulate every micro-step.
  bool reuse_accumulation = true;
};

/// One optimizer step of `s` (or one inference request): resolves the replay (engine::resolve_replay on
/// schedule::nodes_differ), builds the graphs of the ranks it simulates (one graph copied where every rank runs the
/// same program, schedule::graph_depends_on_rank), has the engine replay them, and adds the ranks the memory replay
/// reads besides the simulated ones (schedule::memory_ranks) and an inference request's passes. Throws
/// core::UnsupportedError for what the schedule does not model.
engine::Timeline simulate_step(const spec::Scenario& s, const workload::Workload& w, const RunOptions& o = {});

struct RunResult {
  workload::Workload workload;
  engine::Timeline timeline;
  metrics::RunMetrics metrics;
  /// The seed's ladder when the step does not fit (docs/scenario-format.md "Command line"): each rung judged by the
  /// issue-order replay, as `zerosim memory` judges it, without a new simulation. Empty when it fits.
  std::vector<LadderStep> ladder;
};

/// The ladder for a step whose metrics say it does not fit; empty when it fits.
std::vector<LadderStep> ladder_if_unfit(const spec::Scenario& s, const metrics::RunMetrics& m);

/// Builds the scenario's workload, replays its step (simulate_step), computes the metrics and the ladder.
RunResult run_scenario(const spec::Scenario& s, const RunOptions& o = {});

} // namespace zerosim::run
