// The discrete-event replay: the schedule's task graphs of the simulated ranks run on a SimGrid
// platform built from the cluster spec (platform/). Streams run their tasks in issue order; a task
// starts when its stream predecessor and its dependencies have ended. A collective is the k-th call on
// one communicator, a group instance (spec::group_instance: the node of an INTRA_NODE group, the local
// index of an INTER_NODE one, ...); it starts when every simulated rank of that instance has reached it
// (in the symmetric replay the instance's ranks off node 0 stand behind node 0's NICs) and moves its
// bytes as NCCL's flows among the instance's GPUs (collectives/). A SEND and the matching RECV (the k-th
// of one sender to one receiver) are one flow between the two GPUs once both have been reached. Copies,
// NVMe I/O and host work are flows and executions on the PCIe tree, the DRAM link and the CPU.
// docs/engine.md "How collectives are matched".
#pragma once

#include "collectives/nccl.hpp"
#include "engine/timeline.hpp"
#include "schedule/step_graph.hpp"
#include "spec/scenario_spec.hpp"
#include "workload/transformer.hpp"

namespace zerosim::engine {

enum class Replay {
  AUTO,      ///< symmetric when the job is homogeneous data parallelism over more than one node, else full
  FULL,      ///< every rank of every node
  SYMMETRIC, ///< node 0's ranks; the other nodes stand behind its NICs (docs/design.md "Speed and scale")
};

/// The collective choices a run may force (NCCL_ALGO, NCCL_PROTO, a hierarchical decomposition). Whether NCCL's
/// protocols and achieved bus bandwidth are priced is the scenario's (spec::Mechanisms `protocols` and `busbw`,
/// `--without protocols|busbw`); the engine sets the planner's focus node and channel merging itself.
struct CollectiveChoice {
  collectives::Algorithm all_reduce = collectives::Algorithm::AUTO; ///< collectives::Options::all_reduce
  bool hierarchical = false;                                        ///< collectives::Options::hierarchical
  collectives::Protocol protocol = collectives::Protocol::AUTO;     ///< collectives::Options::protocol
};

struct EngineOptions {
  Replay replay = Replay::AUTO;
  CollectiveChoice collectives;
  schedule::StepOptions step;
  bool record_tracks = false; ///< fill Timeline::tracks / intervals (for --trace)
  /// Simulate only REUSE_SIMULATED_MICRO_STEPS micro-steps of a longer accumulation and add one measured
  /// period per other micro-step (Timeline::reuse). false: simulate every micro-step.
  bool reuse_accumulation = true;
};

/// Micro-steps simulated under accumulation reuse (defined with the schedule, which builds them).
using schedule::REUSE_SIMULATED_MICRO_STEPS;
/// The full replay builds and replays one task graph per rank: beyond this many ranks it is refused (a resource
/// bound; the symmetric replay has none).
inline constexpr int MAX_FULL_REPLAY_RANKS = 1024;

/// Replays one optimizer step of `s` (with accumulation reuse unless o.reuse_accumulation is false).
/// Throws core::UnsupportedError for what the schedule does not model.
Timeline simulate(const spec::Scenario& s, const workload::Workload& w, const EngineOptions& o = {});

/// Replays the given graphs, one per simulated rank in node-major order (every rank of the cluster in the
/// full replay, node 0's in the symmetric one): hand-made graphs for tests and tools.
Timeline simulate_graphs(const spec::Scenario& s, const workload::Workload& w, std::vector<spec::TaskGraph> graphs,
                         const EngineOptions& o = {});

/// SimGrid's network-model settings this engine uses (recorded in every result's meta).
std::string network_model_description();

} // namespace zerosim::engine
