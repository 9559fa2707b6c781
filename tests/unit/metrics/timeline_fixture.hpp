// Hand-made timelines for the metrics and report tests: task times given directly, no engine.
#pragma once

#include "engine/timeline.hpp"
#include "schedule/step_graph.hpp"
#include "spec/scenario_spec.hpp"
#include "workload/transformer.hpp"

#include <algorithm>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace zerosim::test {

/// A task issued and started at `start`, ended at `end` (seconds).
inline engine::TaskTime span(double start, double end)
{
  engine::TaskTime t;
  t.issue = start;
  t.start = start;
  t.end = end;
  return t;
}

inline spec::BufferId buffer(spec::TaskGraph& g, const std::string& name, spec::MemCategory c, std::int64_t bytes)
{
  spec::Buffer b;
  b.name = name;
  b.category = c;
  b.bytes = bytes;
  return g.add_buffer(b);
}

/// Appends a task and its [start, end] to `r`.
inline spec::TaskId add(engine::RankTimeline& r, const std::string& name, spec::TaskKind kind, spec::Phase phase,
                        spec::Stream stream, double start, double end, std::vector<spec::BufferId> allocs = {},
                        std::vector<spec::BufferId> frees = {})
{
  spec::Task t;
  t.name = name;
  t.kind = kind;
  t.phase = phase;
  t.stream = stream;
  t.allocs = std::move(allocs);
  t.frees = std::move(frees);
  r.times.push_back(span(start, end));
  return r.graph.add_task(t);
}

/// The real step graphs of `s` with the tasks of each rank run one after another (task i on [i, i+1] s).
inline engine::Timeline sequential_timeline(const spec::Scenario& s, const workload::Workload& w)
{
  engine::Timeline t;
  for (int rank = 0; rank < s.world(); ++rank) {
    engine::RankTimeline r;
    r.rank = rank;
    r.local = rank;
    r.graph = schedule::build_step_graph(s, w, rank);
    for (size_t i = 0; i < r.graph.tasks.size(); ++i)
      r.times.push_back(span(static_cast<double>(i), static_cast<double>(i + 1)));
    t.step_time_s = std::max(t.step_time_s, static_cast<double>(r.graph.tasks.size()));
    t.ranks.push_back(std::move(r));
  }
  t.replay = "full";
  t.network_model = "test";
  return t;
}

} // namespace zerosim::test
