// Collectives as NCCL runs them, decomposed into a few equal flows between GPUs, without SimGrid:
// rings for all-gather and reduce-scatter; ring or tree for all-reduce, chosen by size as NCCL's
// tuner does; rings flat across all ranks, one channel per NIC, each channel crossing every node
// boundary once; the tree a chain inside the node and a double binary tree between nodes; a
// hierarchical (intra-node, inter-node, intra-node) variant as an option. Chunk pipelining is an
// analytic term: each ring edge is ONE flow carrying everything that edge carries. NCCL's protocols LL,
// LL128 and Simple are chosen as NCCL's tuner chooses them (latency and bandwidth per protocol), and flows
// are priced at the bus bandwidth NCCL achieves per transport, not at line rate (not modelled: NVLS,
// CollNet/SHARP). docs/collectives.md has every formula and the NCCL source (2.20.3,
// src/graph/{tuning,trees,connect}.cc, topo.h) or measurement of every constant.
#pragma once

#include "spec/node_spec.hpp"
#include "spec/placement.hpp"
#include "spec/task_graph.hpp"

#include <array>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace zerosim::collectives {

/// What the planner needs to know of the cluster (fabric_of: from spec::ClusterSpec, for the engine and calibration).
/// The two latencies are what one flow of that kind pays on the platform's route (GPU to GPU): the
/// planner subtracts them from a phase's latency so that route latency + phase latency is the
/// collective's latency.
struct Fabric {
  int nodes = 1;
  int gpus_per_node = 1;
  int nics_per_node = 0;
  double intra_Bps = 0; ///< per GPU, per direction, between GPUs of a node (NVLink, or PCIe if none)
  double inter_Bps = 0; ///< per NIC, per direction (the engine may pass min(NIC, GPU PCIe link))
  /// The node's measured NIC bus-bandwidth fraction (spec::NicSpec::busbw_fraction) in place of NET_BUSBW_FRACTION;
  /// 0: the prior.
  double inter_busbw_fraction = 0;
  double intra_latency_s = 0; ///< one hop inside the node (route GPU -> GPU)
  double inter_latency_s = 0; ///< one hop between nodes (route GPU -> PCIe -> NIC -> fabric -> NIC -> PCIe -> GPU)
  /// GPUs of a node talk over NVLink (NCCL's NVLINK latency row); false: over PCIe (its PCI row).
  bool intra_nvlink = true;
  /// The tensor-parallel degree t (a divisor of gpus_per_node): TENSOR groups are t consecutive GPUs of a node,
  /// DATA_PARALLEL groups the GPUs with the same local index modulo t on every node (of one stage). 1: no tensor
  /// parallelism.
  int tensor_parallel = 1;
  /// The pipeline stages p (docs/pipeline-parallel.md §1): stage s holds the D x t consecutive ranks from s x D x t,
  /// whole nodes (D x t a multiple of gpus_per_node) or a slice of one node (D x t a divisor of it). DATA_PARALLEL
  /// groups are each stage's own, EMBEDDING pairs join stage 0's rank r and stage p-1's rank (p-1) x D x t + r.
  /// 1: no pipeline.
  int pipeline_parallel = 1;
  /// The ranks of one pipeline stage, D x t: every rank of the cluster without a pipeline.
  int ranks_per_stage() const { return nodes * gpus_per_node / (pipeline_parallel > 0 ? pipeline_parallel : 1); }
};

/// The planner's fabric of cluster `c` at tensor-parallel degree `tensor_parallel` and `pipeline_parallel` stages, the
/// one derivation the engine and calibration share: inside a node NVLink (PCIe when the node has none) at its
/// bandwidth, and two hops of its latency (the platform's route GPU -> GPU: the sender's link and the receiver's);
/// across nodes c.network's NIC bandwidth, and network latency + two PCIe hops (the route GPU -> PCIe -> NIC -> NIC ->
/// PCIe -> GPU; docs/engine.md "Platform").
Fabric fabric_of(const spec::ClusterSpec& c, int tensor_parallel = 1, int pipeline_parallel = 1);

