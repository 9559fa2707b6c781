#include "run/run_scenario.hpp"
#include "spec/placement.hpp"

#include <algorithm>
#include <map>
#include <utility>
#include <vector>

namespace zerosim::run {

namespace {

/// The ranks schedule::memory_ranks names that the replay did not simulate, each with its graph built as the
/// replay's were, and the request's passes: what the memory replay and the metrics read besides the simulated ranks.
void add_memory_only_ranks(const spec::Scenario& s, const workload::Workload& w, const schedule::StepOptions& step,
                           engine::Timeline& t)
{
  if (s.training.mode == spec::Mode::INFERENCE)
    t.request_passes = schedule::inference_passes(s);
  std::vector<bool> simulated(static_cast<std::size_t>(s.world()), false);
  for (const engine::RankTimeline& r : t.ranks)
    if (r.rank >= 0 && r.rank < s.world())
      simulated[static_cast<std::size_t>(r.rank)] = true;
  const bool one_program = !schedule::graph_depends_on_rank(s) && s.pp() == 1;
  t.memory_ranks = schedule::memory_ranks(s, w);
  std::sort(t.memory_ranks.begin(), t.memory_ranks.end());
  for (int rank : t.memory_ranks)
    if (!simulated[static_cast<std::size_t>(rank)]) {
      if (one_program && !t.ranks.empty()) { // the same program as the simulated ranks': a copy of the first's graph
        engine::RankGraph copy{rank, t.ranks.front().graph, 0};
        copy.graph.rank = rank;
        t.memory_only_ranks.push_back(std::move(copy));
      } else {
        t.memory_only_ranks.push_back(engine::RankGraph{rank, schedule::build_step_graph(s, w, rank, step), -1});
      }
    }
}

} // namespace

engine::Timeline simulate_step(const spec::Scenario& s, const workload::Workload& w, const RunOptions& o)
{
  schedule::StepOptions step = o.step;
  step.simulated_micro_steps = o.reuse_accumulation ? schedule::reused_micro_steps_to_build(s) : 0;
  engine::EngineOptions eo = o.engine;
  eo.replay = engine::resolve_replay(s, o.engine.replay, schedule::nodes_differ(s));
  // The ranks of the nodes the replay simulates, node-major: every node, node 0, or each pipeline stage's first node.
  const int G = s.cluster.gpus_per_node;
  std::vector<int> ranks;
  for (int n : engine::simulated_nodes(s, eo.replay))
    for (int local = 0; local < G; ++local)
      ranks.push_back(n * G + local);
  // Where every rank runs the same program (schedule::graph_depends_on_rank; never across pipeline stages), the first
  // rank's graph is built and the others copy it: the same tasks, buffers and names, only TaskGraph::rank differs.
  const bool one_program = !schedule::graph_depends_on_rank(s) && s.pp() == 1;
  // A pipeline stage's ranks at ZeRO stage 0 run one program but for their neighbours' ranks (nothing is partitioned
  // by the data-parallel rank): the stage's first simulated rank's graph, its SEND/RECV peers moved by the rank's
  // offset from it (docs/pipeline-parallel.md §1: a rank's peers share its data and model coordinates).
  const bool stage_program = s.pp() > 1 && s.framework == spec::Framework::DEEPSPEED && s.deepspeed.zero.stage == 0;
  std::map<int, std::size_t> first_of_stage; // stage -> index into graphs
  std::vector<spec::TaskGraph> graphs;
  std::vector<int> copy_of(ranks.size(), -1);
  graphs.reserve(ranks.size());
  for (std::size_t i = 0; i < ranks.size(); ++i) {
    const int stage = spec::coords_of(ranks[i], s.tp(), s.dp()).stage;
    const auto first = first_of_stage.find(stage);
    if (one_program && i > 0) {
      graphs.push_back(graphs.front());
      graphs.back().rank = ranks[i];
      copy_of[i] = 0;
    } else if (stage_program && first != first_of_stage.end()) {
      graphs.push_back(graphs[first->second]);
      spec::TaskGraph& copy = graphs.back();
      const int offset = ranks[i] - copy.rank;
      copy.rank = ranks[i];
      for (spec::Task& task : copy.tasks)
        if (task.kind == spec::TaskKind::SEND || task.kind == spec::TaskKind::RECV)
          task.peer += offset;
      copy_of[i] = static_cast<int>(first->second);
    } else {
      if (stage_program)
        first_of_stage.emplace(stage, i);
      graphs.push_back(schedule::build_step_graph(s, w, ranks[i], step));
    }
  }
  engine::Timeline t = engine::simulate_graphs(s, w, std::move(graphs), eo, copy_of);
  // An inference request accumulates nothing: its graph's micro-steps are the request's passes
  // (Timeline::request_passes), and the step is one micro-step, simulated.
  if (s.training.mode == spec::Mode::INFERENCE)
    t.reuse = engine::AccumulationReuse{1, 1, 0, 0, t.step_time_s};
  add_memory_only_ranks(s, w, step, t);
  return t;
}

std::vector<LadderStep> ladder_if_unfit(const spec::Scenario& s, const metrics::RunMetrics& m)
{
  // The verdict is the metrics' (allocated at simulated times, reserved with the caching allocator); the rungs
  // above it are judged as `zerosim memory` judges them.
  return m.memory.fits ? std::vector<LadderStep>{} : climb_ladder(s);
}

RunResult run_scenario(const spec::Scenario& s, const RunOptions& o)
{
  RunResult r;
  r.workload = workload::build_workload(s.model, workload::workload_options(s));
  r.timeline = simulate_step(s, r.workload, o);
  r.metrics = metrics::compute_metrics(s, r.workload, r.timeline);
  r.ladder = ladder_if_unfit(s, r.metrics);
  return r;
}

} // namespace zerosim::run
