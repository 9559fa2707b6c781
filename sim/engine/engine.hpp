// The discrete-event replay: the task graphs of the simulated ranks (built by the schedule and handed over by
// run::simulate_step, or made by hand in tests) run on a SimGrid platform built from the cluster spec (platform/).
// The engine includes nothing from schedule/. Streams run their tasks in issue order; a task
// starts when its stream predecessor and its dependencies have ended. A collective is the k-th call on
// one communicator, a group instance (spec::group_instance: the node of an INTRA_NODE group, the local
// index of an INTER_NODE one, ...); it starts when every simulated rank of that instance has reached it
// (in the symmetric replay the instance's ranks off the simulated nodes stand behind their NICs) and moves its
// bytes as NCCL's flows among the instance's GPUs (collectives/). A SEND and the matching RECV (the k-th
// of one sender to one receiver) are one flow between the two GPUs once both have been reached. Copies,
// NVMe I/O and host work are flows and executions on the PCIe tree, the DRAM link and the CPU.
// docs/engine.md "How collectives are matched".
#pragma once

#include "collectives/nccl.hpp"
#include "engine/timeline.hpp"
#include "spec/scenario_spec.hpp"
#include "workload/transformer.hpp"

#include <string>
#include <vector>

namespace zerosim::engine {

enum class Replay {
  AUTO, ///< symmetric when there is more than one node and every node (of each stage) issues the same communications
  FULL, ///< every rank of every node
  /// node 0's ranks, the other nodes behind its NICs (docs/design.md "Speed and scale"); with pipeline stages, the
  /// ranks of the first node of each stage, the other nodes behind their NICs (docs/engine.md "Pipelines: the node-set
  /// replay")
  SYMMETRIC,
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
  bool record_tracks = false; ///< fill Timeline::tracks / intervals (for --trace)
};
/// The full replay builds and replays one task graph per rank: beyond this many ranks it is refused (a resource
/// bound; the symmetric replay has none).
inline constexpr int MAX_FULL_REPLAY_RANKS = 1024;

/// The replay `asked` resolves to for `s`, FULL or SYMMETRIC: AUTO is symmetric beyond one node when every node issues
/// the same communications as the other nodes of its pipeline stage (`nodes_differ` empty; else it says why not,
/// schedule::nodes_differ), full otherwise. One node is always replayed whole. Throws core::InputError for `--replay
/// symmetric` on nodes that differ, and for a full replay of more than MAX_FULL_REPLAY_RANKS ranks.
Replay resolve_replay(const spec::Scenario& s, Replay asked, const std::string& nodes_differ);

/// The nodes replay `resolved` (FULL or SYMMETRIC) simulates, ascending: FULL every node; SYMMETRIC node 0 without a
/// pipeline, and with p > 1 stages the first node of each stage, the node of rank stage x D x T (distinct nodes only:
/// stages that share a node share it). The caller builds the graphs of exactly these nodes' ranks, node-major.
/// Throws core::InternalError for AUTO (resolve it first).
std::vector<int> simulated_nodes(const spec::Scenario& s, Replay resolved);

/// Replays the given graphs, one per simulated rank in node-major order: every rank of the cluster, or the ranks of
/// simulated_nodes(s, SYMMETRIC) for the symmetric replay (the caller has resolved the replay, resolve_replay). Given
/// every rank's graphs, AUTO and SYMMETRIC compare the nodes' communications (spec::same_communications; with a
/// pipeline, each node with the first node of its stage): alike, the simulated nodes' are replayed symmetrically; else
/// AUTO replays them all and SYMMETRIC is refused (core::InputError). A graph built under
/// accumulation reuse (TaskGraph::reused_micro_steps > 0) adds one measured period per micro-step it does not hold
/// (Timeline::reuse, docs/engine.md "Accumulation reuse"). `copy_of[i]` >= 0: graph i is graph copy_of[i] but for
/// TaskGraph::rank (RankTimeline::graph_copy_of); empty: none is.
Timeline simulate_graphs(const spec::Scenario& s, const workload::Workload& w, std::vector<spec::TaskGraph> graphs,
                         const EngineOptions& o = {}, const std::vector<int>& copy_of = {});

/// SimGrid's network-model settings this engine uses (recorded in every result's meta).
std::string network_model_description();

} // namespace zerosim::engine
