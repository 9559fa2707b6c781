#include "platform/platform.hpp"

#include "core/error.hpp"
#include "platform/fabric.hpp"

#include <simgrid/s4u.hpp>

#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>

namespace zerosim::platform {

namespace sg4 = simgrid::s4u;
using Dir = sg4::LinkInRoute::Direction;

void configure_network_model()
{
  // The model itself (CM02: plain max-min, bandwidth and latency factors 1) is chosen on the engine's
  // command line (engine.cpp), which SimGrid reads only in the first engine of a process; the numbers
  // below are global and persist, so they are set again for every engine (docs/simgrid-notes.md §4).
  sg4::Engine::set_config("network/crosstraffic", false); // no 5 % reverse-direction load per flow
  sg4::Engine::set_config("network/TCP-gamma", 0.0);      // no TCP window cap: RDMA and NVLink have none
  // weight-S only adds to a flow's sharing penalty, which CM02 sets to the route's latency: 0 here, and the
  // platform's links carry no SimGrid latency (the engine pays it as a delay), so every flow keeps penalty 1.
  sg4::Engine::set_config("network/weight-S", 0.0);
}

std::string network_model_description()
{
  return "SimGrid CM02 max-min flow model; crosstraffic off; TCP-gamma 0 (no window cap); weight-S 0; "
         "bandwidth and latency factors 1; full (not lazy) updates; route latencies paid as delays before each "
         "flow (every flow has sharing penalty 1: plain max-min)";
}

namespace {

std::string nid(int n)
{
  return "node" + std::to_string(n);
}

/// The per-node part of the platform: links and hosts of one server.
struct NodeParts {
  std::vector<sg4::Host*> gpus;
  std::vector<sg4::Host*> gpu_memories;
  sg4::Host* cpu = nullptr;
  sg4::Host* dram = nullptr;
  sg4::Link* dram_link = nullptr;
  std::vector<sg4::SplitDuplexLink*> nvlink; // per GPU; empty when the node has no NVLink
  std::vector<sg4::SplitDuplexLink*> pcie;   // per GPU
  std::vector<sg4::SplitDuplexLink*> uplink; // per PCIe switch
  std::vector<int> gpu_switch;               // per GPU
  std::vector<sg4::SplitDuplexLink*> nic;    // per NIC
  std::vector<int> nic_switch;               // per NIC
  sg4::Host* nvme = nullptr;                 // the RAID-0 volume of every drive (none without drives)
  sg4::SplitDuplexLink* nvme_link = nullptr; // the drives' PCIe links together: devices x max(read, write)
  sg4::Link* nvme_read = nullptr;            // the drives' media together: devices x read
  sg4::Link* nvme_write = nullptr;           // devices x write
};

/// The hosts and links of node `n` (its CPU and DRAM, PCIe switches, GPUs, NVLink, NICs, NVMe volume) and the routes
/// between its CPU and DRAM.
NodeParts build_node(sg4::NetZone* zone, const spec::ClusterSpec& c, double cpu_core_flops, int n, int switches,
                     LinkLatencies& link_latency_)
{
  const spec::NodeSpec& nd = c.node;
  const int G = c.gpus_per_node;
  const int nics = c.network.nics_per_node;
  NodeParts p;
  const std::string pre = nid(n) + ".";
  // Host CPU: its cores at the rate CPU work is counted in (PlatformOptions::cpu_core_flops), and DRAM as a SHARED
  // link (one capacity for reads and writes together) that CPU work and every DMA into host memory cross.
  p.cpu = zone->create_host(pre + "cpu", cpu_core_flops)->set_core_count(std::max(1, nd.cpu.cores))->seal();
  p.dram = zone->create_host(pre + "dram", WORK_UNITS_PER_SECOND)->seal();
  p.dram_link = zone->create_link(pre + "dram", nd.cpu.memory_bandwidth_Bps)
                    ->set_sharing_policy(sg4::Link::SharingPolicy::SHARED)
                    ->seal();
  zone->add_route(p.cpu->get_netpoint(), p.dram->get_netpoint(), nullptr, nullptr, {sg4::LinkInRoute(p.dram_link)},
                  true);
  for (int s = 0; s < switches; ++s)
    p.uplink.push_back(
        duplex(zone, pre + "pcie_switch" + std::to_string(s), nd.pcie.switch_uplink_Bps, 0, link_latency_));
  for (int g = 0; g < G; ++g) {
    p.gpus.push_back(zone->create_host(pre + "gpu" + std::to_string(g), WORK_UNITS_PER_SECOND)->seal());
    p.gpu_memories.push_back(
        zone->create_host(pre + "gpu" + std::to_string(g) + "_memory", WORK_UNITS_PER_SECOND)->seal());
    p.pcie.push_back(
        duplex(zone, pre + "pcie_gpu" + std::to_string(g), nd.pcie.bandwidth_Bps, nd.pcie.latency_s, link_latency_));
    p.gpu_switch.push_back(std::min(switches - 1, g / std::max(1, nd.pcie.gpus_per_switch)));
    if (nd.nvlink.present)
      p.nvlink.push_back(duplex(zone, pre + "nvlink_gpu" + std::to_string(g), nd.nvlink.bandwidth_Bps,
                                nd.nvlink.latency_s, link_latency_));
  }
  // NICs hang off the PCIe switches in order (docs/scenario-format.md); each side of a NIC-to-NIC hop carries half
  // of the one-way latency of cluster.network.latency.
  for (int k = 0; k < nics; ++k) {
    p.nic.push_back(duplex(zone, pre + "nic" + std::to_string(k), c.network.nic_bandwidth_Bps, c.network.latency_s / 2,
                           link_latency_));
    p.nic_switch.push_back(std::min(switches - 1, k * switches / std::max(1, nics)));
  }
  // NVMe: DeepSpeed's nvme_path is a RAID-0 volume of every drive (DGX /raid), so every transfer is striped
  // evenly over all drives: the drives' media are two links of their summed bandwidth, one read and one
  // write (a drive reads and writes at different rates), and their PCIe links one link of their summed
  // bandwidth into host memory. Links, not SimGrid disks: SimGrid 3.32 turns quadratic in the number of
  // activities when disk I/O and network flows are mixed (docs/engine.md "NVMe"), and a flow over these
  // links is the same max-min problem.
  if (nd.nvme.devices > 0) {
    const std::string name = pre + "nvme_raid0";
    p.nvme = zone->create_host(name, WORK_UNITS_PER_SECOND)->seal();
    p.nvme_read = zone->create_link(name + ".media_read", nd.nvme.devices * nd.nvme.read_Bps)
                      ->set_sharing_policy(sg4::Link::SharingPolicy::SHARED)
                      ->seal();
    p.nvme_write = zone->create_link(name + ".media_write", nd.nvme.devices * nd.nvme.write_Bps)
                       ->set_sharing_policy(sg4::Link::SharingPolicy::SHARED)
                       ->seal();
    p.nvme_link = duplex(zone, name + ".pcie", nd.nvme.devices * std::max(nd.nvme.read_Bps, nd.nvme.write_Bps),
                         nd.pcie.latency_s, link_latency_);
  }
  return p;
}

/// The routes inside a node: each GPU to host memory, GPU to GPU (NVLink, or PCIe through the switches), and the
/// NVMe volume to and from DRAM.
void add_node_routes(sg4::NetZone* zone, const spec::NodeSpec& nd, int G, const NodeParts& p)
{
  for (int g = 0; g < G; ++g) {
    const auto gs = static_cast<std::size_t>(g);
    auto* sw = p.uplink[static_cast<std::size_t>(p.gpu_switch[gs])];
    // GPU <-> host memory: the GPU's link, its switch's uplink, DRAM.
    zone->add_route(p.gpus[gs]->get_netpoint(), p.cpu->get_netpoint(), nullptr, nullptr,
                    {{p.pcie[gs], Dir::UP}, {sw, Dir::UP}, sg4::LinkInRoute(p.dram_link)}, true);
    for (int h = g + 1; h < G; ++h) {
      const auto hs = static_cast<std::size_t>(h);
      std::vector<sg4::LinkInRoute> r;
      if (nd.nvlink.present) {
        // NVSwitch (or direct NVLink) is non-blocking: only the two GPUs' NVLink bandwidth bounds a flow.
        r = {{p.nvlink[gs], Dir::UP}, {p.nvlink[hs], Dir::DOWN}};
      } else {
        r.push_back({p.pcie[gs], Dir::UP});
        if (p.gpu_switch[gs] != p.gpu_switch[hs]) {
          r.push_back({sw, Dir::UP});
          r.push_back({p.uplink[static_cast<std::size_t>(p.gpu_switch[hs])], Dir::DOWN});
        }
        r.push_back({p.pcie[hs], Dir::DOWN});
      }
      zone->add_route(p.gpus[gs]->get_netpoint(), p.gpus[hs]->get_netpoint(), nullptr, nullptr, r, true);
    }
  }
  if (p.nvme != nullptr) {
    // Reads: media -> the drives' PCIe -> DRAM; writes the other way, onto the write media link.
    zone->add_route(p.nvme->get_netpoint(), p.cpu->get_netpoint(), nullptr, nullptr,
                    {sg4::LinkInRoute(p.nvme_read), {p.nvme_link, Dir::UP}, sg4::LinkInRoute(p.dram_link)}, false);
    zone->add_route(p.cpu->get_netpoint(), p.nvme->get_netpoint(), nullptr, nullptr,
                    {sg4::LinkInRoute(p.dram_link), {p.nvme_link, Dir::DOWN}, sg4::LinkInRoute(p.nvme_write)}, false);
  }
}

} // namespace

Platform::Platform(const spec::ClusterSpec& c, const PlatformOptions& o)
    : G_(c.gpus_per_node), nics_(c.network.nics_per_node)
{
  const spec::NodeSpec& nd = c.node;
  const int G = c.gpus_per_node;
  const int switches = std::max(1, (nd.gpus + nd.pcie.gpus_per_switch - 1) / std::max(1, nd.pcie.gpus_per_switch));
  const int nics = c.network.nics_per_node;
  if (!(o.cpu_core_flops > 0))
    throw core::InternalError("platform: the CPU core rate (PlatformOptions::cpu_core_flops) is not set");
  if (!o.nodes.empty()) {
    nodes_ = o.nodes;
    for (std::size_t i = 0; i < nodes_.size(); ++i)
      if (nodes_[i] < 0 || nodes_[i] >= c.nodes || (i > 0 && nodes_[i] <= nodes_[i - 1]))
        throw core::InternalError("platform: the nodes to build must be ascending nodes of 0.." +
                                  std::to_string(c.nodes - 1) + ", found " + std::to_string(nodes_[i]));
  } else {
    const int nodes_built = o.symmetric ? 1 : c.nodes;
    for (int n = 0; n < nodes_built; ++n)
      nodes_.push_back(n);
  }
  const bool stand_ins = static_cast<int>(nodes_.size()) < c.nodes;
  for (const auto& [a, b] : o.inter_node_pairs) // before SimGrid holds anything of this platform
    if (built(a.node) < 0 || built(b.node) < 0)
      throw core::InternalError("platform: a route from node " + std::to_string(a.node) + " to node " +
                                std::to_string(b.node) + ", which the platform does not both build");

  sg4::NetZone* zone = sg4::create_full_zone("cluster");
  std::vector<NodeParts> parts(nodes_.size());

  for (std::size_t i = 0; i < nodes_.size(); ++i) {
    NodeParts& p = parts[i];
    p = build_node(zone, c, o.cpu_core_flops, nodes_[i], switches, link_latency_);
    add_node_routes(zone, nd, G, p);
    nvmes_.push_back(p.nvme);
    gpus_.push_back(p.gpus);
    gpu_memories_.push_back(p.gpu_memories);
    cpus_.push_back(p.cpu);
    drams_.push_back(p.dram);
  }

  // The fabric between the nodes: the links of its kind (platform/fabric.hpp), then the routes through them.
  const FabricPath fabric = fabric_builder(c.network.fabric)(FabricSite{zone, c, nodes_, link_latency_});

  // GPU -> its NIC (GPUDirect RDMA): the GPU's link, and the switch uplinks when the NIC hangs off another switch.
  auto to_nic = [&](const NodeParts& p, int g, int k) {
    std::vector<sg4::LinkInRoute> r{{p.pcie[static_cast<std::size_t>(g)], Dir::UP}};
    const int gs = p.gpu_switch[static_cast<std::size_t>(g)], ks = p.nic_switch[static_cast<std::size_t>(k)];
    if (gs != ks) {
      r.push_back({p.uplink[static_cast<std::size_t>(gs)], Dir::UP});
      r.push_back({p.uplink[static_cast<std::size_t>(ks)], Dir::DOWN});
    }
    r.push_back({p.nic[static_cast<std::size_t>(k)], Dir::UP});
    return r;
  };
  // The reverse of a route: its links in the other order, each in the other direction (a NIC on another switch sends
  // UP its own switch's uplink and DOWN the GPU's).
  auto reversed = [](const std::vector<sg4::LinkInRoute>& up) {
    std::vector<sg4::LinkInRoute> r;
    for (auto it = up.rbegin(); it != up.rend(); ++it)
      r.emplace_back(it->get_link(), it->get_direction() == Dir::UP ? Dir::DOWN : Dir::UP);
    return r;
  };
  auto append = [](std::vector<sg4::LinkInRoute>& r, const std::vector<sg4::LinkInRoute>& more) {
    r.insert(r.end(), more.begin(), more.end());
  };

  if (nics > 0 && c.nodes > 1) {
    if (stand_ins) {
      // The nodes not built behind each NIC of each built node (flow_end): out through the NIC and the built node's
      // side of the fabric, and back the same way. Node 0's stand-ins keep the symmetric platform's names.
      for (std::size_t i = 0; i < nodes_.size(); ++i) {
        const NodeParts& p = parts[i];
        const int n = nodes_[i];
        remotes_.emplace_back();
        for (int k = 0; k < nics; ++k) {
          const std::string name = (n == 0 ? std::string() : nid(n) + ".") + "remote_nic" + std::to_string(k);
          sg4::Host* stand_in = zone->create_host(name, WORK_UNITS_PER_SECOND)->seal();
          remotes_.back().push_back(stand_in);
          for (int g = 0; g < G; ++g) {
            std::vector<sg4::LinkInRoute> out = to_nic(p, g, k);
            append(out, fabric(NicAt{n, k}, std::nullopt));
            zone->add_route(p.gpus[static_cast<std::size_t>(g)]->get_netpoint(), stand_in->get_netpoint(), nullptr,
                            nullptr, out, false);
            zone->add_route(stand_in->get_netpoint(), p.gpus[static_cast<std::size_t>(g)]->get_netpoint(), nullptr,
                            nullptr, reversed(out), false);
          }
        }
      }
    }
    // Routes through the fabric between GPUs of two built nodes.
    for (const auto& [a, b] : o.inter_node_pairs) {
      const NodeParts& pa = parts[position(a.node, "a route's source")];
      const NodeParts& pb = parts[position(b.node, "a route's destination")];
      const int ka = spec::nic_of(a.local, G, nics), kb = spec::nic_of(b.local, G, nics);
      std::vector<sg4::LinkInRoute> r = to_nic(pa, a.local, ka);
      append(r, fabric(NicAt{a.node, ka}, NicAt{b.node, kb}));
      append(r, reversed(to_nic(pb, b.local, kb)));
      zone->add_route(pa.gpus[static_cast<std::size_t>(a.local)]->get_netpoint(),
                      pb.gpus[static_cast<std::size_t>(b.local)]->get_netpoint(), nullptr, nullptr, r, false);
    }
  }

  timer_ = zone->create_host("timer", WORK_UNITS_PER_SECOND)->set_core_count(1 << 20)->seal();
  zone->seal();
}

int Platform::built(int node) const
{
  const auto it = std::lower_bound(nodes_.begin(), nodes_.end(), node);
  return it != nodes_.end() && *it == node ? static_cast<int>(it - nodes_.begin()) : -1;
}

std::size_t Platform::position(int node, const char* what) const
{
  const int i = built(node);
  if (i < 0)
    throw core::InternalError(std::string("platform: ") + what + ": node " + std::to_string(node) + " was not built");
  return static_cast<std::size_t>(i);
}

sg4::Host* Platform::gpu(int node, int local) const
{
  return gpus_[position(node, "a GPU")].at(static_cast<std::size_t>(local));
}

sg4::Host* Platform::gpu_memory(int node, int local) const
{
  return gpu_memories_[position(node, "a GPU's memory side")].at(static_cast<std::size_t>(local));
}

sg4::Host* Platform::cpu(int node) const
{
  return cpus_[position(node, "a CPU")];
}

sg4::Host* Platform::dram(int node) const
{
  return drams_[position(node, "a DRAM")];
}

sg4::Host* Platform::nvme(int node) const
{
  return nvmes_[position(node, "an NVMe volume")];
}

sg4::Host* Platform::remote(int nic) const
{
  return remote(0, nic);
}

sg4::Host* Platform::remote(int node, int nic) const
{
  const std::size_t i = position(node, "a stand-in's node");
  if (i >= remotes_.size())
    throw core::InternalError("platform: every node is built: no stand-in behind node " + std::to_string(node));
  return remotes_[i].at(static_cast<std::size_t>(nic));
}

sg4::Host* Platform::timer() const
{
  return timer_;
}

sg4::Host* Platform::flow_end(spec::Gpu end, spec::Gpu peer) const
{
  if (built(end.node) >= 0)
    return gpu(end.node, end.local);
  if (built(peer.node) < 0)
    throw core::InternalError("platform: a flow between GPUs of nodes " + std::to_string(end.node) + " and " +
                              std::to_string(peer.node) + ", neither of which the platform built");
  return remote(peer.node, spec::nic_of(peer.local, G_, nics_));
}

Route Platform::route(spec::Gpu a, spec::Gpu b) const
{
  const sg4::Host* src = flow_end(a, b);
  const sg4::Host* dst = flow_end(b, a);
  std::vector<sg4::Link*> links;
  double simgrid_latency = 0;
  src->route_to(dst, links, &simgrid_latency);
  Route r;
  r.latency_s = route_latency(src, dst);
  for (const sg4::Link* l : links) {
    r.links.push_back(l->get_name());
    if (r.bandwidth_Bps == 0 || l->get_bandwidth() < r.bandwidth_Bps)
      r.bandwidth_Bps = l->get_bandwidth();
  }
  return r;
}

double Platform::route_latency(const sg4::Host* src, const sg4::Host* dst) const
{
  const auto key = std::make_pair(src, dst);
  if (auto it = route_latency_.find(key); it != route_latency_.end())
    return it->second;
  std::vector<sg4::Link*> links;
  double simgrid_latency = 0; // 0: every link's SimGrid latency is 0 (duplex)
  src->route_to(dst, links, &simgrid_latency);
  double lat = simgrid_latency;
  for (const sg4::Link* l : links)
    if (auto it = link_latency_.find(l); it != link_latency_.end())
      lat += it->second;
  route_latency_.emplace(key, lat);
  return lat;
}

} // namespace zerosim::platform
