#include "engine/engine.hpp"
#include "engine/step_replay.hpp"

#include "compute/compute_model.hpp"
#include "core/error.hpp"
#include "core/text.hpp"
#include "platform/platform.hpp"
#include "spec/names.hpp"
#include "spec/placement.hpp"

#include <simgrid/s4u.hpp>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
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
      throw core::InputError(
          s.pp() > 1 ? "--replay symmetric: expected the nodes of each pipeline stage to issue the same communications "
                       "(the symmetric replay simulates the first node of each stage and stands the others behind "
                       "their NICs, docs/engine.md \"Pipelines: the node-set replay\"), found that " +
                           nodes_differ
                     : "--replay symmetric: expected every node to issue the same communications (the symmetric "
                       "replay simulates node 0 and stands the others behind its NICs, docs/engine.md \"Nodes "
                       "alike\"), found that " +
                           nodes_differ);
  }
  if (r == Replay::FULL && s.world() > MAX_FULL_REPLAY_RANKS)
    throw core::InputError("--replay full: expected at most " + std::to_string(MAX_FULL_REPLAY_RANKS) +
                           " ranks for the replay of every rank (one task graph each; measured 4 GiB and 66 s at 512 "
                           "ranks of Llama-2-70B ZeRO-3, docs/engine.md \"Limits\"), found " +
                           std::to_string(s.world()) +
                           (nodes_differ.empty()
                                ? std::string(s.pp() > 1 ? "; the symmetric replay (the default beyond one node) "
                                                           "simulates one node per pipeline stage"
                                                         : "; the symmetric replay (the default beyond one node) "
                                                           "simulates one node")
                                : "; the symmetric replay does not apply: " + nodes_differ));
  return r;
}

