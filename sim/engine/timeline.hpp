// What a replay returns: the start and end of every task of every simulated rank, and the busy
// intervals of the shared resources (PCIe directions, NICs, the CPU, NVMe) for the trace. Plain data,
// no SimGrid: metrics and report read it.
#pragma once

#include "schedule/task_graph.hpp"

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
  schedule::TaskGraph graph;
  std::vector<TaskTime> times;
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

struct Timeline {
  std::vector<RankTimeline> ranks; ///< the simulated ranks (all of them, or one node's in the symmetric replay)
  std::vector<Track> tracks;
  std::vector<TrackInterval> intervals;
  double step_time_s = 0;    ///< the last task's end over every simulated rank
  std::string replay;        ///< "full" or "symmetric" (meta)
  std::string network_model; ///< SimGrid's network-model settings, as recorded in meta
  long flows = 0;            ///< SimGrid communications the replay created
  long activities = 0;       ///< all SimGrid activities the replay created
};

} // namespace zerosim::engine