enum class Algorithm { AUTO, RING, TREE, HIERARCHICAL };

/// NCCL's protocols (src/graph/tuning.cc): LL (8-byte stores of 4 data bytes and a flag: lowest latency, a
/// quarter to a third of the bandwidth), LL128 (128-byte lines with 8 flag bytes: 120/128 of the bandwidth;
/// NCCL enables it by default only over NVLink), Simple (full bandwidth, highest per-step latency).
enum class Protocol { AUTO, LL, LL128, SIMPLE };

/// "LL", "LL128", "Simple" (NCCL's names), "auto".
const char* protocol_name(Protocol p);

struct Options {
  Algorithm all_reduce = Algorithm::AUTO; ///< AUTO: ring or tree by NCCL's size rule (smaller predicted_s)
  /// All collectives as intra-node / inter-node / intra-node phases (overrides all_reduce). A cluster of
  /// one node, or of one GPU per node, has no hierarchy: its collectives stay flat rings.
  bool hierarchical = false;
  /// -1: every flow. n >= 0: only flows with an end on node n (the symmetric replay's representative node).
  int focus_node = -1;
  /// The node-set replay's simulated nodes (ascending, distinct; docs/engine.md "Pipelines: the node-set replay"):
  /// only flows with an end on one of them, each once. Empty: focus_node alone decides; {n} is focus_node n.
  std::vector<int> focus_nodes;
  /// Combine the flows of a phase that have the same (src, dst) into one flow carrying their summed
  /// bytes (fewer flows for the solver). Same time when nothing else shares their links; under
  /// contention a merged flow gets one max-min share where its parts had one each.
  bool merge_channels = false;
  /// NCCL's protocols and its tuner's medium-size tree correction (docs/collectives.md "Protocols"). false
  /// (ablation): Simple only, no tree correction, the pricing before protocols were modelled.
  bool protocols = true;
  /// With `protocols`: AUTO picks the protocol of smallest predicted time among those NCCL enables (LL,
  /// Simple; LL128 when the GPUs of a node talk over NVLink), per plan (per phase for hierarchical plans), as
  /// NCCL's tuner does; LL, LL128 or SIMPLE force one (NCCL_PROTO).
  Protocol protocol = Protocol::AUTO;
  /// Price flows at the bus bandwidth NCCL achieves per transport (NVLink, PCIe, network, the network's
  /// fall-off with node count; docs/collectives.md "Achieved bus bandwidth"). false: at line rate, the
  /// pricing before this was modelled (ablation).
  bool achieved_busbw = true;
  /// A calibration profile's multipliers on the achieved fractions of NVLink, PCIe and the network
  /// (docs/calibration.md `busbw.*`); the product stays at most 1 (line rate).
  double busbw_factor_nvlink = 1.0;
  double busbw_factor_pcie = 1.0;
  double busbw_factor_net = 1.0;
};

struct Flow {
  spec::Gpu src;
  spec::Gpu dst;
  double bytes = 0;
  /// The ring or tree channel (0..channels-1); in a hierarchical plan the local index of the
  /// inter-node ring, 0 in the intra-node phases; with Options::merge_channels the lowest merged one.
  int channel = 0;
  /// The fraction of its route's bandwidth the flow achieves: the transport's achieved bus-bandwidth
  /// fraction times the protocol's bandwidth factor (1 at line rate with Simple). The engine sends
  /// wire_bytes() = bytes / efficiency, so that the flow takes as long as NCCL takes to move `bytes`.
  double efficiency = 1;
  double wire_bytes() const { return bytes / efficiency; }
};

/// Flows that start together; the phase ends when all have ended, plus `latency_s`.
struct PlanPhase {
  std::vector<Flow> flows;
  /// The per-step latencies of the phase beyond the one route latency each flow already pays
  /// (a ring of N ranks takes N-1 or 2(N-1) steps; a tree 2 x depth).
  double latency_s = 0;
  /// The protocol the phase runs (never AUTO): its latency and its flows' efficiency follow from it.
  Protocol protocol = Protocol::SIMPLE;
};

