// The fabric between nodes as SimGrid links: one builder per topology kind, behind a table that code (a test, a
// future kind) adds to at run time (docs/engine.md "Fabric kinds"). A kind's builder creates its links in the
// platform's zone and answers which of them a flow between NICs of two nodes crosses; the platform (platform.cpp)
// puts each node's own links (PCIe, switch uplinks, the NIC) on either side. The first kind, "single_switch", is one
// non-blocking switch with a per-node uplink when cluster.network.oversubscription > 1.
#pragma once

#include "spec/node_spec.hpp"

#include <simgrid/s4u/Link.hpp>

#include <functional>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

namespace zerosim::platform {

/// Each link side's latency. SimGrid's links carry none: the engine pays a route's sum as a delay before the flow
/// (Platform::route_latency; docs/engine.md "Network model").
using LinkLatencies = std::unordered_map<const simgrid::s4u::Link*, double>;

/// A split-duplex link of `bw` per direction. Its latency `lat` is not given to SimGrid (the link's SimGrid latency is
/// 0): it is recorded in `latency` and paid by the engine as a delay before the flow, because SimGrid's CM02 shares a
/// link in inverse proportion to each flow's route latency (docs/engine.md "Network model"). Throws core::InputError
/// for a bandwidth that is not positive.
simgrid::s4u::SplitDuplexLink* duplex(simgrid::s4u::NetZone* zone, const std::string& name, double bw, double lat,
                                      LinkLatencies& latency);

/// NIC `nic` of node `node`.
struct NicAt {
  int node = 0;
  int nic = 0;
};

/// Where a fabric kind builds: the platform's zone, the cluster, the nodes the platform builds (every node; node 0
/// alone on the symmetric platform; the simulated nodes of the node-set replay, docs/engine.md "Pipelines: the node-set
/// replay"), ascending, and the record of link latencies.
struct FabricSite {
  simgrid::s4u::NetZone* zone = nullptr;
  const spec::ClusterSpec& cluster;
  std::vector<int> nodes_built;
  LinkLatencies& latency;

  /// duplex() in the platform's zone.
  simgrid::s4u::SplitDuplexLink* link(const std::string& name, double bw, double lat) const
  {
    return duplex(zone, name, bw, lat, latency);
  }
};

/// A built fabric: the links a flow from NIC `from` to NIC `to` of another node crosses between the two NICs (the
/// NICs' own links are the nodes'), in order, each in its direction; both nodes are built. `to` empty: the stand-in for
/// the nodes the platform does not build, behind `from` (Platform::remote): the links every flow leaving `from`
/// crosses.
using FabricPath = std::function<std::vector<simgrid::s4u::LinkInRoute>(NicAt from, std::optional<NicAt> to)>;

/// A fabric kind: creates its links on the site and returns its paths. Called once per platform, after the nodes.
using FabricBuilder = std::function<FabricPath(const FabricSite& site)>;

/// Adds kind `name` to the table. Throws core::InternalError when the name is taken.
void register_fabric_kind(const std::string& name, FabricBuilder build);

/// The builder of kind `name` (spec::NetworkSpec::fabric). Throws core::InternalError naming the kinds for an unknown
/// name.
const FabricBuilder& fabric_builder(const std::string& name);

} // namespace zerosim::platform
