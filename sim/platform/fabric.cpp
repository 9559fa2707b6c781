// The fabric kinds' table and the first kind, one switch with per-node uplinks. docs/engine.md "Fabric kinds".
#include "platform/fabric.hpp"

#include "core/error.hpp"

#include <simgrid/s4u.hpp>

#include <algorithm>
#include <cstddef>
#include <map>
#include <utility>

namespace zerosim::platform {

namespace sg4 = simgrid::s4u;
using Dir = sg4::LinkInRoute::Direction;

sg4::SplitDuplexLink* duplex(sg4::NetZone* zone, const std::string& name, double bw, double lat, LinkLatencies& latency)
{
  if (!(bw > 0))
    throw core::InputError("platform: link " + name + " needs a positive bandwidth, found " + std::to_string(bw));
  auto* l = zone->create_split_duplex_link(name, bw);
  l->set_latency(0);
  l->seal();
  latency[l->get_link_up()] = lat;
  latency[l->get_link_down()] = lat;
  return l;
}

namespace {

/// "single_switch": every NIC on one non-blocking switch. With cluster.network.oversubscription > 1, each node's
/// NICs reach it through one uplink of nics x NIC bandwidth / oversubscription (nodeN.fabric_uplink), which a flow
/// crosses UP leaving its node and DOWN entering the other; with 1, the switch adds no link.
FabricPath single_switch(const FabricSite& site)
{
  const spec::NetworkSpec& net = site.cluster.network;
  const int nics = net.nics_per_node;
  std::vector<sg4::SplitDuplexLink*> uplink; // per built node, in site.nodes_built's order
  if (net.oversubscription > 1 && nics > 0)
    for (int n : site.nodes_built)
      uplink.push_back(site.link("node" + std::to_string(n) + ".fabric_uplink",
                                 nics * net.nic_bandwidth_Bps / net.oversubscription, 0));
  return [uplink, nodes = site.nodes_built](NicAt from, std::optional<NicAt> to) {
    std::vector<sg4::LinkInRoute> r;
    if (uplink.empty())
      return r;
    const auto of = [&](int node) {
      const auto it = std::lower_bound(nodes.begin(), nodes.end(), node);
      if (it == nodes.end() || *it != node)
        throw core::InternalError("platform: single_switch: node " + std::to_string(node) + " was not built");
      return uplink[static_cast<std::size_t>(it - nodes.begin())];
    };
    r.emplace_back(of(from.node), Dir::UP);
    if (to)
      r.emplace_back(of(to->node), Dir::DOWN);
    return r;
  };
}

std::map<std::string, FabricBuilder>& kinds()
{
  static std::map<std::string, FabricBuilder> table{{"single_switch", single_switch}};
  return table;
}

} // namespace

void register_fabric_kind(const std::string& name, FabricBuilder build)
{
  if (!kinds().emplace(name, std::move(build)).second)
    throw core::InternalError("platform: fabric kind " + name + " is registered twice");
}

const FabricBuilder& fabric_builder(const std::string& name)
{
  const auto it = kinds().find(name);
  if (it != kinds().end())
    return it->second;
  std::string known;
  for (const auto& [kind, build] : kinds())
    known += (known.empty() ? "" : ", ") + kind;
  throw core::InternalError("platform: unknown fabric kind '" + name +
                            "' (spec::NetworkSpec::fabric); known: " + known);
}

} // namespace zerosim::platform
