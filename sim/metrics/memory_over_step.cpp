#include "metrics/memory_over_step.hpp"

#include "core/error.hpp"

namespace zerosim::metrics {

namespace {

/// The graph of global rank `rank`: a simulated rank's (or the original it copies), or a memory-only rank's.
const spec::TaskGraph* graph_of(const engine::Timeline& t, int rank)
{
  for (const auto& r : t.ranks)
    if (r.rank == rank)
      return r.graph_copy_of >= 0 ? &t.ranks[static_cast<size_t>(r.graph_copy_of)].graph : &r.graph;
  for (const auto& r : t.memory_only_ranks)
    if (r.rank == rank)
      return r.graph_copy_of >= 0 ? &t.ranks[static_cast<size_t>(r.graph_copy_of)].graph : &r.graph;
  return nullptr;
}

} // namespace

std::vector<MemoryPoint> memory_over_step(const spec::Scenario& s, const engine::Timeline& t, const RunMetrics& m)
{
  const engine::RankTimeline* rt = nullptr;
  for (const auto& r : t.ranks)
    if (r.rank == m.timeline_rank)
      rt = &r;
  const spec::TaskGraph* g = graph_of(t, m.rank);
  if (!rt || !g)
    throw core::InternalError("plots: ranks " + std::to_string(m.rank) + " and " + std::to_string(m.timeline_rank) +
                              " are not in the timeline");
  bool same = g->tasks.size() == rt->graph.tasks.size();
  for (size_t i = 0; same && i < g->tasks.size(); ++i)
    same = g->tasks[i].name == rt->graph.tasks[i].name;
  if (!same)
    throw core::InternalError("plots: rank " + std::to_string(m.rank) +
                              " runs another program than the simulated rank " + std::to_string(m.timeline_rank) +
                              ": its memory cannot be placed in time");
  // The events compute_metrics replayed: issue order; the caching allocator at simulated times where a buffer is
  // freed with record_stream (training).
  std::vector<memory::ReplayEvent> events;
  if (s.training.mode == spec::Mode::TRAIN && memory::has_record_stream(rt->graph)) {
    std::vector<memory::TaskClock> clock(rt->times.size());
    for (size_t i = 0; i < rt->times.size(); ++i)
      clock[i] = {rt->times[i].issue, rt->times[i].end};
    events = memory::deferred_free_events(*g, clock);
  } else {
    events = memory::issue_order_events(*g);
  }
  const StepTimeMap map = step_time_map(t);
  std::vector<MemoryPoint> points;
  for (const memory::MemorySample& sample : memory::memory_samples(s, *g, events)) {
    MemoryPoint p;
    p.sample = sample;
    if (sample.task < 0) {
      p.task = "(resident before the step)";
    } else {
      const auto i = static_cast<size_t>(sample.task);
      const double issue = rt->times[i].issue;
      p.task = g->tasks[i].name;
      p.micro_step = g->tasks[i].micro_step;
      p.time_s = issue + map.shift(issue, p.micro_step);
    }
    points.push_back(std::move(p));
  }
  return points;
}

} // namespace zerosim::metrics
