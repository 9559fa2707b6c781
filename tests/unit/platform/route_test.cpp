// The route between two GPUs on the first fabric kind, "single_switch" (docs/engine.md "Fabric kinds"), and the far
// end of a flow on the symmetric platform. Every figure is the DGX A100 node file's (platform_test_util.hpp); the
// routes are the ones docs/engine.md "Platform" draws, and the planner's fabric (collectives::fabric_of) gives the
// same latencies and bandwidths.
#include "collectives/nccl.hpp"
#include "platform/platform.hpp"
#include "spec/placement.hpp"

#include "platform_test_util.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <string>
#include <vector>

using namespace zerosim;
using platform::Platform;
using platform::PlatformOptions;
using spec::Gpu;

namespace {

/// Every node of `c` built, with routes between GPU 1 of node 0 and GPU 1 of node 1 (NIC 1, on GPU 1's PCIe switch).
PlatformOptions full_with_one_pair()
{
  PlatformOptions o;
  o.cpu_core_flops = platform_test::CPU_CORE_FLOPS;
  o.inter_node_pairs = {{Gpu{0, 1}, Gpu{1, 1}}};
  return o;
}

} // namespace

TEST_CASE("single_switch: two GPUs of one node meet over NVLink")
{
  const auto engine = platform_test::quiet_engine();
  const spec::ClusterSpec c = platform_test::dgx_a100_cluster(2);
  const Platform p(c, full_with_one_pair());
  const platform::Route r = p.route(Gpu{0, 1}, Gpu{0, 6});
  CHECK(r.links == std::vector<std::string>{"node0.nvlink_gpu1_UP", "node0.nvlink_gpu6_DOWN"});
  // latency = 2 x nvlink.latency = 2 x 0.6 us; bandwidth = nvlink.bandwidth = 300 GB/s (the NVSwitch adds no link).
  CHECK(r.latency_s == doctest::Approx(2 * c.node.nvlink.latency_s));
  CHECK(r.latency_s == doctest::Approx(1.2e-6));
  CHECK(r.bandwidth_Bps == doctest::Approx(c.node.nvlink.bandwidth_Bps));
  CHECK(r.bandwidth_Bps == doctest::Approx(300e9));
  const collectives::Fabric f = collectives::fabric_of(c);
  CHECK(r.latency_s == doctest::Approx(f.intra_latency_s));
  CHECK(r.bandwidth_Bps == doctest::Approx(f.intra_Bps));
}

TEST_CASE("single_switch: two GPUs of different nodes meet through their NICs")
{
  const auto engine = platform_test::quiet_engine();
  const spec::ClusterSpec c = platform_test::dgx_a100_cluster(2);
  const Platform p(c, full_with_one_pair());
  const platform::Route r = p.route(Gpu{0, 1}, Gpu{1, 1});
  CHECK(r.links ==
        std::vector<std::string>{"node0.pcie_gpu1_UP", "node0.nic1_UP", "node1.nic1_DOWN", "node1.pcie_gpu1_DOWN"});
  // latency = pcie.latency + network.latency / 2 + network.latency / 2 + pcie.latency = 1 + 2.5 + 2.5 + 1 us;
  // bandwidth = min(pcie.bandwidth, NIC bandwidth) = min(25 GB/s, 200 Gb/s) = 25 GB/s.
  CHECK(r.latency_s == doctest::Approx(2 * c.node.pcie.latency_s + c.network.latency_s));
  CHECK(r.latency_s == doctest::Approx(7e-6));
  CHECK(r.bandwidth_Bps == doctest::Approx(std::min(c.node.pcie.bandwidth_Bps, c.network.nic_bandwidth_Bps)));
  CHECK(r.bandwidth_Bps == doctest::Approx(25e9));
  CHECK(r.latency_s == doctest::Approx(collectives::fabric_of(c).inter_latency_s));
}

TEST_CASE("single_switch: an oversubscribed fabric puts each node's uplink on the route")
{
  const auto engine = platform_test::quiet_engine();
  const spec::ClusterSpec c = platform_test::dgx_a100_cluster(2, 16);
  const Platform p(c, full_with_one_pair());
  const platform::Route r = p.route(Gpu{0, 1}, Gpu{1, 1});
  CHECK(r.links == std::vector<std::string>{"node0.pcie_gpu1_UP", "node0.nic1_UP", "node0.fabric_uplink_UP",
                                            "node1.fabric_uplink_DOWN", "node1.nic1_DOWN", "node1.pcie_gpu1_DOWN"});
  // The uplinks carry no latency; bandwidth = min(25 GB/s, nics x NIC bandwidth / oversubscription = 8 x 25 / 16).
  CHECK(r.latency_s == doctest::Approx(2 * c.node.pcie.latency_s + c.network.latency_s));
  CHECK(r.bandwidth_Bps == doctest::Approx(c.node.nics.count * c.network.nic_bandwidth_Bps / 16));
  CHECK(r.bandwidth_Bps == doctest::Approx(12.5e9));
}

TEST_CASE("symmetric platform: a flow's end off node 0 is the stand-in behind the NIC of its end on node 0")
{
  const auto engine = platform_test::quiet_engine();
  const spec::ClusterSpec c = platform_test::dgx_a100_cluster(4);
  PlatformOptions o;
  o.cpu_core_flops = platform_test::CPU_CORE_FLOPS;
  o.symmetric = true;
  const Platform p(c, o);
  // GPU 3 of node 0 sends through NIC 3 (spec::nic_of): GPU 5 of node 2 stands behind it, whichever way the flow goes.
  CHECK(p.flow_end(Gpu{2, 5}, Gpu{0, 3}) == p.remote(3));
  CHECK(p.flow_end(Gpu{0, 3}, Gpu{2, 5}) == p.gpu(0, 3));
  const platform::Route out = p.route(Gpu{0, 3}, Gpu{2, 5});
  CHECK(out.links == std::vector<std::string>{"node0.pcie_gpu3_UP", "node0.nic3_UP"});
  // Node 0's half of the way: pcie.latency + network.latency / 2.
  CHECK(out.latency_s == doctest::Approx(c.node.pcie.latency_s + c.network.latency_s / 2));
  const platform::Route in = p.route(Gpu{2, 5}, Gpu{0, 3});
  CHECK(in.links == std::vector<std::string>{"node0.nic3_DOWN", "node0.pcie_gpu3_DOWN"});
  CHECK(in.bandwidth_Bps == doctest::Approx(25e9));
}
