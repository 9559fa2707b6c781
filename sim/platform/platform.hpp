// The SimGrid platform of a cluster, built in code from its spec (docs/design.md "platform",
// docs/simgrid-notes.md §2): per node, one host per GPU, the host CPU (cores) and a host standing for its
// DRAM behind a SHARED link that CPU work and every DMA into host memory cross; NVLink per GPU (split
// duplex, through a non-blocking NVSwitch that is not a link of its own), the PCIe tree (a link per GPU,
// a link per switch uplink to the root complex, NICs and NVMe devices on the switches in order), NICs
// (split duplex), the fabric between nodes (its kind's builder, platform/fabric.hpp), the NVMe drives as one
// RAID-0 volume (DeepSpeed's nvme_path, DGX systems' /raid). The only code besides engine/ that knows SimGrid.
// docs/engine.md.
#pragma once

#include "spec/node_spec.hpp"
#include "spec/placement.hpp"

#include <map>
#include <memory>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

namespace simgrid::s4u {
class Host;
class Link;
class NetZone;
} // namespace simgrid::s4u

namespace zerosim::platform {

/// Speed of the GPU, DRAM, NVMe, remote and timer hosts: work on them is (seconds x this), so that an
/// execution takes exactly the time the compute model gives when it has the host alone.
inline constexpr double WORK_UNITS_PER_SECOND = 1e9;

/// SimGrid's network-model settings (set before the first platform of the process; numbers reset for
/// every later engine): CM02 max-min sharing, no cross-traffic, no TCP window (gamma 0), factors 1.
void configure_network_model();
/// The settings above, as recorded in every result's meta.
std::string network_model_description();

struct PlatformOptions {
  /// Build only node 0; the other nodes stand behind its NICs as `remote` hosts (symmetric replay). The same as
  /// `nodes` = {0}.
  bool symmetric = false;
  /// The nodes to build, ascending (the node-set replay's simulated nodes, docs/engine.md "Pipelines: the node-set
  /// replay"); the nodes not built stand behind each built node's NICs as `remote` hosts. Empty: every node (or node 0
  /// with `symmetric`).
  std::vector<int> nodes;
  /// The speed of one host CPU core, in the units CPU work is counted in (the compute model's cpu_core_flops).
  double cpu_core_flops = 0;
  /// The GPU pairs on different built nodes that need a route through the fabric (the collective planner's
  /// inter_node_pairs, the SEND/RECV pairs). Both nodes of each must be built.
  std::vector<std::pair<spec::Gpu, spec::Gpu>> inter_node_pairs;
};

/// A route between two GPUs (Platform::route).
struct Route {
  std::vector<std::string> links; ///< the links crossed, in order (a split-duplex link's side: NAME_UP or NAME_DOWN)
  double latency_s = 0;           ///< Platform::route_latency: what the engine pays before a flow
  double bandwidth_Bps = 0;       ///< the narrowest link's: the rate of a flow alone on the route
};

/// One built platform. Build it after the Engine exists; the root zone is sealed by the constructor.
class Platform {
public:
  Platform(const spec::ClusterSpec& c, const PlatformOptions& o);

  simgrid::s4u::Host* gpu(int node, int local) const;
  /// The GPU's memory-bound side: the executions of a GPU's kernels that HBM bounds (docs/engine.md
  /// "Interference"), apart from gpu(), where an NCCL kernel's share of the SMs is held. No routes.
  simgrid::s4u::Host* gpu_memory(int node, int local) const;
  simgrid::s4u::Host* cpu(int node) const;
  /// The DRAM endpoint: a flow cpu(node) -> dram(node) crosses only the DRAM link (CPU work's traffic).
  simgrid::s4u::Host* dram(int node) const;
  /// The node's NVMe drives as one RAID-0 volume (every transfer is striped evenly over all of them,
  /// docs/engine.md "NVMe"): a host behind a read and a write media link of devices x the drive's read and
  /// write bandwidth and one PCIe link of devices x max(read, write) into host memory (DRAM): an NVMe transfer
  /// is one flow between this host and cpu(node). Exact for the drives: an even
  /// stripe gives each drive the volume's share / devices. The drives' traffic does not cross the GPU switch
  /// uplinks (one flow per switch would, at 1 + switches activities per transfer: 5x slower replays on 8-switch
  /// nodes); it shares DRAM with every other host transfer. nullptr on a node without drives.
  simgrid::s4u::Host* nvme(int node) const;
  /// Symmetric platform: the rest of the cluster seen through NIC `nic` of node 0 (its fabric uplink).
  simgrid::s4u::Host* remote(int nic) const;
  /// A platform that does not build every node: the nodes not built, seen through NIC `nic` of built node `node`.
  simgrid::s4u::Host* remote(int node, int nic) const;
  /// The nodes built, ascending.
  const std::vector<int>& nodes() const { return nodes_; }
  /// A host of unbounded cores for pure delays (collective latency terms): an execution of
  /// t x WORK_UNITS_PER_SECOND takes t seconds, however many run at once.
  simgrid::s4u::Host* timer() const;
  /// The latency of the route src -> dst: the sum of its links' latencies (pcie.latency, nvlink.latency, half
  /// of network.latency per NIC). SimGrid's links carry none: the engine pays this as a delay before each flow,
  /// so that every flow has the same sharing penalty and links are shared by plain max-min (SimGrid's CM02
  /// gives a flow a share inversely proportional to its route latency; docs/engine.md "Network model").
  double route_latency(const simgrid::s4u::Host* src, const simgrid::s4u::Host* dst) const;

  /// The host a flow between GPU `end` and GPU `peer` has at `end`: the GPU's own where the platform built its node;
  /// for a GPU of a node not built, the stand-in behind the NIC the flow crosses on `peer`'s node, that of `peer`
  /// (remote(peer.node, nic_of(peer))). Throws core::InternalError when neither GPU's node was built.
  simgrid::s4u::Host* flow_end(spec::Gpu end, spec::Gpu peer) const;
  /// The route of a flow from GPU `a` to GPU `b` (a != b) between their flow ends: across built nodes, a route exists
  /// for the PlatformOptions::inter_node_pairs only; a GPU of a node not built is its stand-in (flow_end), and the
  /// route holds the built node's half of the way.
  Route route(spec::Gpu a, spec::Gpu b) const;

private:
  /// The position of built node `node` in nodes_, -1 when it was not built.
  int built(int node) const;
  /// built(node), or core::InternalError naming `what` when it was not built.
  std::size_t position(int node, const char* what) const;

  int G_ = 1;              ///< GPUs per node
  int nics_ = 0;           ///< NICs per node
  std::vector<int> nodes_; ///< the nodes built, ascending; the per-node vectors below follow it
  std::vector<std::vector<simgrid::s4u::Host*>> gpus_;
  std::vector<std::vector<simgrid::s4u::Host*>> gpu_memories_;
  std::vector<simgrid::s4u::Host*> cpus_;
  std::vector<simgrid::s4u::Host*> drams_;
  std::vector<simgrid::s4u::Host*> nvmes_;
  std::vector<std::vector<simgrid::s4u::Host*>> remotes_; ///< per built node, per NIC; empty when every node is built
  simgrid::s4u::Host* timer_ = nullptr;
  std::unordered_map<const simgrid::s4u::Link*, double> link_latency_; ///< split-duplex sides: the intended latency
  mutable std::map<std::pair<const simgrid::s4u::Host*, const simgrid::s4u::Host*>, double> route_latency_;
};

} // namespace zerosim::platform
