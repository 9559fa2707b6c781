// NCCL's collectives as a few flows per phase. Every formula is in docs/collectives.md; the constants
// are NCCL 2.20.3's (github.com/NVIDIA/nccl, makefiles/version.mk 2.20.3, src/graph/tuning.cc), the
// achieved bus-bandwidth fractions (nccl.hpp) NCCL's topo.h and published nccl-tests measurements.
#include "collectives/nccl.hpp"

#include "core/error.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <tuple>
#include <vector>

namespace zerosim::collectives {
namespace detail {

using spec::CollectiveKind;

constexpr double US = 1e-6;

// NCCL 2.20.3 src/graph/tuning.cc, baseLat[algorithm][protocol]: the fixed latency of one collective call,
// per protocol {LL, LL128, Simple}: Ring 6.6, 14.0, 8.4 us; Tree 6.8, 14.0, 0 us.
enum class Algo { RING, TREE };
constexpr int LL = 0, LL128 = 1, SIMPLE = 2; // NCCL's protocol indices (NCCL_PROTO_LL, _LL128, _SIMPLE)
using PerProtocol = std::array<double, 3>;
constexpr PerProtocol BASE_RING_S{6.6 * US, 14.0 * US, 8.4 * US};
constexpr PerProtocol BASE_TREE_S{6.8 * US, 14.0 * US, 0.0};

// NCCL 2.20.3 src/graph/tuning.cc, hwLat[hardware][algorithm][protocol]: the latency of one step (one
// chunk over one hop), per hardware row (NVLINK, PCI, NET), for Ring and Tree, {LL, LL128, Simple}.
// An LL step is a flag-polled 8-byte store, close to the bare hop latency (the defaults of
// nvlink.latency, pcie.latency and network.latency are LL values of this table); what a step of another
// protocol costs beyond the LL step is that protocol's per-step overhead (LL128: 128-byte lines; Simple:
// chunk hand-shake, proxy post, flush; for the Simple tree also the chunk's pipeline fill) and is added to
// the fabric's hop latency.
struct StepLatencies {
  PerProtocol ring;
  PerProtocol tree;
};
constexpr StepLatencies HW_NVLINK{{0.6 * US, 1.9 * US, 3.4 * US}, {0.6 * US, 1.25 * US, 28.0 * US}};
constexpr StepLatencies HW_PCI{{1.0 * US, 2.5 * US, 5.7 * US}, {1.0 * US, 1.9 * US, 28.0 * US}};
constexpr StepLatencies HW_NET{{2.7 * US, 4.0 * US, 14.0 * US}, {5.0 * US, 8.5 * US, 28.0 * US}};

// NCCL 2.20.3 tuning.cc getNetOverhead / ncclTopoTuneModel: on several nodes a ring's intra-node step is at
// least the network post overhead (x 3 for Simple): 2 us on AMD x86 hosts, 1 us on Intel and non-x86 ones. The
// fabric does not know the host; the AMD value is used, as for LL's ceiling (LL_MAX_BPS_*): every multi-node
// node shipped is a DGX A100 or HGX A100 (AMD EPYC hosts).
constexpr double NET_OVERHEAD_S = 2.0 * US;

// NCCL 2.20.3 src/graph/tuning.cc, ncclTopoTuneModel: the tree's bus bandwidth is nChannels x the
// per-channel bandwidth x 0.92, and its algorithm bandwidth half of that (the ring's is busBw x nRanks /
// nSteps). Used for the tree's predicted_s (the AUTO choice), not applied to its flows.
constexpr double TREE_BUS_EFFICIENCY = 0.92;
constexpr double TREE_ALGO_RATIO = 0.5;

// NCCL 2.20.3 tuning.cc, the protocols' bandwidth refinements of ncclTopoTuneModel (applied to the flows
// through Flow::efficiency): ring LL busBw x 1/4 on several nodes or for all-reduce, x 1/3 otherwise; ring
// LL128 x 0.92 (0.7 with one GPU per node, "ppn < 2"); tree LL x 1/3.8; tree LL128 x 7/9 on one node,
// 120/128 across nodes.
constexpr double RING_LL_FACTOR_AR_OR_NET = 1.0 / 4.0;
constexpr double RING_LL_FACTOR_ONE_NODE = 1.0 / 3.0;
constexpr double RING_LL128_FACTOR = 0.92;
constexpr double RING_LL128_FACTOR_ONE_PPN = 0.7;
constexpr double TREE_LL_FACTOR = 1.0 / 3.8;
constexpr double TREE_LL128_FACTOR_ONE_NODE = 7.0 / 9.0;
constexpr double TREE_LL128_FACTOR_NET = 120.0 / 128.0;
// NCCL 2.20.3 tuning.cc llMaxBws (GB/s, the LL bus bandwidth's ceiling for the whole collective): one node
// 87.7 (Ampere, Hopper; Volta 39.0); two nodes 22.5, more 19.0 (AMD hosts, as DGX A100; Intel 39.0, 20.4): the
// AMD rows, as for NET_OVERHEAD_S.
constexpr double LL_MAX_BPS_ONE_NODE = 87.7e9;
constexpr double LL_MAX_BPS_TWO_NODES = 22.5e9;
constexpr double LL_MAX_BPS_MORE_NODES = 19.0e9;

// NCCL 2.20.3 tuning.cc treeCorrectionFactor[protocol][log2i(bytes >> 6)] ("Trees are not perfectly sticking to the
// model for medium sizes"): the tree's measured bandwidth relative to its model, powers of two from 64 B to 256 MB;
// 1 beyond. NCCL applies it to the tree's time estimate after LL's llMaxBw ceiling (ncclTopoGetAlgoTime scales the
// tuned bandwidth); here it scales the tree's flows as well.
constexpr std::array<std::array<double, 23>, 3> TREE_CORRECTION{{
    {1.0, 1.0, 1.0, 1.0, .9, .8, .7, .7, .7, .7, .6, .5, .4, .4, .5, .6, .7, .8, .9, 1.0, 1.0, 1.0, 1.0},
    {1.0, 1.0, 1.0, 1.0, 1.0, .9, .8, .8, .8, .7, .6, .6, .6, .6, .6, .6, .8, .9, .9, .9, .9, 1.0, 1.0},
    {.9, .9, .9, .9, .9, .9, .9, .8, .7, .6, .6, .5, .5, .5, .5, .6, .7, .8, .7, .7, .8, .9, .9},
}};

int proto_index(Protocol p)
{
  return p == Protocol::LL ? LL : p == Protocol::LL128 ? LL128 : SIMPLE;
}

const PerProtocol& step_row(const StepLatencies& h, Algo a)
{
  return a == Algo::RING ? h.ring : h.tree;
}

/// What a step of protocol p costs beyond the LL step of the same row (0 for LL).
double protocol_overhead_s(const StepLatencies& h, Algo a, Protocol p)
{
  const PerProtocol& row = step_row(h, a);
  return row[static_cast<std::size_t>(proto_index(p))] - row[LL];
}

/// An intra-node step of a ring or tree over `nodes` nodes: the hop plus the protocol's overhead on NVLink or
/// PCIe; for a ring across nodes at least NCCL's network post overhead (x 3 for Simple).
double intra_step_s(const Fabric& f, Algo a, Protocol p, int nodes)
{
  const double step = f.intra_latency_s + protocol_overhead_s(f.intra_nvlink ? HW_NVLINK : HW_PCI, a, p);
  if (a == Algo::RING && nodes > 1)
    return std::max(step, NET_OVERHEAD_S * (p == Protocol::SIMPLE ? 3.0 : 1.0));
  return step;
}

double inter_step_s(const Fabric& f, Algo a, Protocol p)
{
  return f.inter_latency_s + protocol_overhead_s(HW_NET, a, p);
}

bool is_all_reduce(CollectiveKind k)
{
  return k == CollectiveKind::ALL_REDUCE;
}

/// Total latency of a flat ring over `nodes` x `g` ranks (NCCL 2.20.3 tuning.cc, ring latency: baseLat +
/// (nsteps - nInterSteps) x intra step + nInterSteps x inter step; nsteps = 2(N-1) for all-reduce, N-1
/// for all-gather and reduce-scatter; nInterSteps = 2 x nodes (all-reduce) or nodes - 1, 0 on one node).
/// The inter steps are clamped to nsteps (one GPU per node: every step crosses a node boundary).
double ring_latency_s(CollectiveKind k, int nodes, int g, const Fabric& f, Protocol p)
{
  const std::int64_t n = static_cast<std::int64_t>(nodes) * g;
  const std::int64_t steps = (is_all_reduce(k) ? 2 : 1) * (n - 1);
  std::int64_t inter = 0;
  if (nodes > 1)
    inter = std::min<std::int64_t>(is_all_reduce(k) ? 2 * static_cast<std::int64_t>(nodes) : nodes - 1, steps);
  return BASE_RING_S[static_cast<std::size_t>(proto_index(p))] +
         static_cast<double>(steps - inter) * intra_step_s(f, Algo::RING, p, nodes) +
         static_cast<double>(inter) * inter_step_s(f, Algo::RING, p);
}

/// Total latency of the tree all-reduce (NCCL 2.20.3 tuning.cc: baseLat + 2 x ((G-1) x intra step +
/// log2i(nodes) x inter step): up the chain and the tree, then down).
double tree_latency_s(const Fabric& f, Protocol p)
{
  return BASE_TREE_S[static_cast<std::size_t>(proto_index(p))] +
         2.0 * ((f.gpus_per_node - 1) * intra_step_s(f, Algo::TREE, p, f.nodes) +
                log2_floor(f.nodes) * inter_step_s(f, Algo::TREE, p));
}

/// The protocols AUTO chooses among: LL and Simple always; LL128 when the GPUs of a node talk over NVLink
/// (NCCL 2.20.3 tuning.cc enables LL128 by default only for an NVLink intra-node path, PATH_NVB or better,
/// on Volta, Ampere and Hopper, the GPUs that have NVLink, with the NIC near the GPU, as on DGX-class
/// nodes). A forced protocol alone.
std::span<const Protocol> candidate_protocols(const Fabric& f, const Options& o)
{
  static constexpr std::array<Protocol, 4> EACH{Protocol::AUTO, Protocol::LL, Protocol::LL128,
                                                Protocol::SIMPLE}; // indexed by Protocol
  static constexpr std::array<Protocol, 3> NVLINK{Protocol::LL, Protocol::LL128, Protocol::SIMPLE};
  static constexpr std::array<Protocol, 2> NO_LL128{Protocol::LL, Protocol::SIMPLE};
  const auto one = [](Protocol p) { return std::span<const Protocol>(EACH).subspan(static_cast<std::size_t>(p), 1); };
  if (!o.protocols)
    return one(Protocol::SIMPLE);
  if (o.protocol != Protocol::AUTO)
    return one(o.protocol);
  if (f.intra_nvlink)
    return NVLINK;
  return NO_LL128;
}

double ll_max_Bps(int nodes)
{
  return nodes == 1 ? LL_MAX_BPS_ONE_NODE : nodes == 2 ? LL_MAX_BPS_TWO_NODES : LL_MAX_BPS_MORE_NODES;
}

/// NCCL's tree correction for a collective of `bytes` with protocol p (TREE_CORRECTION).
double tree_correction(double bytes, Protocol p)
{
  const auto chunks = static_cast<std::int64_t>(bytes) >> 6;
  const int log_size = chunks > 0 ? log2_floor(static_cast<int>(std::min<std::int64_t>(chunks, 1 << 30))) : 0;
  if (log_size >= 23)
    return 1.0;
  return TREE_CORRECTION[static_cast<std::size_t>(proto_index(p))][static_cast<std::size_t>(log_size)];
}

/// The protocol's share of the Simple bus bandwidth of a ring or tree over `nodes` nodes of `g` ranks (NCCL
/// 2.20.3 ncclTopoTuneModel's refinements, before LL's llMaxBw ceiling): a factor <= 1.
double protocol_factor(Algo a, Protocol p, CollectiveKind k, int nodes, int g)
{
  double factor = 1;
  if (p == Protocol::LL) {
    if (a == Algo::RING)
      factor = nodes > 1 || is_all_reduce(k) ? RING_LL_FACTOR_AR_OR_NET : RING_LL_FACTOR_ONE_NODE;
    else
      factor = TREE_LL_FACTOR;
  } else if (p == Protocol::LL128) {
    if (a == Algo::RING)
      factor = g < 2 ? RING_LL128_FACTOR_ONE_PPN : RING_LL128_FACTOR;
    else
      factor = nodes == 1 ? TREE_LL128_FACTOR_ONE_NODE : TREE_LL128_FACTOR_NET;
  }
  return factor;
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
/// tree), each link at its achieved fraction (achieved_fraction): one node: the GPU's intra link (one
/// channel); one GPU per node: the NIC; else the smaller of the NIC (each NIC carries one channel each way)
/// and the GPU's intra link shared by the channels whose intra edge leaves that GPU: all C when C < G,
/// C - 1 when C = G (each GPU is one channel's exit).
double ring_channel_Bps(const Fabric& f, int c, const Options& o)
{
  const double intra = achieved_fraction(f, false, o) * f.intra_Bps;
  const double inter = achieved_fraction(f, true, o) * f.inter_Bps;
  if (f.nodes == 1)
    return intra;
  if (f.gpus_per_node == 1)
    return inter;
  const int sharing = c < f.gpus_per_node ? c : c - 1;
  return std::min(inter, intra / sharing);
}

/// Sets every flow's efficiency: the achieved fraction of its transport times the protocol's factor.
void set_efficiency(std::vector<Flow>& flows, const Fabric& f, const Options& o, double protocol_factor)
{
  const double intra = achieved_fraction(f, false, o) * protocol_factor;
  const double inter = achieved_fraction(f, true, o) * protocol_factor;
  for (Flow& fl : flows)
    fl.efficiency = fl.src.node != fl.dst.node ? inter : intra;
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

/// A protocol's estimate: NCCL's time (latency + bytes / bandwidth) and the protocol's bandwidth factor.
struct Estimate {
  Protocol protocol = Protocol::SIMPLE;
  double latency_s = 0;
  double bandwidth_s = 0; ///< bytes at the protocol's bus bandwidth, under LL's ceiling
  double factor = 1;      ///< the protocol's share of the Simple bus bandwidth (protocol_factor), on the flows
  /// The time LL's llMaxBw ceiling adds to the flows' bandwidth term. The ceiling is the GPU's (flag polling),
  /// not the links': it is paid as phase latency, so that the flows' wire bytes do not grow with the links'
  /// rates (a faster NIC never loads a shared link more).
  double ceiling_s = 0;
  double total() const { return latency_s + bandwidth_s; }
};

/// `bytes` at bus bandwidth `bus_Bps` x `factor`, under LL's ceiling on `nodes` nodes: fills bandwidth_s and ceiling_s.
/// `correction` is the part of `factor` that is the tree's medium-size correction (1 for rings). NCCL 2.20.3 caps
/// LL's bus bandwidth at llMaxBw in ncclTopoTuneModel and ncclTopoGetAlgoTime multiplies the capped bandwidth by
/// the correction afterwards, so the ceiling is corrected too: bytes / (min(bus x factor / correction, llMaxBw) x
/// correction).
void set_bandwidth(Estimate& e, double bytes, double bus_Bps, int nodes, double correction = 1.0)
{
  const double uncapped = bytes / (bus_Bps * e.factor);
  e.bandwidth_s = uncapped;
  if (e.protocol == Protocol::LL)
    e.bandwidth_s = std::max(uncapped, bytes / (ll_max_Bps(nodes) * correction));
  e.ceiling_s = e.bandwidth_s - uncapped;
}

/// The estimate of smallest total among the candidate protocols (NCCL 2.20.3 ncclTopoGetAlgoTime, then the
/// smallest time wins; on a tie the first, as NCCL's strict `<` keeps the lower protocol index).
template <class Of> Estimate best_protocol(const Fabric& f, const Options& o, Of estimate_of)
{
  Estimate best;
  bool first = true;
  for (Protocol p : candidate_protocols(f, o)) {
    const Estimate e = estimate_of(p);
    if (first || e.total() < best.total())
      best = e;
    first = false;
  }
  return best;
}

/// A ring of `nodes` x `g` ranks carrying `edge_bytes` per edge at a Simple per-edge bandwidth `edge_Bps`
/// (its bus bandwidth `bus_Bps`), with protocol p.
Estimate ring_protocol_estimate(CollectiveKind k, int nodes, int g, const Fabric& f, Protocol p, double edge_bytes,
                                double edge_Bps, double bus_Bps)
{
  Estimate e;
  e.protocol = p;
  e.factor = protocol_factor(Algo::RING, p, k, nodes, g);
  e.latency_s = ring_latency_s(k, nodes, g, f, p);
  // edge bytes / edge bandwidth = bus bytes / bus bandwidth, bus bytes = edge bytes x bus / edge bandwidth
  set_bandwidth(e, edge_bytes * bus_Bps / edge_Bps, bus_Bps, nodes);
  return e;
}

Estimate ring_estimate(CollectiveKind k, double s, const Fabric& f, const Options& o)
{
  const int cs = channels(f);
  const std::int64_t ranks = static_cast<std::int64_t>(f.nodes) * f.gpus_per_node;
  const double edge_bytes = ring_edge_fraction(k, ranks) * s / cs;
  const double ch_Bps = ring_channel_Bps(f, cs, o);
  return best_protocol(f, o, [&](Protocol p) {
    return ring_protocol_estimate(k, f.nodes, f.gpus_per_node, f, p, edge_bytes, ch_Bps, cs * ch_Bps);
  });
}

/// The flat ring's plan, `est` its ring_estimate().
Plan ring_plan(CollectiveKind k, double s, const Fabric& f, const Options& o, const Estimate& est)
{
  const int cs = channels(f);
  const std::int64_t ranks = static_cast<std::int64_t>(f.nodes) * f.gpus_per_node;
  Plan p;
  p.algorithm = "ring";
  p.channels = cs;
  p.protocol = est.protocol;
  PlanPhase ph;
  ph.flows = ring_flows(f, o, ring_edge_fraction(k, ranks) * s / cs);
  set_efficiency(ph.flows, f, o, est.factor);
  ph.latency_s = phase_latency_s(est.latency_s + est.ceiling_s, route_latency_s(f, f.nodes > 1));
  ph.protocol = est.protocol;
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
        const spec::Gpu upper{n, (e + k) % g};
        const spec::Gpu lower{n, (e + k + 1) % g};
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

Estimate tree_estimate(double s, const Fabric& f, const Options& o)
{
  const int cs = channels(f);
  const double bus_Bps = TREE_BUS_EFFICIENCY * cs * ring_channel_Bps(f, cs, o);
  return best_protocol(f, o, [&](Protocol p) {
    Estimate e;
    e.protocol = p;
    const double correction = o.protocols ? tree_correction(s, p) : 1.0;
    e.factor = protocol_factor(Algo::TREE, p, CollectiveKind::ALL_REDUCE, f.nodes, f.gpus_per_node) * correction;
    e.latency_s = tree_latency_s(f, p);
    set_bandwidth(e, s / TREE_ALGO_RATIO, bus_Bps, f.nodes, correction); // the correction after LL's ceiling
    return e;
  });
}

/// The tree all-reduce's plan, `est` its tree_estimate().
Plan tree_plan(double s, const Fabric& f, const Options& o, const Estimate& est)
{
  Plan p;
  p.algorithm = "tree";
  p.channels = channels(f);
  p.protocol = est.protocol;
  PlanPhase ph;
  ph.flows = tree_flows(f, o, s);
  set_efficiency(ph.flows, f, o, est.factor);
  ph.latency_s = phase_latency_s(est.latency_s + est.ceiling_s, route_latency_s(f, f.nodes > 1));
  ph.protocol = est.protocol;
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
  // A ring of one node's G ranks, its own NCCL call: its own protocol choice.
  const double edge_Bps = achieved_fraction(f, false, o) * f.intra_Bps;
  const Estimate est = best_protocol(
      f, o, [&](Protocol p) { return ring_protocol_estimate(k, 1, g, f, p, edge_bytes, edge_Bps, edge_Bps); });
  set_efficiency(ph.flows, f, o, est.factor);
  ph.latency_s = phase_latency_s(est.latency_s + est.ceiling_s, route_latency_s(f, false));
  ph.protocol = est.protocol;
  predicted += est.total();
  return ph;
}

/// G rings between nodes, ring l over the GPUs of local index l (through NIC spec::nic_of(l)), each on a
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
    busiest = std::max(busiest, ++rings_per_nic[static_cast<std::size_t>(spec::nic_of(l, g, f.nics_per_node))]);
  // A ring of `nodes` ranks, one GPU per node, its own NCCL call: its own protocol choice.
  const double edge_Bps = achieved_fraction(f, true, o) * f.inter_Bps / busiest;
  const Estimate est = best_protocol(
      f, o, [&](Protocol p) { return ring_protocol_estimate(k, nodes, 1, f, p, edge_bytes, edge_Bps, edge_Bps); });
  set_efficiency(ph.flows, f, o, est.factor);
  ph.latency_s = phase_latency_s(est.latency_s + est.ceiling_s, route_latency_s(f, true));
  ph.protocol = est.protocol;
  predicted += est.total();
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
  for (const PlanPhase& ph : p.phases)
    if (ph.flows.empty() || ph.flows.front().src.node != ph.flows.front().dst.node)
      p.protocol = ph.protocol; // the inter-node phase's
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
  if (!o.focus_nodes.empty() && o.focus_node >= 0)
    throw core::InternalError("collectives: a focus node and a set of focus nodes at once");
  for (std::size_t i = 0; i < o.focus_nodes.size(); ++i) {
    const int n = o.focus_nodes[i];
    if (n < 0 || n >= f.nodes || (i > 0 && n <= o.focus_nodes[i - 1]))
      throw core::InternalError("collectives: focus nodes must be ascending nodes of 0.." +
                                std::to_string(f.nodes - 1) + ", found " + std::to_string(n) + " at position " +
                                std::to_string(i));
  }
}

bool in_focus(int node, const std::vector<int>& nodes)
{
  return std::binary_search(nodes.begin(), nodes.end(), node);
}

Plan plan_over_focus_nodes(const Options& o, const std::function<Plan(const Options&)>& one)
{
  Options single = o;
  single.focus_nodes.clear();
  single.focus_node = o.focus_nodes.front();
  if (o.focus_nodes.size() == 1)
    return one(single);
  Plan out = one(single);
  for (std::size_t k = 1; k < o.focus_nodes.size(); ++k) {
    const int n = o.focus_nodes[k];
    single.focus_node = n;
    const Plan more = one(single);
    if (more.phases.size() != out.phases.size())
      throw core::InternalError("collectives: the plans of two focus nodes have different phases");
    for (std::size_t i = 0; i < more.phases.size(); ++i)
      for (const Flow& fl : more.phases[i].flows) {
        // A flow between two focus nodes is in both nodes' plans: kept from the lower node's.
        const int other = fl.src.node == n ? fl.dst.node : fl.src.node;
        if (other != n && other < n && in_focus(other, o.focus_nodes))
          continue;
        out.phases[i].flows.push_back(fl);
      }
  }
  return out;
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

} // namespace detail

using namespace detail;

Fabric fabric_of(const spec::ClusterSpec& c, int tensor_parallel, int pipeline_parallel)
{
  const spec::NodeSpec& nd = c.node;
  Fabric f;
  f.nodes = c.nodes;
  f.gpus_per_node = c.gpus_per_node;
  f.nics_per_node = c.network.nics_per_node;
  f.intra_nvlink = nd.nvlink.present;
  f.tensor_parallel = tensor_parallel;
  f.pipeline_parallel = pipeline_parallel;
  f.intra_Bps = nd.nvlink.present ? nd.nvlink.bandwidth_Bps : nd.pcie.bandwidth_Bps;
  f.intra_latency_s = 2 * (nd.nvlink.present ? nd.nvlink.latency_s : nd.pcie.latency_s);
  f.inter_Bps = c.network.nic_bandwidth_Bps;
  // A measured fraction belongs to the node's own NICs: a scenario that gives another NIC rate gets the prior.
  if (c.network.nic_bandwidth_Bps == nd.nics.bandwidth_Bps)
    f.inter_busbw_fraction = nd.nics.busbw_fraction;
  f.inter_latency_s = c.network.latency_s + 2 * nd.pcie.latency_s;
  return f;
}

const char* protocol_name(Protocol p)
{
  switch (p) {
  case Protocol::LL:
    return "LL";
  case Protocol::LL128:
    return "LL128";
  case Protocol::SIMPLE:
    return "Simple";
  case Protocol::AUTO:
    break;
  }
  return "auto";
}

double achieved_fraction(const Fabric& f, bool crosses_nodes, const Options& o)
{
  if (!o.achieved_busbw)
    return 1.0;
  if (!crosses_nodes)
    return f.intra_nvlink ? std::min(1.0, NVLINK_BUSBW_FRACTION * o.busbw_factor_nvlink)
                          : std::min(1.0, PCIE_BUSBW_FRACTION * o.busbw_factor_pcie);
  const double doublings = f.nodes > 2 ? std::log2(f.nodes / 2.0) : 0.0;
  const double two_nodes = f.inter_busbw_fraction > 0 ? f.inter_busbw_fraction : NET_BUSBW_FRACTION;
  return std::min(1.0, two_nodes * o.busbw_factor_net) / (1.0 + NET_BUSBW_FALLOFF_PER_DOUBLING * doublings);
}

int nccl_ctas(const Fabric& f, spec::CommGroup g, int one_node_ctas)
{
  // NCCL 2.8-2.24: MAXCHANNELS 32 (src/include/device.h); connect.cc doubles the search's channels.
  constexpr int NCCL_MAX_CHANNELS = 32;
  constexpr int CHANNELS_PER_SEARCH_CHANNEL = 2;
  // With a pipeline, a stage of at most one node's GPUs keeps its data-parallel groups inside a node.
  const bool stage_in_a_node = f.pipeline_parallel > 1 && f.ranks_per_stage() <= f.gpus_per_node;
  const bool one_node = f.nodes <= 1 || g == spec::CommGroup::INTRA_NODE || g == spec::CommGroup::TENSOR ||
                        (g == spec::CommGroup::DATA_PARALLEL && stage_in_a_node);
  if (one_node)
    return one_node_ctas;
  const int t = std::max(1, f.tensor_parallel);
  int gpus = f.gpus_per_node;                                              // the group's GPUs on one node
  if (g == spec::CommGroup::INTER_NODE || g == spec::CommGroup::EMBEDDING) // a tied pair: one GPU on each node
    gpus = 1;
  else if (g == spec::CommGroup::DATA_PARALLEL)
    gpus = std::max(1, f.gpus_per_node / t);
  const int search = std::max(1, std::min(f.nics_per_node, gpus));
  return std::min(NCCL_MAX_CHANNELS, CHANNELS_PER_SEARCH_CHANNEL * search);
}

int nccl_p2p_ctas(bool same_node, bool nvlink, int one_node_ctas)
{
  // NCCL 2.8-2.24 src/graph/paths.cc: NCCL_PARAM(NChannelsPerNetPeer, "NCHANNELS_PER_NET_PEER", 2); a PATH_NVL peer
  // 2*std::max(1, (int)(path->bw / nvlBw)), other local peers 2; p2pnChannelsPerPeer = nextPow2(min(nChannels, ...)).
  constexpr int NCCL_MAX_CHANNELS = 32;
  constexpr int NET_PEER_CHANNELS = 2;
  constexpr int PCIE_PEER_CHANNELS = 2;
  if (!same_node)
    return NET_PEER_CHANNELS;
  if (!nvlink)
    return PCIE_PEER_CHANNELS;
  int pow2 = 1;
  while (pow2 < one_node_ctas)
    pow2 *= 2;
  return std::min(NCCL_MAX_CHANNELS, pow2);
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
  if (!o.focus_nodes.empty())
    return plan_over_focus_nodes(o, [&](const Options& one) { return plan(kind, bytes, f, one); });
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
    p = ring_plan(kind, s, f, o, ring_estimate(kind, s, f, o));
  } else if (o.all_reduce == Algorithm::TREE) {
    p = tree_plan(s, f, o, tree_estimate(s, f, o));
  } else {
    // AUTO: NCCL's rule (tuning.cc ncclTopoGetAlgoTime, then the smallest time wins): the smaller estimate.
    const Estimate tree = tree_estimate(s, f, o);
    const Estimate ring = ring_estimate(kind, s, f, o);
    p = tree.total() < ring.total() ? tree_plan(s, f, o, tree) : ring_plan(kind, s, f, o, ring);
  }
  if (o.merge_channels) {
    for (PlanPhase& ph : p.phases)
      merge_same_pairs(ph.flows, true);
  }
  return p;
}

} // namespace zerosim::collectives
