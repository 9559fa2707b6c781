// The plans of collectives on communicator groups other than the world (HYBRID_SHARD's intra- and inter-node groups,
// tensor and data parallelism: docs/collectives.md), and the inter-node GPU pairs the full replay routes.
#include "collectives/nccl.hpp"
#include "collectives/nccl_detail.hpp"

#include "core/error.hpp"

#include <algorithm>
#include <cstdint>
#include <optional>
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

/// Where the pipeline's stages lie (Fabric::pipeline_parallel; docs/pipeline-parallel.md §1): stage s holds the
/// `ranks` consecutive ranks from s x ranks, either `nodes_per_stage` whole nodes or a slice of one node.
struct Stages {
  int p = 1;
  int ranks = 0;           ///< D x t
  int nodes_per_stage = 1; ///< the nodes a stage spans (1 when stages share a node)
  Fabric stage;            ///< one stage's cluster: its nodes, or one node of `ranks` GPUs; no pipeline
  /// The first GPU of stage s: its first node and, when stages share a node, the offset of its slice.
  spec::Gpu first_gpu(int s, int gpus_per_node) const
  {
    const std::int64_t r = static_cast<std::int64_t>(s) * ranks;
    return spec::Gpu{static_cast<int>(r / gpus_per_node), static_cast<int>(r % gpus_per_node)};
  }
};

Stages stages_of(const Fabric& f)
{
  const std::int64_t world = static_cast<std::int64_t>(f.nodes) * f.gpus_per_node;
  Stages st;
  st.p = std::max(1, f.pipeline_parallel);
  const int G = f.gpus_per_node;
  if (world % st.p != 0)
    throw core::InputError("collectives: " + std::to_string(st.p) + " pipeline stages do not divide the " +
                           std::to_string(world) + " GPUs of the cluster");
  st.ranks = static_cast<int>(world / st.p);
  if (st.ranks % G != 0 && G % st.ranks != 0)
    throw core::InputError("collectives: a pipeline stage of " + std::to_string(st.ranks) +
                           " GPUs neither fills whole nodes of " + std::to_string(G) + " GPUs nor divides one");
  st.stage = f;
  st.stage.pipeline_parallel = 1;
  if (st.ranks >= G) {
    st.nodes_per_stage = st.ranks / G;
    st.stage.nodes = st.nodes_per_stage;
  } else {
    st.stage.nodes = 1;
    st.stage.gpus_per_node = st.ranks;
    st.stage.nics_per_node = f.nics_per_node > 0 ? std::min(f.nics_per_node, st.ranks) : 0;
  }
  if (st.stage.gpus_per_node % std::max(1, f.tensor_parallel) != 0)
    throw core::InputError("collectives: tensor-parallel degree " + std::to_string(f.tensor_parallel) +
                           " does not divide a pipeline stage's " + std::to_string(st.stage.gpus_per_node) +
                           " GPUs of a node");
  return st;
}

/// Moves a flow of a stage's own cluster (Stages::stage) to the stage's GPUs, from `first` on.
Flow at_stage(Flow fl, spec::Gpu first)
{
  fl.src.node += first.node;
  fl.dst.node += first.node;
  fl.src.local += first.local;
  fl.dst.local += first.local;
  return fl;
}

/// Every stage's DATA_PARALLEL groups: the groups of one stage's cluster, placed at each stage's GPUs; with a focus
/// node, only the stages on it, each planned with the focus on that node.
Plan stage_groups_plan(CollectiveKind kind, std::int64_t bytes, const Fabric& f, const Options& o)
{
  const Stages st = stages_of(f);
  Options so = o;
  so.focus_node = -1;
  so.focus_nodes.clear();
  std::optional<Plan> out;
  for (int s = 0; s < st.p; ++s) {
    const spec::Gpu first = st.first_gpu(s, f.gpus_per_node);
    if (o.focus_node >= 0) {
      if (o.focus_node < first.node || o.focus_node >= first.node + st.nodes_per_stage)
        continue;
      so.focus_node = o.focus_node - first.node;
    }
    const Plan one = plan(kind, bytes, st.stage, so, spec::CommGroup::DATA_PARALLEL);
    if (!out) {
      out = one;
      for (PlanPhase& ph : out->phases)
        ph.flows.clear();
    }
    for (std::size_t i = 0; i < one.phases.size(); ++i)
      for (const Flow& fl : one.phases[i].flows)
        out->phases[i].flows.push_back(at_stage(fl, first));
  }
  if (!out)
    throw core::InternalError("collectives: no pipeline stage on focus node " + std::to_string(o.focus_node));
  return *out;
}

/// The ranks r < D x t whose tied pair (stage 0's rank r, stage p-1's rank (p-1) D t + r) has a GPU on the focus node,
/// ascending; every r without a focus.
std::vector<int> embedding_pairs(const Fabric& f, const Stages& st, const Options& o)
{
  std::vector<int> rs;
  const std::int64_t G = f.gpus_per_node, last = static_cast<std::int64_t>(st.p - 1) * st.ranks;
  const auto add = [&](std::int64_t from, std::int64_t to) {
    for (std::int64_t r = std::max<std::int64_t>(0, from); r < std::min<std::int64_t>(st.ranks, to); ++r)
      rs.push_back(static_cast<int>(r));
  };
  if (o.focus_node < 0) {
    add(0, st.ranks);
    return rs;
  }
  const std::int64_t at = o.focus_node * G;
  add(at, at + G);               // stage 0's GPU on the focus node
  add(at - last, at - last + G); // stage p-1's
  std::sort(rs.begin(), rs.end());
  rs.erase(std::unique(rs.begin(), rs.end()), rs.end());
  return rs;
}

