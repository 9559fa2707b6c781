// The plans of collectives on communicator groups other than the world (HYBRID_SHARD's intra- and inter-node groups,
// tensor and data parallelism: docs/collectives.md), and the inter-node GPU pairs the full replay routes.
#include "collectives/nccl.hpp"
#include "collectives/nccl_detail.hpp"

#include "core/error.hpp"

#include <algorithm>
#include <set>
#include <string>
#include <utility>
#include <vector>

namespace zerosim::collectives {

using namespace detail;
using spec::CollectiveKind;

namespace {

/// The fabric of one INTER_NODE group: every node with one GPU and one NIC (the local index's own).
Fabric inter_node_group_fabric(const Fabric& f)
{
  Fabric x = f;
  x.gpus_per_node = 1;
  x.nics_per_node = std::min(f.nics_per_node, 1);
  x.tensor_parallel = 1;
  return x;
}

/// The fabric of one DATA_PARALLEL group: gpus_per_node / t GPUs per node and min(nics, gpus_per_node / t) NICs.
/// The group's GPU v is local v x t + c, whose NIC is (v t + c) x nics / G (nic_of): with that many NICs the group's
/// own mapping v x nics' / (G / t) is the same NIC order, so its channels enter and leave through the NICs its GPUs
/// really use, and the t groups together load every NIC of the node evenly.
Fabric data_parallel_group_fabric(const Fabric& f)
{
  Fabric x = f;
  x.gpus_per_node = f.gpus_per_node / f.tensor_parallel;
  x.nics_per_node = f.nics_per_node > 0 ? std::min(f.nics_per_node, x.gpus_per_node) : 0;
  x.tensor_parallel = 1;
  return x;
}

void check_tensor_parallel(const Fabric& f)
{
  if (f.tensor_parallel < 1 || f.gpus_per_node % f.tensor_parallel != 0)
    throw core::InputError("collectives: tensor-parallel degree " + std::to_string(f.tensor_parallel) +
                           " must divide the " + std::to_string(f.gpus_per_node) + " GPUs of a node");
}

/// Places the flows of a one-group plan on groups [first, last): `place(flow, group)` maps the group's GPUs to the
/// cluster's; with a focus node, only the flows with an end on it are kept.
template <class Place> Plan replicate(const Plan& p, int first, int last, const Options& o, Place place)
{
  Plan out = p;
  for (std::size_t i = 0; i < p.phases.size(); ++i) {
    out.phases[i].flows.clear();
    for (int grp = first; grp < last; ++grp)
      for (const Flow& fl : p.phases[i].flows) {
        const Flow placed = place(fl, grp);
        if (o.focus_node >= 0 && placed.src.node != o.focus_node && placed.dst.node != o.focus_node)
          continue;
        out.phases[i].flows.push_back(placed);
      }
  }
  return out;
}

} // namespace

Plan plan(CollectiveKind kind, std::int64_t bytes, const Fabric& f, const Options& o, spec::CommGroup g)
{
  if (g == spec::CommGroup::WORLD || (g == spec::CommGroup::DATA_PARALLEL && f.tensor_parallel == 1))
    return plan(kind, bytes, f, o);
  check_fabric(f);
  check_options(f, o);
  check_tensor_parallel(f);
  Options one_group = o;
  one_group.focus_node = -1;      // a group inside one node: the replicas are placed, then filtered by the focus
  one_group.hierarchical = false; // a group inside one node, or of one GPU per node, has no hierarchy
  if (one_group.all_reduce == Algorithm::HIERARCHICAL)
    one_group.all_reduce = Algorithm::AUTO;
  const int t = f.tensor_parallel;
  if (g == spec::CommGroup::TENSOR) {
    Fabric group = f;
    group.nodes = 1;
    group.gpus_per_node = t;
    group.tensor_parallel = 1;
    const int per_node = f.gpus_per_node / t;
    // Groups inside one node: with a focus, only the focus node's (the others' flows would all be dropped).
    const int from = o.focus_node < 0 ? 0 : o.focus_node * per_node;
    const int to = o.focus_node < 0 ? f.nodes * per_node : from + per_node;
    return replicate(plan(kind, bytes, group, one_group), from, to, o, [&](Flow fl, int grp) {
      const int node = grp / per_node, first = grp % per_node * t;
      fl.src = spec::Gpu{node, first + fl.src.local};
      fl.dst = spec::Gpu{node, first + fl.dst.local};
      return fl;
    });
  }
  if (g == spec::CommGroup::DATA_PARALLEL) {
    // A data-parallel group spanning nodes keeps the caller's algorithm choice, and its focus: the group's nodes are
    // the cluster's, so only the flows with an end on the focus node are built (not every node's, then filtered).
    return replicate(plan(kind, bytes, data_parallel_group_fabric(f), o), 0, t, o, [&](Flow fl, int c) {
      fl.src.local = fl.src.local * t + c;
      fl.dst.local = fl.dst.local * t + c;
      return fl;
    });
  }
  if (g == spec::CommGroup::INTRA_NODE) {
    Fabric node = f;
    node.nodes = 1;
    const int from = o.focus_node < 0 ? 0 : o.focus_node, to = o.focus_node < 0 ? f.nodes : from + 1;
    return replicate(plan(kind, bytes, node, one_group), from, to, o, [](Flow fl, int n) {
      fl.src.node = n;
      fl.dst.node = n;
      return fl;
    });
  }
  // INTER_NODE: the group's nodes are the cluster's, so the focus applies inside the group's plan as well.
  Options inter_o = one_group;
  inter_o.focus_node = o.focus_node;
  return replicate(plan(kind, bytes, inter_node_group_fabric(f), inter_o), 0, f.gpus_per_node, o,
                   [](Flow fl, int local) {
                     fl.src.local = local;
                     fl.dst.local = local;
                     return fl;
                   });
}

std::vector<std::pair<spec::Gpu, spec::Gpu>> inter_node_pairs(const Fabric& f, const Options& o)
{
  check_fabric(f);
  check_options(f, o);
  std::vector<std::pair<spec::Gpu, spec::Gpu>> out;
  if (f.nodes < 2)
    return out;
  std::vector<Flow> flows = ring_flows(f, o, 0);
  const std::vector<Flow> tree = tree_flows(f, o, 0);
  flows.insert(flows.end(), tree.begin(), tree.end());
  if (f.gpus_per_node > 1) {
    double unused = 0;
    const PlanPhase rings = inter_phase(CollectiveKind::ALL_GATHER, 0, f, o, unused);
    flows.insert(flows.end(), rings.flows.begin(), rings.flows.end());
    // The INTER_NODE groups' trees (their rings are the hierarchical rings above).
    for (Flow fl : tree_flows(inter_node_group_fabric(f), o, 0)) // the group's nodes are the cluster's: same focus
      for (int local = 0; local < f.gpus_per_node; ++local) {
        fl.src.local = local;
        fl.dst.local = local;
        if (o.focus_node < 0 || fl.src.node == o.focus_node || fl.dst.node == o.focus_node)
          flows.push_back(fl);
      }
  }
  for (const Flow& fl : flows)
    if (fl.src.node != fl.dst.node)
      out.emplace_back(fl.src, fl.dst);
  if (f.tensor_parallel > 1) { // every pair a DATA_PARALLEL group's plans may use
    check_tensor_parallel(f);
    for (auto [a, b] : inter_node_pairs(data_parallel_group_fabric(f), o)) // the group's nodes are the cluster's
      for (int c = 0; c < f.tensor_parallel; ++c) {
        const spec::Gpu src{a.node, a.local * f.tensor_parallel + c}, dst{b.node, b.local * f.tensor_parallel + c};
        if (o.focus_node < 0 || src.node == o.focus_node || dst.node == o.focus_node)
          out.emplace_back(src, dst);
      }
  }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

} // namespace zerosim::collectives
