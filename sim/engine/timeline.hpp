// What a replay returns: the start and end of every task of every simulated rank, and the busy
// intervals of the shared resources (PCIe directions, NICs, the CPU, NVMe) for the trace. Plain data,
// no SimGrid: metrics and report read it.
#pragma once

#include "spec/task_graph.hpp"

#include <optional>
#include <string>
#include <vector>

namespace zerosim::engine {

struct TaskTime {
  /// When the host issued it: the previous task's issue time, or the end of the task the host last waited
  /// for (Task::host_barrier), whichever is later. The host runs ahead of the GPU between waits.
  double issue = 0;
  double start = 0; ///< seconds from the start of the step
  double end = 0;
};

/// One simulated rank: its task graph and the simulated times of its tasks (same indices).
struct RankTimeline {
  int rank = 0; ///< global rank
  int node = 0;
  int local = 0; ///< GPU index inside the node
  spec::TaskGraph graph;
  std::vector<TaskTime> times;
  /// The index in Timeline::ranks of the rank whose graph this one is a copy of (schedule::graph_depends_on_rank is
  /// false: every rank runs the same program), -1 when it was built for this rank: the memory replay of a copy is
  /// its original's.
  int graph_copy_of = -1;
};

/// A resource row of the trace: "node0 / PCIe gpu1 H2D", "node0 / NIC0 tx", "node0 / CPU", ...
struct Track {
  std::string process; ///< trace process (e.g. "node0")
  std::string name;    ///< trace thread
};

/// A flow or piece of host work on a resource track.
struct TrackInterval {
  int track = 0; ///< index into Timeline::tracks
  double start = 0;
  double end = 0;
  std::string name; ///< the task it serves
};

/// Accumulation reuse (docs/design.md "Speed and scale"): the middle micro-steps are identical, so the replay
/// simulates the first few and the last (schedule::REUSE_SIMULATED_MICRO_STEPS, built by run::simulate_step) and each
/// of the others adds one period. `repeated() == 0`: every micro-step was simulated.
struct AccumulationReuse {
  int micro_steps = 1;           ///< the step's micro-steps (training.grad_accum)
  int simulated_micro_steps = 1; ///< those the replay simulated; the last carries its real index
  double period_s = 0;           ///< what each micro-step not simulated adds to the step
  /// [window_start_s, window_start_s + period_s): one repeated micro-step inside the simulated timeline
  /// (from the first start of the last leading micro-step simulated to the first start of micro-step g-1).
  double window_start_s = 0;
  double simulated_end_s = 0; ///< the simulated timeline's last end
  int repeated() const { return micro_steps - simulated_micro_steps; }
  /// A time of the simulated timeline as a time of the real step (later than the window: shifted).
  double real_time(double t) const
  {
    return t >= window_start_s + period_s && repeated() > 0 ? t + repeated() * period_s : t;
  }
};

/// A rank the replay did not simulate, with the graph the schedule builds for it.
struct RankGraph {
  int rank = 0;
  spec::TaskGraph graph;
  int graph_copy_of = -1; ///< as RankTimeline::graph_copy_of
};

struct Timeline {
  std::vector<RankTimeline> ranks; ///< the simulated ranks (all of them, or one node's in the symmetric replay)
  std::vector<Track> tracks;
  std::vector<TrackInterval> intervals;
  /// The step: the simulated timeline's last end, plus one period per micro-step not simulated (`reuse`).
  double step_time_s = 0;
  AccumulationReuse reuse;
  /// The ranks not simulated (symmetric replay) whose allocations may differ from the simulated ones'
  /// (schedule::memory_ranks), each with its graph built as the replay's were: the memory replay reads them. Filled by
  /// run::simulate_step; empty when a caller hands the engine its own graphs (engine::simulate_graphs).
  std::vector<RankGraph> memory_only_ranks;
  /// schedule::memory_ranks, sorted: the ranks among which the largest GPU peak lies, which `zerosim memory` replays
  /// too; the reported rank is the lowest of them on ties. Filled by run::simulate_step; empty for hand-made graphs
  /// (every rank a candidate).
  std::vector<int> memory_ranks;
  /// Inference: the forward passes of one generate() request (schedule::inference_passes, set by
  /// run::simulate_step); 0 in training.
  int request_passes = 0;
  std::string replay;        ///< "full" or "symmetric" (meta)
  std::string network_model; ///< SimGrid's network-model settings, as recorded in meta
  long flows = 0;            ///< SimGrid communications the replay created
  long activities = 0;       ///< all SimGrid activities the replay created
};

} // namespace zerosim::engine
