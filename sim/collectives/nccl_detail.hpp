// Internal to sim/collectives: the planner's pieces that the group plans (nccl_groups.cpp) reuse.
#pragma once

#include "collectives/nccl.hpp"

#include <functional>
#include <vector>

namespace zerosim::collectives::detail {

/// The flows of one ring pass over the fabric's GPUs, `edge_bytes` on each edge.
std::vector<Flow> ring_flows(const Fabric& f, const Options& o, double edge_bytes);
/// The flows of NCCL's double binary tree over the nodes, `s` bytes.
std::vector<Flow> tree_flows(const Fabric& f, const Options& o, double s);
/// The inter-node phase of the hierarchical plan; `predicted` gets its time.
PlanPhase inter_phase(spec::CollectiveKind k, double s_ring, const Fabric& f, const Options& o, double& predicted);
/// An internal error for a fabric or options the planner cannot serve.
void check_fabric(const Fabric& f);
void check_options(const Fabric& f, const Options& o);
/// Whether `node` is one of `nodes` (ascending).
bool in_focus(int node, const std::vector<int>& nodes);
/// The plan for several focus nodes (Options::focus_nodes): `one` of the options focused on each node alone, joined:
/// each flow once (a flow between two focus nodes is in both plans, kept from the lower node's); the phases'
/// latencies and predicted_s are the first plan's (the same in each: the focus filters flows only).
Plan plan_over_focus_nodes(const Options& o, const std::function<Plan(const Options&)>& one);

} // namespace zerosim::collectives::detail