struct Plan {
  std::string algorithm; ///< "ring", "tree", "hierarchical", "local" (group of one)
  /// Ring and tree: parallel channels (each with its own ring, or its own pair of trees). Hierarchical:
  /// the parallel inter-node rings (one per local GPU index). 1 for "local".
  int channels = 1;
  std::vector<PlanPhase> phases; ///< run one after another; empty for a group of one
  double predicted_s = 0;        ///< the planner's own alpha-beta estimate without contention (for choosing, tests)
  /// The protocol of the plan's phases ("hierarchical": of its inter-node phase, which may differ from its
  /// intra-node phases'). SIMPLE for "local".
  Protocol protocol = Protocol::SIMPLE;
};

/// The plan of one collective over the whole cluster (every GPU of every node is in the group).
/// `bytes` is the full buffer S (TaskGraph's convention: all-gather output, reduce-scatter input,
/// all-reduce buffer). Throws core::InputError for a fabric that cannot carry it (no NIC between nodes,
/// no bandwidth), core::InternalError for a negative size or a focus node outside the cluster.
Plan plan(spec::CollectiveKind kind, std::int64_t bytes, const Fabric& f, const Options& o = {});

/// The plan of one collective on every group of kind `g` at once (spec::CommGroup): WORLD is plan()
/// above; INTRA_NODE is the one-node plan of `f` repeated on every node; INTER_NODE is the plan of a
/// cluster of `f.nodes` nodes with one GPU and one NIC each, repeated for every local index (the groups
/// share each node's NICs on the platform). TENSOR is the plan of a node of t GPUs repeated on every group of
/// every node; DATA_PARALLEL the plan of a cluster of gpus_per_node / t GPUs (and min(NICs, gpus_per_node / t) NICs)
/// per node, its GPU v being local index v x t + c, repeated for every c < t (docs/tensor-parallel.md §4). With a
/// pipeline (f.pipeline_parallel = p > 1), DATA_PARALLEL is that plan on each stage's slice of the cluster (its
/// D x t / G nodes, or its D x t GPUs inside a node), placed at the stage's GPUs, and EMBEDDING every tied pair's
/// 2-rank plan (NCCL's ring of 2: each GPU sends and receives S in 2 steps of S/2), across the fabric when its two GPUs
/// are on different nodes (always so on more than one node); without a pipeline EMBEDDING is a group of one ("local").
/// Latency terms are those of one group (the groups run side by side). Honours o.focus_node and o.focus_nodes (only
/// the flows with an end on those nodes). Throws core::InputError for a pipeline whose stages neither fill whole nodes
/// nor divide one.
Plan plan(spec::CollectiveKind kind, std::int64_t bytes, const Fabric& f, const Options& o, spec::CommGroup g);

/// Every ordered GPU pair (src, dst) on different nodes that some plan of `f` may use (ring channels,
/// tree edges in both directions, hierarchical rings, the INTER_NODE groups' rings and trees, with tensor
/// parallelism the DATA_PARALLEL groups' pairs; with a pipeline, each stage's DATA_PARALLEL pairs and the EMBEDDING
/// pairs), sorted, without duplicates: the platform needs a route for each. Honours o.focus_node and o.focus_nodes
/// (only pairs with an end on those nodes).
std::vector<std::pair<spec::Gpu, spec::Gpu>> inter_node_pairs(const Fabric& f, const Options& o = {});

/// The CTAs (thread blocks, one per NCCL channel, each resident on an SM for the whole collective) of one collective
/// kernel on a group of kind `g` (docs/engine.md "Interference"; docs/research/nccl-ctas.md). A group inside one node
/// (INTRA_NODE, TENSOR, or any group of a one-node cluster) runs `one_node_ctas`, the GPU kind's figure (NCCL's ring
/// search over the node's NVLinks, doubled). A group across nodes runs NCCL's inter-node ring: one search channel per
/// NIC its GPUs of a node use (min(NICs, the group's GPUs per node)), doubled by ncclTopoPostset (src/graph/connect.cc
/// `nChannels*2`), at most MAXCHANNELS (32). With a pipeline, a DATA_PARALLEL group is its stage's (inside one node
/// when a stage is) and an EMBEDDING pair has one GPU on each of its two nodes. Large messages: NCCL drops channels
/// below about 768 KiB (not modelled).
int nccl_ctas(const Fabric& f, spec::CommGroup g, int one_node_ctas);

