// What the platform tests share: a quiet SimGrid engine (a platform is built inside one) and a cluster of DGX A100
// nodes from topologies/dgx-a100-80gb.yaml.
#pragma once

#include "config/scenario_loader.hpp"
#include "spec/node_spec.hpp"

#include <simgrid/s4u.hpp>

#include <array>
#include <memory>
#include <string>

namespace zerosim::platform_test {

/// The CPU core rate every test platform gets (PlatformOptions::cpu_core_flops must be set; no route depends on it).
inline constexpr double CPU_CORE_FLOPS = 1e9;

/// A SimGrid engine with its log at critical. One at a time per process: create it before the platform, keep it
/// while the platform lives.
inline std::unique_ptr<simgrid::s4u::Engine> quiet_engine()
{
  static std::string name = "platform_tests";
  static std::string log = "--log=root.thres:critical";
  std::array<char*, 2> argv{name.data(), log.data()};
  int argc = static_cast<int>(argv.size());
  return std::make_unique<simgrid::s4u::Engine>(&argc, argv.data());
}

/// `nodes` DGX A100 nodes (8 GPUs on NVLink 300 GB/s, PCIe 25 GB/s, 8 NICs of 200 Gb/s, two GPUs and two NICs per
/// PCIe switch; the schema's latencies: NVLink 0.6 us, PCIe 1 us), a network latency of 5 us one way and
/// `oversubscription`.
inline spec::ClusterSpec dgx_a100_cluster(int nodes, double oversubscription = 1)
{
  spec::ClusterSpec c;
  c.node = config::load_node(std::string(ZEROSIM_SOURCE_DIR) + "/topologies/dgx-a100-80gb.yaml");
  c.nodes = nodes;
  c.gpus_per_node = c.node.gpus;
  c.network.nic_bandwidth_Bps = c.node.nics.bandwidth_Bps;
  c.network.nics_per_node = c.node.nics.count;
  c.network.latency_s = 5e-6;
  c.network.oversubscription = oversubscription;
  return c;
}

} // namespace zerosim::platform_test
