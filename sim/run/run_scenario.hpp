// One scenario end to end, the pipeline every command shares: the workload, the engine's replay, the metrics and,
// when the step does not fit, the ladder. `zerosim run`, the sweep's points, the validation's cases and the
// benchmarks call this; the report formats its result. docs/architecture.md.
#pragma once

#include "engine/engine.hpp"
#include "engine/timeline.hpp"
#include "metrics/run_metrics.hpp"
#include "run/memory_analysis.hpp"
#include "spec/scenario_spec.hpp"
#include "workload/transformer.hpp"

#include <vector>

namespace zerosim::run {

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

/// Builds the scenario's workload, replays its step on the engine, computes the metrics and the ladder.
RunResult run_scenario(const spec::Scenario& s, const engine::EngineOptions& o = {});

} // namespace zerosim::run