/// The CTAs of one NCCL send or receive kernel (ncclSend / ncclRecv) between two GPUs (docs/engine.md "SEND and
/// RECV"). NCCL runs point-to-point operations as kernels of one CTA per channel, as it runs collectives, on up to
/// p2pnChannelsPerPeer channels (src/graph/paths.cc `ncclTopoGetNchannels`, `ncclTopoComputeP2pChannels`, NCCL
/// 2.8-2.24): a peer across nodes gets NCCL_NCHANNELS_PER_NET_PEER, 2; a peer in the node over NVLink gets
/// 2 x (its path's NVLink bandwidth / one link's), at most the communicator's collective channels, rounded up to a
/// power of two. PyTorch gives each unbatched send/receive pair a communicator of its own (ProcessGroupNCCL's
/// `getKeySendRecv`), whose channels inside an NVSwitch node are `one_node_ctas` (the GPU kind's collective figure;
/// every NVLink of the GPU reaches the peer through the switch, so the path's 2 x links is no smaller): so
/// next_pow2(one_node_ctas), at most MAXCHANNELS (32). A peer in the node over PCIe gets 2. Large messages: NCCL
/// uses fewer channels for small ones (not modelled).
int nccl_p2p_ctas(bool same_node, bool nvlink, int one_node_ctas);

// ---- The layout, exposed for the engine's diagnostics and for tests ----

/// Channels of the flat ring and of the tree: 1 on one node (a non-blocking NVSwitch gains nothing from
/// more); across nodes min(nics_per_node, gpus_per_node), at least 1.
int channels(const Fabric& f);

/// The GPU where channel c enters every node: ceil(c * G / C) (= c * G / C when C divides G). The
/// channel visits the node's GPUs from there in rotated order and leaves from GPU entry - 1 (mod G),
/// so that NIC c receives channel c and sends channel c + 1: every NIC sends once and receives once.
int channel_entry(int channel, const Fabric& f);

/// A node's links in one tree of NCCL's double binary tree over `nodes` nodes (src/graph/trees.cc):
/// tree 0 is a binary tree rooted at node 0 whose leaves are the odd nodes; tree 1 is its mirror
/// (node n -> nodes-1-n) when `nodes` is even, or it shifted by one node when odd, so a node that is
/// interior in one tree is a leaf in the other. -1 for "none".
struct TreeLinks {
  int parent = -1;
  std::array<int, 2> children{-1, -1};
};
TreeLinks dtree_links(int tree, int node, int nodes);

/// floor(log2(n)) for n >= 1: NCCL's tree depth between nodes (its log2i).
int log2_floor(int n);

// ---- Achieved bus bandwidth (docs/collectives.md "Achieved bus bandwidth"; named for calibration) ----

/// Fraction of the NVLink line rate (per GPU, per direction) NCCL achieves.
inline constexpr double NVLINK_BUSBW_FRACTION = 0.80;
/// Fraction of the node's PCIe figure NCCL achieves (the topologies give PCIe as achieved already).
inline constexpr double PCIE_BUSBW_FRACTION = 1.0;
/// Fraction of the NIC line rate NCCL achieves at large sizes on two nodes (InfiniBand, RoCE).
inline constexpr double NET_BUSBW_FRACTION = 0.96;
/// The network fraction's fall-off with node count: divided by 1 + k log2(nodes / 2) beyond two nodes.
inline constexpr double NET_BUSBW_FALLOFF_PER_DOUBLING = 0.046;

/// The achieved fraction of a flow's route bandwidth: across nodes NET_BUSBW_FRACTION / (1 + k
/// log2(nodes / 2)) (nodes > 2), else NVLink's or PCIe's; 1 with Options::achieved_busbw off.
double achieved_fraction(const Fabric& f, bool crosses_nodes, const Options& o = {});

} // namespace zerosim::collectives
