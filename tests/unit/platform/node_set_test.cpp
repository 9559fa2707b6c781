// The node-set platform (docs/engine.md "Pipelines: the node-set replay"): the replay of a pipeline builds the first
// node of each stage, routes flows between two of them through the fabric, and stands the nodes it does not build
// behind each built node's NICs. Every figure is the DGX A100 node file's (platform_test_util.hpp).
#include "platform/platform.hpp"

#include "core/error.hpp"
#include "spec/placement.hpp"

#include "platform_test_util.hpp"

#include <doctest/doctest.h>

#include <string>
#include <vector>

using namespace zerosim;
using platform::Platform;
using platform::PlatformOptions;
using spec::Gpu;

TEST_CASE("node-set platform: nodes 0 and 2 of 4, routed to each other, the others behind their NICs")
{
  // p = 2 on 4 nodes: stage 0 is nodes 0-1, stage 1 nodes 2-3; the replay builds nodes 0 and 2. With an
  // oversubscribed switch (16), every flow out of a node climbs its fabric uplink.
  const auto engine = platform_test::quiet_engine();
  const spec::ClusterSpec c = platform_test::dgx_a100_cluster(4, 16);
  PlatformOptions o;
  o.cpu_core_flops = platform_test::CPU_CORE_FLOPS;
  o.nodes = {0, 2};
  o.inter_node_pairs = {{Gpu{0, 1}, Gpu{2, 1}}, {Gpu{2, 1}, Gpu{0, 1}}};
  const Platform p(c, o);
  CHECK(p.nodes() == std::vector<int>{0, 2});

  // Between the two built nodes, the whole way: PCIe, NIC, both uplinks, NIC, PCIe; pcie + network + pcie latency.
  const platform::Route across = p.route(Gpu{0, 1}, Gpu{2, 1});
  CHECK(across.links == std::vector<std::string>{"node0.pcie_gpu1_UP", "node0.nic1_UP", "node0.fabric_uplink_UP",
                                                 "node2.fabric_uplink_DOWN", "node2.nic1_DOWN",
                                                 "node2.pcie_gpu1_DOWN"});
  CHECK(across.latency_s == doctest::Approx(2 * c.node.pcie.latency_s + c.network.latency_s));

  // A node not built stands behind the NIC the flow crosses on the built side: node 1's GPU 5 behind node 0's NIC 3
  // (GPU 3's), node 3's GPU 6 behind node 2's NIC 1 (spec::nic_of(1) = 1).
  CHECK(p.flow_end(Gpu{1, 5}, Gpu{0, 3}) == p.remote(0, 3));
  CHECK(p.flow_end(Gpu{1, 5}, Gpu{0, 3}) == p.remote(3));
  CHECK(p.flow_end(Gpu{3, 6}, Gpu{2, 1}) == p.remote(2, spec::nic_of(1, 8, 8)));
  CHECK(p.flow_end(Gpu{2, 1}, Gpu{3, 6}) == p.gpu(2, 1));
  const platform::Route out = p.route(Gpu{2, 1}, Gpu{3, 6});
  CHECK(out.links == std::vector<std::string>{"node2.pcie_gpu1_UP", "node2.nic1_UP", "node2.fabric_uplink_UP"});
  CHECK(out.latency_s == doctest::Approx(c.node.pcie.latency_s + c.network.latency_s / 2));
  const platform::Route in = p.route(Gpu{1, 0}, Gpu{2, 7});
  CHECK(in.links == std::vector<std::string>{"node2.fabric_uplink_DOWN", "node2.nic7_DOWN", "node2.pcie_gpu7_DOWN"});

  // Nothing of a node not built exists; a flow between two such nodes has no end.
  CHECK_THROWS_AS(p.gpu(1, 0), core::InternalError);
  CHECK_THROWS_AS(p.cpu(3), core::InternalError);
  CHECK_THROWS_AS(p.flow_end(Gpu{1, 0}, Gpu{3, 0}), core::InternalError);
}

TEST_CASE("node-set platform: a route between nodes it does not build is refused")
{
  const auto engine = platform_test::quiet_engine();
  const spec::ClusterSpec c = platform_test::dgx_a100_cluster(4);
  PlatformOptions o;
  o.cpu_core_flops = platform_test::CPU_CORE_FLOPS;
  o.nodes = {0, 2};
  o.inter_node_pairs = {{Gpu{0, 1}, Gpu{1, 1}}};
  CHECK_THROWS_AS(Platform(c, o), core::InternalError);
}
