#include "run/run_scenario.hpp"

namespace zerosim::run {

std::vector<LadderStep> ladder_if_unfit(const spec::Scenario& s, const metrics::RunMetrics& m)
{
  // The verdict is the metrics' (allocated at simulated times, reserved with the caching allocator); the rungs
  // above it are judged as `zerosim memory` judges them.
  return m.memory.fits ? std::vector<LadderStep>{} : climb_ladder(s);
}

RunResult run_scenario(const spec::Scenario& s, const engine::EngineOptions& o)
{
  RunResult r;
  r.workload = workload::build_workload(s.model, workload::workload_options(s));
  r.timeline = engine::simulate(s, r.workload, o);
  r.metrics = metrics::compute_metrics(s, r.workload, r.timeline);
  r.ladder = ladder_if_unfit(s, r.metrics);
  return r;
}

} // namespace zerosim::run
