// A fabric kind defined in this file alone, registered in platform/fabric.hpp's table at run time (docs/engine.md
// "Fabric kinds"): two leaf switches under one spine. Nodes 0 .. nodes/2 - 1 hang off leaf 0, the others off leaf 1;
// each leaf reaches the spine through one split-duplex link. A flow between nodes of different leaves crosses its
// leaf's link UP and the other leaf's DOWN; between nodes of one leaf, no fabric link.
#include "platform/fabric.hpp"
#include "platform/platform.hpp"

#include "platform_test_util.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <cstddef>
#include <optional>
#include <string>
#include <vector>

using namespace zerosim;
using spec::Gpu;
namespace sg4 = simgrid::s4u;

namespace {

constexpr double LEAF_SPINE_BPS = 10e9;       // per direction: below the 25 GB/s of a GPU's PCIe link and its NIC
constexpr double LEAF_SPINE_LATENCY_S = 1e-6; // per side

platform::FabricPath two_leaves(const platform::FabricSite& site)
{
  std::vector<sg4::SplitDuplexLink*> spine; // per leaf: its link to the spine
  for (int leaf = 0; leaf < 2; ++leaf)
    spine.push_back(site.link("leaf" + std::to_string(leaf) + ".spine", LEAF_SPINE_BPS, LEAF_SPINE_LATENCY_S));
  const int per_leaf = std::max(1, site.cluster.nodes / 2);
  return [spine, per_leaf](platform::NicAt from, std::optional<platform::NicAt> to) {
    const auto leaf_of = [per_leaf](int node) { return static_cast<std::size_t>(std::min(1, node / per_leaf)); };
    std::vector<sg4::LinkInRoute> r;
    // The rest of the cluster (to empty) is under both leaves: no fabric link carries every flow out of a node.
    if (to && leaf_of(from.node) != leaf_of(to->node)) {
      r.emplace_back(spine[leaf_of(from.node)], sg4::LinkInRoute::Direction::UP);
      r.emplace_back(spine[leaf_of(to->node)], sg4::LinkInRoute::Direction::DOWN);
    }
    return r;
  };
}

} // namespace

TEST_CASE("a fabric kind registered by a test: two GPUs under different leaves meet through the spine")
{
  platform::register_fabric_kind("two_leaves", two_leaves);
  const auto engine = platform_test::quiet_engine();
  spec::ClusterSpec c = platform_test::dgx_a100_cluster(4);
  c.network.fabric = "two_leaves";
  platform::PlatformOptions o;
  o.cpu_core_flops = platform_test::CPU_CORE_FLOPS;
  o.inter_node_pairs = {{Gpu{0, 2}, Gpu{3, 2}}, {Gpu{0, 2}, Gpu{1, 2}}};
  const platform::Platform p(c, o);

  const platform::Route across = p.route(Gpu{0, 2}, Gpu{3, 2}); // node 0 under leaf 0, node 3 under leaf 1
  CHECK(across.links == std::vector<std::string>{"node0.pcie_gpu2_UP", "node0.nic2_UP", "leaf0.spine_UP",
                                                 "leaf1.spine_DOWN", "node3.nic2_DOWN", "node3.pcie_gpu2_DOWN"});
  // latency = pcie + network / 2 + 2 x leaf-spine + network / 2 + pcie = 1 + 2.5 + 2 + 2.5 + 1 us;
  // bandwidth = min(pcie 25 GB/s, NIC 25 GB/s, leaf-spine 10 GB/s) = 10 GB/s.
  CHECK(across.latency_s ==
        doctest::Approx(2 * c.node.pcie.latency_s + c.network.latency_s + 2 * LEAF_SPINE_LATENCY_S));
  CHECK(across.latency_s == doctest::Approx(9e-6));
  CHECK(across.bandwidth_Bps == doctest::Approx(LEAF_SPINE_BPS));

  const platform::Route under_one = p.route(Gpu{0, 2}, Gpu{1, 2}); // both under leaf 0
  CHECK(under_one.links ==
        std::vector<std::string>{"node0.pcie_gpu2_UP", "node0.nic2_UP", "node1.nic2_DOWN", "node1.pcie_gpu2_DOWN"});
  CHECK(under_one.bandwidth_Bps == doctest::Approx(25e9));
}
