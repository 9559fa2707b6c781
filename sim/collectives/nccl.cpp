// NCCL's collectives as a few flows per phase. Every formula is in docs/collectives.md; the constants
// are NCCL 2.20.3's (github.com/NVIDIA/nccl, makefiles/version.mk 2.20.3, src/graph/tuning.cc).
#include "collectives/nccl.hpp"

#include "core/error.hpp"

#include <algorithm>
#include <array>
#include <cstdint>
#include <string>
#include <tuple>

namespace zerosim::collectives {
namespace {

using schedule::CollectiveKind;

constexpr double US = 1e-6;

// NCCL 2.20.3 src/graph/tuning.cc, baseLat[algorithm][protocol]: the fixed latency of one collective call,
// Simple protocol: Ring 8.4 us, Tree 0 us.
constexpr double BASE_RING_SIMPLE_S = 8.4 * US;
constexpr double BASE_TREE_SIMPLE_S = 0.0;

// NCCL 2.20.3 src/graph/tuning.cc, hwLat[hardware][algorithm][protocol]: the latency of one step (one
// chunk over one hop), per hardware row (NVLINK, PCI, NET), for Ring and Tree, LL and Simple protocols.
// An LL step is a flag-polled 8-byte store, close to the bare hop latency (the defaults of
// nvlink.latency, pcie.latency and network.latency are LL values of this table); what a Simple step costs
// beyond its LL step is taken as Simple's per-step overhead (chunk hand-shake, proxy post, flush; for the
// tree also the chunk's pipeline fill) and added to the fabric's hop latency.
struct StepLatencies {
  double ring_ll;
  double ring_simple;
  double tree_ll;
  double tree_simple;
};
constexpr StepLatencies HW_NVLINK{0.6 * US, 3.4 * US, 0.6 * US, 28.0 * US};
constexpr StepLatencies HW_PCI{1.0 * US, 5.7 * US, 1.0 * US, 28.0 * US};
constexpr StepLatencies HW_NET{2.7 * US, 14.0 * US, 5.0 * US, 28.0 * US};

// NCCL 2.20.3 src/graph/tuning.cc, ncclTopoTuneModel: the tree's bus bandwidth is nChannels x the
// per-channel bandwidth x 0.92, and its algorithm bandwidth half of that (the ring's is busBw x nRanks /
// nSteps). Used for the tree's predicted_s (the AUTO choice), not applied to its flows.
constexpr double TREE_BUS_EFFICIENCY = 0.92;
constexpr double TREE_ALGO_RATIO = 0.5;

enum class Algo { RING, TREE };

double simple_overhead_s(const StepLatencies& h, Algo a)
{
  return a == Algo::RING ? h.ring_simple - h.ring_ll : h.tree_simple - h.tree_ll;
}

double intra_step_s(const Fabric& f, Algo a)
{
  return f.intra_latency_s + simple_overhead_s(f.intra_nvlink ? HW_NVLINK : HW_PCI, a);
}

double inter_step_s(const Fabric& f, Algo a)
{
  return f.inter_latency_s + simple_overhead_s(HW_NET, a);
}

bool is_all_reduce(CollectiveKind k)
{
  return k == CollectiveKind::ALL_REDUCE;
}

/// Total latency of a flat ring over `nodes` x `g` ranks (NCCL 2.20.3 tuning.cc, ring latency: baseLat +
/// (nsteps - nInterSteps) x intra step + nInterSteps x inter step; nsteps = 2(N-1) for all-reduce, N-1
/// for all-gather and reduce-scatter; nInterSteps = 2 x nodes (all-reduce) or nodes - 1, 0 on one node).
/// The inter steps are clamped to nsteps (one GPU per node: every step crosses a node boundary).
double ring_latency_s(CollectiveKind k, int nodes, int g, const Fabric& f)
{
  const std::int64_t n = static_cast<std::int64_t>(nodes) * g;
  const std::int64_t steps = (is_all_reduce(k) ? 2 : 1) * (n - 1);
  std::int64_t inter = 0;
  if (nodes > 1)
    inter = std::min<std::int64_t>(is_all_reduce(k) ? 2 * static_cast<std::int64_t>(nodes) : nodes - 1, steps);
  return BASE_RING_SIMPLE_S + static_cast<double>(steps - inter) * intra_step_s(f, Algo::RING) +
         static_cast<double>(inter) * inter_step_s(f, Algo::RING);
}

/// Total latency of the tree all-reduce (NCCL 2.20.3 tuning.cc: baseLat + 2 x ((G-1) x intra step +
/// log2i(nodes) x inter step): up the chain and the tree, then down).
double tree_latency_s(const Fabric& f)
{
  return BASE_TREE_SIMPLE_S + 2.0 * ((f.gpus_per_node - 1) * intra_step_s(f, Algo::TREE) +
                                     log2_floor(f.nodes) * inter_step_s(f, Algo::TREE));
}

/// The route latency a phase's slowest flow pays: an inter-node route when the phase crosses nodes.
double route_latency_s(const Fabric& f, bool crosses_nodes)
{
  return crosses_nodes ? f.inter_latency_s : f.intra_latency_s;
}

double phase_latency_s(double total_s, double route_s)
{
  return std::max(0.0, total_s - route_s);
}

/// Bytes one ring edge carries over the whole algorithm, as a fraction of the buffer each channel holds.
double ring_edge_fraction(CollectiveKind k, std::int64_t ranks)
{
  const double n = static_cast<double>(ranks);
  return (is_all_reduce(k) ? 2.0 : 1.0) * (n - 1.0) / n;
}

/// The bottleneck bandwidth of one channel of the flat ring (and NCCL's per-channel bandwidth of the
/// tree): one node: the GPU's intra link (one channel); one GPU per node: the NIC; else the smaller of
/// the NIC (each NIC carries one channel each way) and the GPU's intra link shared by the channels
/// whose intra edge leaves that GPU: all C when C < G, C - 1 when C = G (each GPU is one channel's exit).
double ring_channel_Bps(const Fabric& f, int c)
{
  if (f.nodes == 1)
    return f.intra_Bps;
  if (f.gpus_per_node == 1)
    return f.inter_Bps;
  const int sharing = c < f.gpus_per_node ? c : c - 1;
  return std::min(f.inter_Bps, f.intra_Bps / sharing);
}

/// Sorts flows by (src, dst, channel) and merges those with the same (src, dst) (and, unless
/// `across_channels`, the same channel), summing bytes.
void merge_same_pairs(std::vector<Flow>& flows, bool across_channels)
{
  std::sort(flows.begin(), flows.end(), [](const Flow& a, const Flow& b) {
    return std::tie(a.src, a.dst, a.channel) < std::tie(b.src, b.dst, b.channel);
  });
  std::vector<Flow> out;
  out.reserve(flows.size());
  for (const Flow& fl : flows) {
    if (!out.empty() && out.back().src == fl.src && out.back().dst == fl.dst &&
        (across_channels || out.back().channel == fl.channel))
      out.back().bytes += fl.bytes;
    else
      out.push_back(fl);
  }
  flows = std::move(out);
}

// ---- Flat ring ----

/// The flows of the flat ring: one node: one channel, GPU k -> k+1 (mod G). Several nodes: C channels;
/// channel c visits each node from GPU e_c in rotated order and leaves from e_c - 1 to the next node's e_c.
std::vector<Flow> ring_flows(const Fabric& f, const Options& o, double edge_bytes)
{
  const int g = f.gpus_per_node;
  const int nodes = f.nodes;
  std::vector<Flow> out;
  if (nodes == 1) {
    for (int k = 0; k < g; ++k)
      out.push_back(Flow{{0, k}, {0, (k + 1) % g}, edge_bytes, 0});
    return out;
  }
  const int cs = channels(f);
  for (int c = 0; c < cs; ++c) {
    const int e = channel_entry(c, f);
    const auto inside = [&](int n) {
      for (int k = 0; k + 1 < g; ++k)
        out.push_back(Flow{{n, (e + k) % g}, {n, (e + k + 1) % g}, edge_bytes, c});
    };
    const auto exit = [&](int n) { out.push_back(Flow{{n, (e + g - 1) % g}, {(n + 1) % nodes, e}, edge_bytes, c}); };
    if (o.focus_node < 0) {
      for (int n = 0; n < nodes; ++n) {
        inside(n);
        exit(n);
      }
    } else {
      inside(o.focus_node);
      exit((o.focus_node + nodes - 1) % nodes);
      exit(o.focus_node);
    }
  }
  return out;
}

struct Estimate {
  double latency_s = 0;
  double bandwidth_s = 0;
  double total() const { return latency_s + bandwidth_s; }
};

Estimate ring_estimate(CollectiveKind k, double s, const Fabric& f)
{
  const int cs = channels(f);
  const std::int64_t ranks = static_cast<std::int64_t>(f.nodes) * f.gpus_per_node;
  const double edge_bytes = ring_edge_fraction(k, ranks) * s / cs;
  return Estimate{ring_latency_s(k, f.nodes, f.gpus_per_node, f), edge_bytes / ring_channel_Bps(f, cs)};
}

Plan ring_plan(CollectiveKind k, double s, const Fabric& f, const Options& o)
{
  const int cs = channels(f);
  const std::int64_t ranks = static_cast<std::int64_t>(f.nodes) * f.gpus_per_node;
  const Estimate est = ring_estimate(k, s, f);
  Plan p;
  p.algorithm = "ring";
  p.channels = cs;
  PlanPhase ph;
  ph.flows = ring_flows(f, o, ring_edge_fraction(k, ranks) * s / cs);
  ph.latency_s = phase_latency_s(est.latency_s, route_latency_s(f, f.nodes > 1));
  p.phases.push_back(std::move(ph));
  p.predicted_s = est.total();
  return p;
}

// ---- Tree (all-reduce) ----

/// The tree all-reduce's flows, reduce (up) and broadcast (down) together. Per channel c: inside each node
/// the chain e_c -> e_c+1 -> ... -> e_c-1 (mod G), its head e_c facing the network (NCCL's
/// NCCL_TOPO_PATTERN_TREE: parent and children on the head); the channel's two trees share the chain, so
/// each chain edge carries S/C each way. Between nodes, each tree carries S/(2C) on each of its edges,
/// up and down, between the nodes' heads; a pair used by both trees is one flow.
std::vector<Flow> tree_flows(const Fabric& f, const Options& o, double s)
{
  const int g = f.gpus_per_node;
  const int nodes = f.nodes;
  const int cs = channels(f);
  const double chain_bytes = s / cs;
  const double tree_bytes = s / (2.0 * cs);
  std::vector<Flow> out;
  for (int c = 0; c < cs; ++c) {
    const int e = nodes == 1 ? 0 : channel_entry(c, f);
    const auto chain = [&](int n) {
      for (int k = 0; k + 1 < g; ++k) {
        const Gpu upper{n, (e + k) % g};
        const Gpu lower{n, (e + k + 1) % g};
        out.push_back(Flow{lower, upper, chain_bytes, c});
        out.push_back(Flow{upper, lower, chain_bytes, c});
      }
    };
    if (o.focus_node < 0) {
      for (int n = 0; n < nodes; ++n)
        chain(n);
    } else {
      chain(o.focus_node);
    }
    if (nodes == 1)
      continue;
    std::vector<Flow> inter;
    const auto link = [&](int child, int parent) {
      inter.push_back(Flow{{child, e}, {parent, e}, tree_bytes, c});
      inter.push_back(Flow{{parent, e}, {child, e}, tree_bytes, c});
    };
    for (int t = 0; t < 2; ++t) {
      if (o.focus_node < 0) {
        for (int n = 0; n < nodes; ++n) {
          const int parent = dtree_links(t, n, nodes).parent;
          if (parent >= 0)
            link(n, parent);
        }
      } else {
        const TreeLinks l = dtree_links(t, o.focus_node, nodes);
        if (l.parent >= 0)
          link(o.focus_node, l.parent);
        for (int child : l.children)
          if (child >= 0)
            link(child, o.focus_node);
      }
    }
    merge_same_pairs(inter, false);
    out.insert(out.end(), inter.begin(), inter.end());
  }
  return out;
}

Estimate tree_estimate(double s, const Fabric& f)
{
  const int cs = channels(f);
  const double bus_Bps = TREE_BUS_EFFICIENCY * cs * ring_channel_Bps(f, cs);
  return Estimate{tree_latency_s(f), s / (TREE_ALGO_RATIO * bus_Bps)};
}

Plan tree_plan(double s, const Fabric& f, const Options& o)
{
  const Estimate est = tree_estimate(s, f);
  Plan p;
  p.algorithm = "tree";
  p.channels = channels(f);
  PlanPhase ph;
  ph.flows = tree_flows(f, o, s);
  ph.latency_s = phase_latency_s(est.latency_s, route_latency_s(f, f.nodes > 1));
  p.phases.push_back(std::move(ph));
  p.predicted_s = est.total();
  return p;
}

// ---- Hierarchical ----

/// One ring inside every node (or the focus node), GPU k -> k+1 (mod G).
PlanPhase intra_phase(CollectiveKind k, double s, const Fabric& f, const Options& o, double& predicted)
{
  const int g = f.gpus_per_node;
  const double edge_bytes = ring_edge_fraction(k, g) * s;
  PlanPhase ph;
  for (int n = 0; n < f.nodes; ++n) {
    if (o.focus_node >= 0 && n != o.focus_node)
      continue;
    for (int l = 0; l < g; ++l)
      ph.flows.push_back(Flow{{n, l}, {n, (l + 1) % g}, edge_bytes, 0});
  }
  const double total = ring_latency_s(k, 1, g, f);
  ph.latency_s = phase_latency_s(total, route_latency_s(f, false));
  predicted += total + edge_bytes / f.intra_Bps;
  return ph;
}

/// G rings between nodes, ring l over the GPUs of local index l (through NIC nic_of(l)), each on a
/// buffer of s_ring bytes.
PlanPhase inter_phase(CollectiveKind k, double s_ring, const Fabric& f, const Options& o, double& predicted)
{
  const int g = f.gpus_per_node;
  const int nodes = f.nodes;
  const double edge_bytes = ring_edge_fraction(k, nodes) * s_ring;
  PlanPhase ph;
  for (int l = 0; l < g; ++l) {
    const auto edge = [&](int n) { ph.flows.push_back(Flow{{n, l}, {(n + 1) % nodes, l}, edge_bytes, l}); };
    if (o.focus_node < 0) {
      for (int n = 0; n < nodes; ++n)
        edge(n);
    } else {
      edge((o.focus_node + nodes - 1) % nodes);
      edge(o.focus_node);
    }
  }
  // The busiest NIC carries the rings of every local index mapped to it: ceil(G / nics) when nics < G.
  std::vector<int> rings_per_nic(static_cast<std::size_t>(f.nics_per_node), 0);
  int busiest = 0;
  for (int l = 0; l < g; ++l)
    busiest = std::max(busiest, ++rings_per_nic[static_cast<std::size_t>(nic_of(l, g, f.nics_per_node))]);
  const double total = ring_latency_s(k, nodes, 1, f);
  ph.latency_s = phase_latency_s(total, route_latency_s(f, true));
  predicted += total + edge_bytes * busiest / f.inter_Bps;
  return ph;
}

Plan hierarchical_plan(CollectiveKind k, double s, const Fabric& f, const Options& o)
{
  const double per_ring = s / f.gpus_per_node;
  Plan p;
  p.algorithm = "hierarchical";
  p.channels = f.gpus_per_node;
  double predicted = 0;
  switch (k) {
  case CollectiveKind::ALL_REDUCE:
    p.phases.push_back(intra_phase(CollectiveKind::REDUCE_SCATTER, s, f, o, predicted));
    p.phases.push_back(inter_phase(CollectiveKind::ALL_REDUCE, per_ring, f, o, predicted));
    p.phases.push_back(intra_phase(CollectiveKind::ALL_GATHER, s, f, o, predicted));
    break;
  case CollectiveKind::ALL_GATHER:
    p.phases.push_back(inter_phase(CollectiveKind::ALL_GATHER, per_ring, f, o, predicted));
    p.phases.push_back(intra_phase(CollectiveKind::ALL_GATHER, s, f, o, predicted));
    break;
  case CollectiveKind::REDUCE_SCATTER:
    p.phases.push_back(intra_phase(CollectiveKind::REDUCE_SCATTER, s, f, o, predicted));
    p.phases.push_back(inter_phase(CollectiveKind::REDUCE_SCATTER, per_ring, f, o, predicted));
    break;
  }
  p.predicted_s = predicted;
  return p;
}

// ---- Checks ----

void check_fabric(const Fabric& f)
{
  const std::string where = "collectives: cluster of " + std::to_string(f.nodes) + " node(s) x " +
                            std::to_string(f.gpus_per_node) + " GPU(s): ";
  if (f.nodes < 1 || f.gpus_per_node < 1)
    throw core::InputError(where + "expected at least one node and one GPU per node");
  if (f.nodes > 1 && f.nics_per_node < 1)
    throw core::InputError(where + "expected at least one NIC per node between nodes, found " +
                           std::to_string(f.nics_per_node));
  if (f.gpus_per_node > 1 && !(f.intra_Bps > 0))
    throw core::InputError(where + "expected a positive bandwidth between the GPUs of a node");
  if (f.nodes > 1 && !(f.inter_Bps > 0))
    throw core::InputError(where + "expected a positive NIC bandwidth");
  if (f.intra_latency_s < 0 || f.inter_latency_s < 0)
    throw core::InputError(where + "expected non-negative latencies");
}

void check_options(const Fabric& f, const Options& o)
{
  if (o.focus_node < -1 || o.focus_node >= f.nodes)
    throw core::InternalError("collectives: focus node " + std::to_string(o.focus_node) + " outside 0.." +
                              std::to_string(f.nodes - 1));
}

// ---- NCCL's binary tree over positions 0..n-1, rooted at 0 (src/graph/trees.cc, ncclGetBtree) ----

/// Position r's parent: clear r's lowest set bit and set the next one up; if that is outside the tree,
/// only clear it. -1 for the root.
int btree_parent(int r, int n)
{
  if (r == 0)
    return -1;
  const int low = r & -r;
  const int up = (r ^ low) | (low << 1);
  return up < n ? up : r ^ low;
}

/// Position r's children: the root's only child is the largest power of two below n; an inner position
/// with lowest set bit b has r - b/2 and the nearest r + d < n for d = b/2, b/4, ..., 1.
std::array<int, 2> btree_children(int r, int n)
{
  if (r == 0) {
    if (n < 2)
      return {-1, -1};
    int top = 1;
    while (top * 2 < n)
      top *= 2;
    return {top, -1};
  }
  const int half = (r & -r) >> 1;
  if (half == 0)
    return {-1, -1};
  int right = -1;
  for (int d = half; d >= 1; d >>= 1) {
    if (r + d < n) {
      right = r + d;
      break;
    }
  }
  return {r - half, right};
}

} // namespace

int nic_of(int local, int gpus_per_node, int nics_per_node)
{
  if (gpus_per_node < 1 || local < 0 || local >= gpus_per_node)
    throw core::InternalError("collectives: GPU " + std::to_string(local) + " outside a node of " +
                              std::to_string(gpus_per_node));
  if (nics_per_node < 1)
    return -1;
  return static_cast<int>(static_cast<std::int64_t>(local) * nics_per_node / gpus_per_node);
}

int channels(const Fabric& f)
{
  if (f.nodes <= 1)
    return 1;
  return std::max(1, std::min(f.nics_per_node, f.gpus_per_node));
}

int channel_entry(int channel, const Fabric& f)
{
  const int cs = channels(f);
  if (channel < 0 || channel >= cs)
    throw core::InternalError("collectives: channel " + std::to_string(channel) + " outside 0.." +
                              std::to_string(cs - 1));
  const std::int64_t g = f.gpus_per_node;
  return static_cast<int>((channel * g + cs - 1) / cs);
}

int log2_floor(int n)
{
  int l = 0;
  while (n > 1) {
    n >>= 1;
    ++l;
  }
  return l;
}

TreeLinks dtree_links(int tree, int node, int nodes)
{
  if (nodes < 1 || node < 0 || node >= nodes || (tree != 0 && tree != 1))
    throw core::InternalError("collectives: tree " + std::to_string(tree) + ", node " + std::to_string(node) + " of " +
                              std::to_string(nodes));
  // Tree 0 is the binary tree itself; tree 1 mirrors it (even n) or shifts it by one node (odd n).
  int pos = node;
  if (tree == 1)
    pos = nodes % 2 == 0 ? nodes - 1 - node : (node + nodes - 1) % nodes;
  const auto back = [&](int p) {
    if (p < 0 || tree == 0)
      return p;
    return nodes % 2 == 0 ? nodes - 1 - p : (p + 1) % nodes;
  };
  TreeLinks l;
  l.parent = back(btree_parent(pos, nodes));
  const std::array<int, 2> ch = btree_children(pos, nodes);
  l.children = {back(ch[0]), back(ch[1])};
  return l;
}

Plan plan(CollectiveKind kind, std::int64_t bytes, const Fabric& f, const Options& o)
{
  check_fabric(f);
  check_options(f, o);
  if (bytes < 0)
    throw core::InternalError("collectives: negative collective size " + std::to_string(bytes));
  if (f.nodes == 1 && f.gpus_per_node == 1) {
    Plan p;
    p.algorithm = "local";
    return p;
  }
  const double s = static_cast<double>(bytes);
  const bool hierarchy = f.nodes > 1 && f.gpus_per_node > 1;
  Plan p;
  if (hierarchy && (o.hierarchical || (is_all_reduce(kind) && o.all_reduce == Algorithm::HIERARCHICAL))) {
    p = hierarchical_plan(kind, s, f, o);
  } else if (!is_all_reduce(kind) || o.all_reduce == Algorithm::RING || o.all_reduce == Algorithm::HIERARCHICAL) {
    p = ring_plan(kind, s, f, o);
  } else if (o.all_reduce == Algorithm::TREE) {
    p = tree_plan(s, f, o);
  } else {
    // AUTO: NCCL's rule (tuning.cc ncclTopoGetAlgoTime, then the smallest time wins): the smaller estimate.
    const bool tree = tree_estimate(s, f).total() < ring_estimate(kind, s, f).total();
    p = tree ? tree_plan(s, f, o) : ring_plan(kind, s, f, o);
  }
  if (o.merge_channels) {
    for (PlanPhase& ph : p.phases)
      merge_same_pairs(ph.flows, true);
  }
  return p;
}

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

/// Places the flows of a one-group plan on every group: `place(flow, group)` maps the group's GPUs to the cluster's.
template <class Place> Plan replicate(const Plan& p, int groups, const Options& o, Place place)
{
  Plan out = p;
  for (std::size_t i = 0; i < p.phases.size(); ++i) {
    out.phases[i].flows.clear();
    for (int grp = 0; grp < groups; ++grp)
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

Plan plan(CollectiveKind kind, std::int64_t bytes, const Fabric& f, const Options& o, schedule::CommGroup g)
{
  if (g == schedule::CommGroup::WORLD || (g == schedule::CommGroup::DATA_PARALLEL && f.tensor_parallel == 1))
    return plan(kind, bytes, f, o);
  check_fabric(f);
  check_options(f, o);
  check_tensor_parallel(f);
  Options one_group = o;
  one_group.focus_node = -1;
  one_group.hierarchical = false; // a group inside one node, or of one GPU per node, has no hierarchy
  if (one_group.all_reduce == Algorithm::HIERARCHICAL)
    one_group.all_reduce = Algorithm::AUTO;
  const int t = f.tensor_parallel;
  if (g == schedule::CommGroup::TENSOR) {
    Fabric group = f;
    group.nodes = 1;
    group.gpus_per_node = t;
    group.tensor_parallel = 1;
    const int per_node = f.gpus_per_node / t;
    return replicate(plan(kind, bytes, group, one_group), f.nodes * per_node, o, [&](Flow fl, int grp) {
      const int node = grp / per_node, first = grp % per_node * t;
      fl.src = Gpu{node, first + fl.src.local};
      fl.dst = Gpu{node, first + fl.dst.local};
      return fl;
    });
  }
  if (g == schedule::CommGroup::DATA_PARALLEL) {
    Options dp_o = o; // a data-parallel group spanning nodes keeps the caller's algorithm choice
    dp_o.focus_node = -1;
    return replicate(plan(kind, bytes, data_parallel_group_fabric(f), dp_o), t, o, [&](Flow fl, int c) {
      fl.src.local = fl.src.local * t + c;
      fl.dst.local = fl.dst.local * t + c;
      return fl;
    });
  }
  if (g == schedule::CommGroup::INTRA_NODE) {
    Fabric node = f;
    node.nodes = 1;
    return replicate(plan(kind, bytes, node, one_group), f.nodes, o, [](Flow fl, int n) {
      fl.src.node = n;
      fl.dst.node = n;
      return fl;
    });
  }
  // INTER_NODE
  return replicate(plan(kind, bytes, inter_node_group_fabric(f), one_group), f.gpus_per_node, o,
                   [](Flow fl, int local) {
                     fl.src.local = local;
                     fl.dst.local = local;
                     return fl;
                   });
}

std::vector<std::pair<Gpu, Gpu>> inter_node_pairs(const Fabric& f, const Options& o)
{
  check_fabric(f);
  check_options(f, o);
  std::vector<std::pair<Gpu, Gpu>> out;
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
    Options group_o = o;
    group_o.focus_node = -1;
    for (Flow fl : tree_flows(inter_node_group_fabric(f), group_o, 0))
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
    Options group_o = o;
    group_o.focus_node = -1;
    for (auto [a, b] : inter_node_pairs(data_parallel_group_fabric(f), group_o))
      for (int c = 0; c < f.tensor_parallel; ++c) {
        const Gpu src{a.node, a.local * f.tensor_parallel + c}, dst{b.node, b.local * f.tensor_parallel + c};
        if (o.focus_node < 0 || src.node == o.focus_node || dst.node == o.focus_node)
          out.emplace_back(src, dst);
      }
  }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

} // namespace zerosim::collectives
