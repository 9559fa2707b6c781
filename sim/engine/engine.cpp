#include "engine/engine.hpp"
#include "engine/step_replay.hpp"

#include "compute/compute_model.hpp"
#include "core/error.hpp"
#include "core/text.hpp"
#include "platform/platform.hpp"
#include "spec/names.hpp"

#include <simgrid/s4u.hpp>

#include <algorithm>
#include <cmath>
#include <deque>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

namespace zerosim::engine {

using replay::StepReplay;

std::string network_model_description()
{
  return platform::network_model_description();
}

namespace {

/// The ranks schedule::memory_ranks names that the replay did not simulate, each with its graph built as the
/// replay built its own, and the request's passes: what the memory replay and the metrics read besides the
/// simulated ranks.
void add_memory_only_ranks(const spec::Scenario& s, const workload::Workload& w, const schedule::StepOptions& step,
                           Timeline& t)
{
  if (s.training.mode == spec::Mode::INFERENCE)
    t.request_passes = schedule::inference_passes(s);
  std::vector<bool> simulated(static_cast<std::size_t>(s.world()), false);
  for (const RankTimeline& r : t.ranks)
    if (r.rank >= 0 && r.rank < s.world())
      simulated[static_cast<std::size_t>(r.rank)] = true;
  const bool one_program = !schedule::graph_depends_on_rank(s);
  t.memory_ranks = schedule::memory_ranks(s, w);
  std::sort(t.memory_ranks.begin(), t.memory_ranks.end());
  for (int rank : t.memory_ranks)
    if (!simulated[static_cast<std::size_t>(rank)]) {
      if (one_program && !t.ranks.empty()) { // the same program as the simulated ranks': a copy of the first's graph
        RankGraph copy{rank, t.ranks.front().graph, 0};
        copy.graph.rank = rank;
        t.memory_only_ranks.push_back(std::move(copy));
      } else {
        t.memory_only_ranks.push_back(RankGraph{rank, schedule::build_step_graph(s, w, rank, step), -1});
      }
    }
}

} // namespace

Timeline simulate(const spec::Scenario& s, const workload::Workload& w, const EngineOptions& o)
{
  const int g = s.training.grad_accum;
  const int k = REUSE_SIMULATED_MICRO_STEPS;
  EngineOptions opts = o;
  opts.step.simulated_micro_steps = o.reuse_accumulation && g > k ? k : 0;
  StepReplay r(s, w, opts);
  Timeline t = r.run();
  add_memory_only_ranks(s, w, opts.step, t);
  if (opts.step.simulated_micro_steps == 0) {
    t.reuse = AccumulationReuse{g, g, 0, 0, t.step_time_s};
    return t;
  }
  // Accumulation reuse (docs/design.md "Speed and scale"): the middle micro-steps run the same program from the
  // same state, so the replay simulated micro-steps 0 .. k-2 and g-1, and each of the g - k others adds the
  // period between the first starts of micro-steps k-2 and g-1 (consecutive in the simulated timeline).
  // docs/engine.md.
  const int before = k - 2;
  double start1 = std::numeric_limits<double>::infinity(), start2 = start1;
  for (const RankTimeline& rt : t.ranks)
    for (std::size_t i = 0; i < rt.times.size(); ++i) {
      const int mb = rt.graph.tasks[i].micro_step;
      if (mb == before)
        start1 = std::min(start1, rt.times[i].start);
      else if (mb == g - 1)
        start2 = std::min(start2, rt.times[i].start);
    }
  const double period = start2 - start1;
  if (!std::isfinite(period) || !(period > 0))
    throw core::InternalError("engine: accumulation reuse found no period between micro-steps " +
                              std::to_string(before) + " and " + std::to_string(g - 1) + " (" +
                              core::format_number(period) + " s)");
  t.reuse = AccumulationReuse{g, k, period, start1, t.step_time_s};
  t.step_time_s += (g - k) * period;
  return t;
}

Timeline simulate_graphs(const spec::Scenario& s, const workload::Workload& w, std::vector<spec::TaskGraph> graphs,
                         const EngineOptions& o)
{
  StepReplay r(s, w, o, std::move(graphs));
  Timeline t = r.run();
  if (s.training.mode == spec::Mode::INFERENCE)
    t.request_passes = schedule::inference_passes(s);
  const int g = t.ranks.empty() ? 1 : t.ranks.front().graph.micro_steps;
  t.reuse = AccumulationReuse{g, g, 0, 0, t.step_time_s};
  return t;
}

} // namespace zerosim::engine
