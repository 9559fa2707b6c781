#include "platform/platform.hpp"

#include "compute/compute_model.hpp"
#include "core/error.hpp"

#include <simgrid/s4u.hpp>

#include <algorithm>
#include <cstdint>
#include <string>

namespace zerosim::platform {

namespace sg4 = simgrid::s4u;
using Dir = sg4::LinkInRoute::Direction;

void configure_network_model()
{
  // The model itself (CM02: plain max-min, bandwidth and latency factors 1) is chosen on the engine's
  // command line (engine.cpp), which SimGrid reads only in the first engine of a process; the numbers
  // below are global and persist, so they are set again for every engine (simgrid-notes.md §4).
  sg4::Engine::set_config("network/crosstraffic", false); // no 5 % reverse-direction load per flow
  sg4::Engine::set_config("network/TCP-gamma", 0.0);      // no TCP window cap: RDMA and NVLink have none
  sg4::Engine::set_config("network/weight-S", 0.0);       // flows share by max-min, not by RTT
}

std::string network_model_description()
{
  return "SimGrid CM02 max-min flow model; crosstraffic off; TCP-gamma 0 (no window cap); weight-S 0; "
         "bandwidth and latency factors 1";
}

namespace {

std::string nid(int n)
{
  return "node" + std::to_string(n);
}

sg4::SplitDuplexLink* duplex(sg4::NetZone* z, const std::string& name, double bw, double lat)
{
  if (!(bw > 0))
    throw core::InputError("platform: link " + name + " needs a positive bandwidth, found " + std::to_string(bw));
  auto* l = z->create_split_duplex_link(name, bw);
  l->set_latency(lat);
  l->seal();
  return l;
}

/// The per-node part of the platform: links and hosts of one server.
struct NodeParts {
  std::vector<sg4::Host*> gpus;
  sg4::Host* cpu = nullptr;
  sg4::Host* dram = nullptr;
  sg4::Link* dram_link = nullptr;
  std::vector<sg4::SplitDuplexLink*> nvlink; // per GPU; empty when the node has no NVLink
  std::vector<sg4::SplitDuplexLink*> pcie;   // per GPU
  std::vector<sg4::SplitDuplexLink*> uplink; // per PCIe switch
  std::vector<int> gpu_switch;               // per GPU
  std::vector<sg4::SplitDuplexLink*> nic;    // per NIC
  std::vector<int> nic_switch;               // per NIC
  sg4::SplitDuplexLink* fabric = nullptr;    // per-node fabric uplink when oversubscribed
  std::vector<sg4::Host*> nvme;
  std::vector<sg4::Disk*> disks;
  std::vector<sg4::SplitDuplexLink*> nvme_link;
  std::vector<int> nvme_switch;
};

} // namespace

Platform::Platform(const spec::ClusterSpec& c, const PlatformOptions& o)
{
  const spec::NodeSpec& nd = c.node;
  const int G = c.gpus_per_node;
  const int switches = std::max(1, (nd.gpus + nd.pcie.gpus_per_switch - 1) / std::max(1, nd.pcie.gpus_per_switch));
  const int nics = c.network.nics_per_node;
  const int nodes_built = o.symmetric ? 1 : c.nodes;

  sg4::NetZone* zone = sg4::create_full_zone("cluster");
  std::vector<NodeParts> parts(static_cast<std::size_t>(nodes_built));

  for (int n = 0; n < nodes_built; ++n) {
    NodeParts& p = parts[static_cast<std::size_t>(n)];
    const std::string pre = nid(n) + ".";
    // Host CPU: its cores at the rate CPU work is counted in (compute::cpu_core_flops), and DRAM as a SHARED
    // link (one capacity for reads and writes together) that CPU work and every DMA into host memory cross.
    p.cpu = zone->create_host(pre + "cpu", compute::cpu_core_flops(nd.cpu))
                ->set_core_count(std::max(1, nd.cpu.cores))
                ->seal();
    p.dram = zone->create_host(pre + "dram", WORK_UNITS_PER_SECOND)->seal();
    p.dram_link = zone->create_link(pre + "dram", nd.cpu.memory_bandwidth_Bps)
                      ->set_sharing_policy(sg4::Link::SharingPolicy::SHARED)
                      ->seal();
    zone->add_route(p.cpu->get_netpoint(), p.dram->get_netpoint(), nullptr, nullptr, {sg4::LinkInRoute(p.dram_link)},
                    true);
    for (int s = 0; s < switches; ++s)
      p.uplink.push_back(duplex(zone, pre + "pcie_switch" + std::to_string(s), nd.pcie.switch_uplink_Bps, 0));
    for (int g = 0; g < G; ++g) {
      p.gpus.push_back(zone->create_host(pre + "gpu" + std::to_string(g), WORK_UNITS_PER_SECOND)->seal());
      p.pcie.push_back(duplex(zone, pre + "pcie_gpu" + std::to_string(g), nd.pcie.bandwidth_Bps, nd.pcie.latency_s));
      p.gpu_switch.push_back(std::min(switches - 1, g / std::max(1, nd.pcie.gpus_per_switch)));
      if (nd.nvlink.present)
        p.nvlink.push_back(
            duplex(zone, pre + "nvlink_gpu" + std::to_string(g), nd.nvlink.bandwidth_Bps, nd.nvlink.latency_s));
    }
    // NICs hang off the PCIe switches in order (scenario-format.md); each side of a NIC-to-NIC hop carries half
    // of the one-way latency of cluster.network.latency.
    for (int k = 0; k < nics; ++k) {
      p.nic.push_back(
          duplex(zone, pre + "nic" + std::to_string(k), c.network.nic_bandwidth_Bps, c.network.latency_s / 2));
      p.nic_switch.push_back(std::min(switches - 1, k * switches / std::max(1, nics)));
    }
    if (c.network.oversubscription > 1 && nics > 0)
      p.fabric =
          duplex(zone, pre + "fabric_uplink", nics * c.network.nic_bandwidth_Bps / c.network.oversubscription, 0);
    for (int d = 0; d < nd.nvme.devices; ++d) {
      const std::string name = pre + "nvme" + std::to_string(d);
      sg4::Host* h = zone->create_host(name, WORK_UNITS_PER_SECOND)->seal();
      p.nvme.push_back(h);
      p.disks.push_back(h->create_disk(name + ".disk", nd.nvme.read_Bps, nd.nvme.write_Bps)->seal());
      p.nvme_link.push_back(
          duplex(zone, name + ".pcie", std::max(nd.nvme.read_Bps, nd.nvme.write_Bps), nd.pcie.latency_s));
      p.nvme_switch.push_back(std::min(switches - 1, d * switches / nd.nvme.devices));
    }

    // Routes inside the node.
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
    for (std::size_t d = 0; d < p.nvme.size(); ++d)
      zone->add_route(p.nvme[d]->get_netpoint(), p.cpu->get_netpoint(), nullptr, nullptr,
                      {{p.nvme_link[d], Dir::UP},
                       {p.uplink[static_cast<std::size_t>(p.nvme_switch[d])], Dir::UP},
                       sg4::LinkInRoute(p.dram_link)},
                      true);
    nvmes_.push_back(p.nvme);
    disks_.push_back(p.disks);
    gpus_.push_back(p.gpus);
    cpus_.push_back(p.cpu);
    drams_.push_back(p.dram);
  }

  // GPU -> its NIC (GPUDirect RDMA): the GPU's link, and the switch uplinks when the NIC hangs off another switch.
  auto to_nic = [&](const NodeParts& p, int g, int k) {
    std::vector<sg4::LinkInRoute> r{{p.pcie[static_cast<std::size_t>(g)], Dir::UP}};
    const int gs = p.gpu_switch[static_cast<std::size_t>(g)], ks = p.nic_switch[static_cast<std::size_t>(k)];
    if (gs != ks) {
      r.push_back({p.uplink[static_cast<std::size_t>(gs)], Dir::UP});
      r.push_back({p.uplink[static_cast<std::size_t>(ks)], Dir::DOWN});
    }
    r.push_back({p.nic[static_cast<std::size_t>(k)], Dir::UP});
    if (p.fabric != nullptr)
      r.push_back({p.fabric, Dir::UP});
    return r;
  };
  // The reverse: fabric, NIC, switch uplinks, the GPU's link, each in the other direction.
  auto from_nic = [&](const NodeParts& p, int g, int k) {
    std::vector<sg4::LinkInRoute> up = to_nic(p, g, k);
    std::vector<sg4::LinkInRoute> r;
    for (auto it = up.rbegin(); it != up.rend(); ++it)
      r.emplace_back(it->get_link(), Dir::DOWN);
    return r;
  };

  if (nics > 0 && c.nodes > 1) {
    if (o.symmetric) {
      const NodeParts& p = parts[0];
      for (int k = 0; k < nics; ++k) {
        remotes_.push_back(zone->create_host("remote_nic" + std::to_string(k), WORK_UNITS_PER_SECOND)->seal());
        for (int g = 0; g < G; ++g) {
          zone->add_route(p.gpus[static_cast<std::size_t>(g)]->get_netpoint(), remotes_.back()->get_netpoint(), nullptr,
                          nullptr, to_nic(p, g, k), false);
          zone->add_route(remotes_.back()->get_netpoint(), p.gpus[static_cast<std::size_t>(g)]->get_netpoint(), nullptr,
                          nullptr, from_nic(p, g, k), false);
        }
      }
    } else {
      for (const auto& [a, b] : o.inter_node_pairs) {
        const NodeParts& pa = parts[static_cast<std::size_t>(a.node)];
        const NodeParts& pb = parts[static_cast<std::size_t>(b.node)];
        std::vector<sg4::LinkInRoute> r = to_nic(pa, a.local, collectives::nic_of(a.local, G, nics));
        for (const auto& l : from_nic(pb, b.local, collectives::nic_of(b.local, G, nics)))
          r.push_back(l);
        zone->add_route(pa.gpus[static_cast<std::size_t>(a.local)]->get_netpoint(),
                        pb.gpus[static_cast<std::size_t>(b.local)]->get_netpoint(), nullptr, nullptr, r, false);
      }
    }
  }

  timer_ = zone->create_host("timer", WORK_UNITS_PER_SECOND)->set_core_count(1 << 20)->seal();
  zone->seal();
}

sg4::Host* Platform::gpu(int node, int local) const
{
  return gpus_.at(static_cast<std::size_t>(node)).at(static_cast<std::size_t>(local));
}

sg4::Host* Platform::cpu(int node) const
{
  return cpus_.at(static_cast<std::size_t>(node));
}

sg4::Host* Platform::dram(int node) const
{
  return drams_.at(static_cast<std::size_t>(node));
}

sg4::Host* Platform::nvme(int node, int dev) const
{
  return nvmes_.at(static_cast<std::size_t>(node)).at(static_cast<std::size_t>(dev));
}

sg4::Disk* Platform::disk(int node, int dev) const
{
  return disks_.at(static_cast<std::size_t>(node)).at(static_cast<std::size_t>(dev));
}

sg4::Host* Platform::remote(int nic) const
{
  return remotes_.at(static_cast<std::size_t>(nic));
}

sg4::Host* Platform::timer() const
{
  return timer_;
}

} // namespace zerosim::platform