namespace {

/// The first node of the pipeline stage of node n's first rank (n itself without a pipeline stage spanning nodes).
int stage_first_node(const spec::Scenario& s, int n)
{
  const std::int64_t G = s.cluster.gpus_per_node;
  if (s.pp() <= 1)
    return 0;
  const std::int64_t per_stage = static_cast<std::int64_t>(s.world()) / s.pp();
  const std::int64_t stage = n * G / per_stage;
  return static_cast<int>(stage * per_stage / G);
}

/// Whether every node's rank g issues the communications of rank g of the first node of its stage (node 0 without a
/// pipeline; `graphs`: every rank, node-major).
bool graphs_alike(const spec::Scenario& s, const std::vector<spec::TaskGraph>& graphs)
{
  const auto G = static_cast<std::size_t>(s.cluster.gpus_per_node);
  for (std::size_t i = G; i < graphs.size(); ++i) {
    const auto n = static_cast<int>(i / G);
    const auto first = static_cast<std::size_t>(stage_first_node(s, n));
    if (first != static_cast<std::size_t>(n) && !spec::same_communications(graphs[first * G + i % G], graphs[i]))
      return false;
  }
  return true;
}

/// Accumulation reuse (docs/design.md "Speed and scale"): the middle micro-steps run the same program from the same
/// state, so the graphs hold micro-steps 0 .. k-2 and g-1, and each of the g - k others adds the period between the
/// first starts of micro-steps k-2 and g-1 (consecutive in the simulated timeline). Under a pipeline the starts are
/// stage 0's (its forward of a micro-batch, the micro-batch's first work; a later stage may post its receive for it
/// earlier and wait): docs/engine.md "Accumulation reuse under a pipeline".
void add_reused_micro_steps(const spec::Scenario& s, Timeline& t)
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
  for (const RankTimeline& rt : t.ranks) {
    if (s.pp() > 1 && spec::coords_of(rt.rank, s.tp(), s.dp()).stage != 0)
      continue;
    for (std::size_t i = 0; i < rt.times.size(); ++i) {
      const int mb = rt.graph.tasks[i].micro_step;
      if (mb == before)
        start1 = std::min(start1, rt.times[i].start);
      else if (mb == g - 1)
        start2 = std::min(start2, rt.times[i].start);
    }
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

std::vector<int> simulated_nodes(const spec::Scenario& s, Replay resolved)
{
  if (resolved == Replay::AUTO)
    throw core::InternalError("simulated_nodes: the replay is not resolved (engine::resolve_replay)");
  std::vector<int> nodes;
  if (resolved == Replay::FULL || s.cluster.nodes <= 1) {
    for (int n = 0; n < s.cluster.nodes; ++n)
      nodes.push_back(n);
    return nodes;
  }
  const int p = s.pp();
  const std::int64_t per_stage = static_cast<std::int64_t>(s.world()) / p, G = s.cluster.gpus_per_node;
  for (int stage = 0; stage < p; ++stage) {
    const auto n = static_cast<int>(stage * per_stage / G); // the node of rank stage x D x T
    if (nodes.empty() || nodes.back() != n)
      nodes.push_back(n);
  }
  return nodes;
}

Timeline simulate_graphs(const spec::Scenario& s, const workload::Workload& w, std::vector<spec::TaskGraph> graphs,
                         const EngineOptions& o, const std::vector<int>& copy_of)
{
  const int G = s.cluster.gpus_per_node;
  // The symmetric replay's nodes: node 0, or the first node of each pipeline stage. When they are every node (stages
  // within a node), the symmetric replay is the full one.
  std::vector<int> nodes = simulated_nodes(s, Replay::SYMMETRIC);
  const bool stand_ins = static_cast<int>(nodes.size()) < s.cluster.nodes;
  bool symmetric = stand_ins && graphs.size() == nodes.size() * static_cast<std::size_t>(G);
  std::vector<int> kept_copy_of = copy_of;
  if (s.cluster.nodes > 1 && graphs.size() == static_cast<std::size_t>(s.world()) && o.replay != Replay::FULL) {
    const bool alike = graphs_alike(s, graphs);
    if (!alike && o.replay == Replay::SYMMETRIC)
      throw core::InputError(s.pp() > 1 ? "--replay symmetric: expected the nodes of each pipeline stage to issue the "
                                          "same communications as its first node (docs/engine.md \"Pipelines: the "
                                          "node-set replay\"), found nodes whose graphs differ"
                                        : "--replay symmetric: expected every node to issue the same communications as "
                                          "node 0 (docs/engine.md \"Nodes alike\"), found nodes whose graphs differ");
    symmetric = alike && stand_ins;
    if (symmetric) { // the simulated nodes' graphs, node-major; a copy's original is renumbered, or gone
      std::vector<int> index(graphs.size(), -1);
      std::vector<spec::TaskGraph> kept;
      for (int n : nodes)
        for (std::size_t g = 0; g < static_cast<std::size_t>(G); ++g) {
          const std::size_t i = static_cast<std::size_t>(n) * static_cast<std::size_t>(G) + g;
          index[i] = static_cast<int>(kept.size());
          kept.push_back(std::move(graphs[i]));
        }
      if (!copy_of.empty()) {
        kept_copy_of.clear();
        for (int n : nodes)
          for (std::size_t g = 0; g < static_cast<std::size_t>(G); ++g) {
            const std::size_t i = static_cast<std::size_t>(n) * static_cast<std::size_t>(G) + g;
            const int from = i < copy_of.size() ? copy_of[i] : -1;
            kept_copy_of.push_back(from >= 0 ? index[static_cast<std::size_t>(from)] : -1);
          }
      }
      graphs = std::move(kept);
    }
  }
  if (symmetric && o.replay == Replay::FULL)
    throw core::InternalError("simulate_graphs: the full replay needs every rank's graph, given the simulated nodes'");
  if (graphs.empty())
    throw core::InternalError("simulate_graphs: no graph");
  if (!symmetric)
    nodes = simulated_nodes(s, Replay::FULL);
  StepReplay r(s, w, o, std::move(nodes), std::move(graphs), kept_copy_of);
  Timeline t = r.run();
  add_reused_micro_steps(s, t);
  return t;
}

} // namespace zerosim::engine