/// Every tied pair's 2-rank collective: NCCL's ring of 2 (all-reduce: each GPU sends and receives S in 2 steps of
/// S/2) between stage 0's rank r and stage p-1's rank (p-1) x D x t + r, across the fabric (a cluster of 2 nodes of
/// one GPU and one NIC) when they are on different nodes, else over the node's links. On more than one node every pair
/// crosses nodes: stage p-1 starts at rank world - D x t >= G.
Plan embedding_plan(CollectiveKind kind, std::int64_t bytes, const Fabric& f, const Options& o)
{
  if (f.pipeline_parallel < 2) { // one stage: the first is the last, a group of one
    Plan p;
    p.algorithm = "local";
    return p;
  }
  const Stages st = stages_of(f);
  const bool across = f.nodes > 1;
  Fabric pair = f;
  pair.tensor_parallel = 1;
  pair.pipeline_parallel = 1;
  if (across) {
    pair.nodes = 2;
    pair.gpus_per_node = 1;
    pair.nics_per_node = std::min(f.nics_per_node, 1);
  } else {
    pair.nodes = 1;
    pair.gpus_per_node = 2;
  }
  Options one = o;
  one.focus_node = -1;
  one.focus_nodes.clear();
  one.hierarchical = false;
  if (one.all_reduce == Algorithm::HIERARCHICAL)
    one.all_reduce = Algorithm::AUTO;
  const Plan two = plan(kind, bytes, pair, one);
  const int G = f.gpus_per_node;
  const std::int64_t last = static_cast<std::int64_t>(st.p - 1) * st.ranks;
  const auto gpu = [G](std::int64_t rank) { return spec::Gpu{static_cast<int>(rank / G), static_cast<int>(rank % G)}; };
  const std::vector<int> rs = embedding_pairs(f, st, o);
  Plan out = two;
  for (std::size_t i = 0; i < two.phases.size(); ++i) {
    out.phases[i].flows.clear();
    for (int r : rs) {
      const spec::Gpu a = gpu(r), b = gpu(last + r);
      for (Flow fl : two.phases[i].flows) {
        // The pair's GPU 0 (node 0, or local 0 inside a node) is stage 0's, the other stage p-1's.
        fl.src = (across ? fl.src.node : fl.src.local) == 0 ? a : b;
        fl.dst = (across ? fl.dst.node : fl.dst.local) == 0 ? a : b;
        out.phases[i].flows.push_back(fl);
      }
    }
  }
  return out;
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
  const bool pipeline = f.pipeline_parallel > 1;
  if (g == spec::CommGroup::WORLD || (g == spec::CommGroup::DATA_PARALLEL && f.tensor_parallel == 1 && !pipeline))
    return plan(kind, bytes, f, o);
  check_fabric(f);
  check_options(f, o);
  check_tensor_parallel(f);
  if (!o.focus_nodes.empty())
    return plan_over_focus_nodes(o, [&](const Options& one) { return plan(kind, bytes, f, one, g); });
  if (g == spec::CommGroup::DATA_PARALLEL && pipeline)
    return stage_groups_plan(kind, bytes, f, o);
  if (g == spec::CommGroup::EMBEDDING)
    return embedding_plan(kind, bytes, f, o);
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
  if (!o.focus_nodes.empty()) { // each focus node's pairs, once
    Options single = o;
    single.focus_nodes.clear();
    for (int n : o.focus_nodes) {
      single.focus_node = n;
      const auto more = inter_node_pairs(f, single);
      out.insert(out.end(), more.begin(), more.end());
    }
    std::sort(out.begin(), out.end());
    out.erase(std::unique(out.begin(), out.end()), out.end());
    return out;
  }
  if (f.pipeline_parallel > 1) {
    const Stages st = stages_of(f);
    // Each stage's DATA_PARALLEL groups (with the rest of its own cluster's pairs), when a stage spans nodes.
    if (st.nodes_per_stage > 1) {
      Options so = o;
      for (int s = 0; s < st.p; ++s) {
        const spec::Gpu first = st.first_gpu(s, f.gpus_per_node);
        if (o.focus_node >= 0) {
          if (o.focus_node < first.node || o.focus_node >= first.node + st.nodes_per_stage)
            continue;
          so.focus_node = o.focus_node - first.node;
        }
        for (auto [a, b] : inter_node_pairs(st.stage, so)) {
          const Flow fl = at_stage(Flow{a, b}, first);
          out.emplace_back(fl.src, fl.dst);
        }
      }
    }
    // The EMBEDDING pairs, both ways.
    const std::int64_t last = static_cast<std::int64_t>(st.p - 1) * st.ranks;
    const std::int64_t G = f.gpus_per_node;
    for (int r : embedding_pairs(f, st, o)) {
      const spec::Gpu a{static_cast<int>(r / G), static_cast<int>(r % G)};
      const spec::Gpu b{static_cast<int>((last + r) / G), static_cast<int>((last + r) % G)};
      out.emplace_back(a, b);
      out.emplace_back(b, a);
    }
  }
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
