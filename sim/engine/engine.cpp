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

Replay resolve_replay(const spec::Scenario& s, Replay asked, const std::string& nodes_differ)
{
  Replay r = Replay::FULL;
  if (s.cluster.nodes > 1 && asked != Replay::FULL) {
    if (nodes_differ.empty())
      r = Replay::SYMMETRIC;
    else if (asked == Replay::SYMMETRIC)
      throw core::InputError("--replay symmetric: expected every node to issue the same communications (the "
                             "symmetric replay simulates node 0 and stands the others behind its NICs, docs/engine.md "
                             "\"Nodes alike\"), found that " +
                             nodes_differ);
  }
  if (r == Replay::FULL && s.world() > MAX_FULL_REPLAY_RANKS)
    throw core::InputError("--replay full: expected at most " + std::to_string(MAX_FULL_REPLAY_RANKS) +
                           " ranks for the replay of every rank (one task graph each; measured 4 GiB and 66 s at 512 "
                           "ranks of Llama-2-70B ZeRO-3, docs/engine.md \"Limits\"), found " +
                           std::to_string(s.world()) +
                           (nodes_differ.empty() ? std::string("; the symmetric replay (the default beyond one node) "
                                                               "simulates one node")
                                                 : "; the symmetric replay does not apply: " + nodes_differ));
  return r;
}

namespace {

/// Whether every node's rank g issues the communications of node 0's rank g (`graphs`: every rank, node-major).
bool graphs_alike(const std::vector<spec::TaskGraph>& graphs, int gpus_per_node)
{
  for (std::size_t i = static_cast<std::size_t>(gpus_per_node); i < graphs.size(); ++i)
    if (!spec::same_communications(graphs[i % static_cast<std::size_t>(gpus_per_node)], graphs[i]))
      return false;
  return true;
}

/// Accumulation reuse (docs/design.md "Speed and scale"): the middle micro-steps run the same program from the same
/// state, so the graphs hold micro-steps 0 .. k-2 and g-1, and each of the g - k others adds the period between the
/// first starts of micro-steps k-2 and g-1 (consecutive in the simulated timeline). docs/engine.md.
void add_reused_micro_steps(Timeline& t)
{
  const spec::TaskGraph& first = t.ranks.front().graph;
  const int g = first.micro_steps;
  const int k = g - first.reused_micro_steps;
  if (first.reused_micro_steps == 0) {
    t.reuse = AccumulationReuse{g, g, 0, 0, t.step_time_s};
    return;
  }
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
}

} // namespace

Timeline simulate_graphs(const spec::Scenario& s, const workload::Workload& w, std::vector<spec::TaskGraph> graphs,
                         const EngineOptions& o, const std::vector<int>& copy_of)
{
  const int G = s.cluster.gpus_per_node;
  bool symmetric = s.cluster.nodes > 1 && graphs.size() == static_cast<std::size_t>(G);
  if (s.cluster.nodes > 1 && graphs.size() == static_cast<std::size_t>(s.world()) && o.replay != Replay::FULL) {
    symmetric = graphs_alike(graphs, G);
    if (!symmetric && o.replay == Replay::SYMMETRIC)
      throw core::InputError("--replay symmetric: expected every node to issue the same communications as node 0 "
                             "(docs/engine.md \"Nodes alike\"), found nodes whose graphs differ");
    if (symmetric)
      graphs.resize(static_cast<std::size_t>(G));
  }
  if (symmetric && o.replay == Replay::FULL)
    throw core::InternalError("simulate_graphs: the full replay needs every rank's graph, given node 0's");
  if (graphs.empty())
    throw core::InternalError("simulate_graphs: no graph");
  StepReplay r(s, w, o, symmetric, std::move(graphs), copy_of);
  Timeline t = r.run();
  add_reused_micro_steps(t);
  return t;
}

} // namespace zerosim::engine
