// Tests of sim/collectives/nccl.hpp. Every expected value is a formula of docs/collectives.md or a constant of
// NCCL 2.20.3 (src/graph/tuning.cc, trees.cc), stated beside it. Symbols: S buffer bytes, N ranks, G GPUs per
// node, C channels, B = C x the per-channel bottleneck bandwidth.
#include "collectives/nccl.hpp"
#include "core/error.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <tuple>
#include <vector>

using namespace zerosim;
using collectives::Algorithm;
using collectives::Fabric;
using collectives::Flow;
using collectives::Options;
using collectives::Plan;
using spec::CollectiveKind;
using spec::Gpu;

namespace {

constexpr double US = 1e-6;
// NCCL 2.20.3 tuning.cc, Simple protocol: ring base latency 8.4 us; per-step Simple minus LL latency
// (hwLat): ring NVLink 3.4 - 0.6, ring NET 14.0 - 2.7, tree NVLink 28 - 0.6, tree NET 28 - 5.0 (us).
constexpr double RING_BASE = 8.4 * US;
constexpr double RING_NVLINK_OVERHEAD = (3.4 - 0.6) * US;
constexpr double RING_NET_OVERHEAD = (14.0 - 2.7) * US;
constexpr double TREE_NVLINK_OVERHEAD = (28.0 - 0.6) * US;
constexpr double TREE_NET_OVERHEAD = (28.0 - 5.0) * US;
// NCCL 2.20.3 tuning.cc getNetOverhead on an AMD x86 host (DGX A100: AMD EPYC): 2 us; a ring's intra-node step on
// several nodes is at least that, x 3 for Simple.
constexpr double NET_POST_OVERHEAD = 2.0 * US;
constexpr double NET_POST_OVERHEAD_SIMPLE = 3 * NET_POST_OVERHEAD;

constexpr double INTRA_BPS = 300e9;  // NVLink per GPU per direction (A100)
constexpr double INTER_BPS = 25e9;   // 200 Gb/s HDR NIC
constexpr double INTRA_LAT = 1 * US; // route GPU -> GPU inside a node
constexpr double INTER_LAT = 5 * US; // route GPU -> GPU across nodes

Fabric fabric(int nodes, int gpus, int nics)
{
  Fabric f;
  f.nodes = nodes;
  f.gpus_per_node = gpus;
  f.nics_per_node = nics;
  f.intra_Bps = INTRA_BPS;
  f.inter_Bps = INTER_BPS;
  f.intra_latency_s = INTRA_LAT;
  f.inter_latency_s = INTER_LAT;
  return f;
}

Options with_focus(int node, Options o = {})
{
  o.focus_node = node;
  return o;
}

/// The pricing before protocols and achieved bus bandwidth were modelled (both ablation switches off): Simple
/// only, at line rate. The tests of the Simple ring and tree formulas written out below use it, since their
/// expected figures are NCCL's Simple formulas at the fabric's line rate; the protocols and the achieved
/// bandwidth have their own tests ("protocols", "achieved bus bandwidth") against NCCL's tables and
/// published nccl-tests figures.
Options simple_line_rate(Options o = {})
{
  o.protocols = false;
  o.achieved_busbw = false;
  return o;
}

Options forced(Algorithm a, Options o = {})
{
  o.all_reduce = a;
  return o;
}

std::vector<Flow> sorted(std::vector<Flow> v)
{
  std::sort(v.begin(), v.end(), [](const Flow& a, const Flow& b) {
    return std::tie(a.channel, a.src, a.dst, a.bytes) < std::tie(b.channel, b.src, b.dst, b.bytes);
  });
  return v;
}

std::vector<Flow> touching(const std::vector<Flow>& v, int node)
{
  std::vector<Flow> out;
  for (const Flow& f : v)
    if (f.src.node == node || f.dst.node == node)
      out.push_back(f);
  return out;
}

void check_endpoints(const Plan& p, const Fabric& f)
{
  for (const auto& ph : p.phases) {
    for (const Flow& fl : ph.flows) {
      CHECK(fl.src != fl.dst);
      for (const Gpu& g : {fl.src, fl.dst}) {
        CHECK(g.node >= 0);
        CHECK(g.node < f.nodes);
        CHECK(g.local >= 0);
        CHECK(g.local < f.gpus_per_node);
      }
      CHECK(fl.bytes >= 0);
    }
  }
}

/// Every channel of a ring plan is one cycle through all N GPUs: one flow out and one in per GPU, and
/// following the flows from any GPU returns to it after N steps.
void check_ring_cycles(const Plan& p, const Fabric& f)
{
  REQUIRE(p.phases.size() == 1);
  const int n = f.nodes * f.gpus_per_node;
  for (int c = 0; c < p.channels; ++c) {
    std::map<Gpu, Gpu> next;
    std::map<Gpu, int> in;
    for (const Flow& fl : p.phases[0].flows) {
      if (fl.channel != c)
        continue;
      CHECK(next.count(fl.src) == 0);
      next[fl.src] = fl.dst;
      ++in[fl.dst];
    }
    REQUIRE(static_cast<int>(next.size()) == n);
    for (const auto& [g, k] : in)
      CHECK(k == 1);
    Gpu at{0, 0};
    std::set<Gpu> seen;
    for (int i = 0; i < n; ++i) {
      seen.insert(at);
      at = next.at(at);
    }
    CHECK(at == Gpu{0, 0});
    CHECK(static_cast<int>(seen.size()) == n);
  }
}

} // namespace

TEST_CASE("nic_of: GPU g uses NIC g * nics / gpus")
{
  // 8 GPUs, 8 NICs (DGX A100): one each. 8 GPUs, 4 NICs: pairs. 4 GPUs, 8 NICs: every other NIC.
  for (int g = 0; g < 8; ++g) {
    CHECK(spec::nic_of(g, 8, 8) == g);
    CHECK(spec::nic_of(g, 8, 4) == g / 2);
  }
  for (int g = 0; g < 4; ++g)
    CHECK(spec::nic_of(g, 4, 8) == 2 * g);
  CHECK(spec::nic_of(3, 4, 0) == -1);
  CHECK_THROWS_AS(spec::nic_of(8, 8, 8), core::InternalError);
}

TEST_CASE("a group of one GPU is local: no phases, no flows")
{
  const Plan p = collectives::plan(CollectiveKind::ALL_REDUCE, 1 << 20, fabric(1, 1, 0));
  CHECK(p.algorithm == "local");
  CHECK(p.phases.empty());
  CHECK(p.predicted_s == 0);
}

TEST_CASE("channels: 1 on one node, min(NICs, GPUs) across nodes, entries ceil(c G / C)")
{
  CHECK(collectives::channels(fabric(1, 8, 8)) == 1);
  CHECK(collectives::channels(fabric(4, 8, 8)) == 8);
  CHECK(collectives::channels(fabric(2, 4, 2)) == 2);
  CHECK(collectives::channels(fabric(2, 4, 8)) == 4);
  CHECK(collectives::channels(fabric(2, 8, 3)) == 3);
  // C divides G: e_c = c G / C.
  for (int c = 0; c < 8; ++c)
    CHECK(collectives::channel_entry(c, fabric(4, 8, 8)) == c);
  CHECK(collectives::channel_entry(1, fabric(2, 4, 2)) == 2);
  // C = 3 does not divide G = 8: ceil(c 8 / 3) = 0, 3, 6, the first GPU of NICs 0, 1, 2.
  CHECK(collectives::channel_entry(1, fabric(2, 8, 3)) == 3);
  CHECK(collectives::channel_entry(2, fabric(2, 8, 3)) == 6);
}

TEST_CASE("ring on 1 node x 8: one channel, 8 flows of (N-1)/N S (AG, RS) or 2(N-1)/N S (AR)")
{
  const Fabric f = fabric(1, 8, 8);
  const double S = 1e9;
  for (CollectiveKind k : {CollectiveKind::ALL_GATHER, CollectiveKind::REDUCE_SCATTER, CollectiveKind::ALL_REDUCE}) {
    const Plan p = collectives::plan(k, static_cast<std::int64_t>(S), f);
    CHECK(p.algorithm == "ring");
    CHECK(p.channels == 1);
    REQUIRE(p.phases.size() == 1);
    CHECK(p.phases[0].flows.size() == 8);
    const double expected = (k == CollectiveKind::ALL_REDUCE ? 2.0 : 1.0) * 7.0 / 8.0 * S;
    for (const Flow& fl : p.phases[0].flows) {
      CHECK(fl.bytes == doctest::Approx(expected));
      CHECK(fl.src.node == 0);
      CHECK(fl.dst.node == 0);
    }
    check_endpoints(p, f);
    check_ring_cycles(p, f);
  }
}

TEST_CASE("ring on 2 nodes x 4 with 2 NICs: 2 channels, N per channel, (N-1)/N S/C per flow")
{
  const Fabric f = fabric(2, 4, 2);
  const double S = 8e8;
  for (CollectiveKind k : {CollectiveKind::ALL_GATHER, CollectiveKind::REDUCE_SCATTER, CollectiveKind::ALL_REDUCE}) {
    const Plan p = collectives::plan(k, static_cast<std::int64_t>(S), f, forced(Algorithm::RING));
    CHECK(p.channels == 2);
    REQUIRE(p.phases.size() == 1);
    // C x N = 2 x 8 flows; per channel G-1 = 3 intra edges per node and one edge leaving each node.
    CHECK(p.phases[0].flows.size() == 16);
    const double expected = (k == CollectiveKind::ALL_REDUCE ? 2.0 : 1.0) * 7.0 / 8.0 * S / 2.0;
    int inter = 0;
    for (const Flow& fl : p.phases[0].flows) {
      CHECK(fl.bytes == doctest::Approx(expected));
      inter += fl.src.node != fl.dst.node ? 1 : 0;
    }
    CHECK(inter == 4); // C channels x 2 node boundaries
    check_endpoints(p, f);
    check_ring_cycles(p, f);
  }
}

TEST_CASE("ring on 4 nodes x 8 with 8 NICs: 8 channels, 256 flows of (N-1)/N S/C or 2(N-1)/N S/C")
{
  const Fabric f = fabric(4, 8, 8);
  const double S = 4e9;
  for (CollectiveKind k : {CollectiveKind::ALL_GATHER, CollectiveKind::REDUCE_SCATTER, CollectiveKind::ALL_REDUCE}) {
    const Plan p = collectives::plan(k, static_cast<std::int64_t>(S), f, forced(Algorithm::RING));
    CHECK(p.algorithm == "ring");
    CHECK(p.channels == 8);
    REQUIRE(p.phases.size() == 1);
    CHECK(p.phases[0].flows.size() == 8 * 32);
    const double expected = (k == CollectiveKind::ALL_REDUCE ? 2.0 : 1.0) * 31.0 / 32.0 * S / 8.0;
    for (const Flow& fl : p.phases[0].flows)
      CHECK(fl.bytes == doctest::Approx(expected));
    check_endpoints(p, f);
    check_ring_cycles(p, f);
  }
}

TEST_CASE("ring channels balance the NICs: each used NIC of each node sends once and receives once")
{
  // (nodes, G, NICs): NICs = G, fewer NICs than GPUs (dividing and not), more NICs than GPUs.
  for (const auto& [nodes, g, nics] : std::vector<std::tuple<int, int, int>>{
           {4, 8, 8}, {2, 4, 2}, {2, 8, 4}, {3, 8, 3}, {2, 6, 4}, {2, 4, 8}, {3, 4, 1}, {5, 1, 2}}) {
    CAPTURE(nodes);
    CAPTURE(g);
    CAPTURE(nics);
    const Fabric f = fabric(nodes, g, nics);
    const Plan p = collectives::plan(CollectiveKind::ALL_GATHER, 1 << 30, f);
    std::map<std::pair<int, int>, int> sent;
    std::map<std::pair<int, int>, int> received;
    for (const Flow& fl : p.phases.at(0).flows) {
      if (fl.src.node == fl.dst.node)
        continue;
      ++sent[{fl.src.node, spec::nic_of(fl.src.local, g, nics)}];
      ++received[{fl.dst.node, spec::nic_of(fl.dst.local, g, nics)}];
    }
    const int c = collectives::channels(f);
    CHECK(c == std::max(1, std::min(nics, g)));
    // C NICs per node in use, each once per direction.
    CHECK(static_cast<int>(sent.size()) == nodes * c);
    CHECK(static_cast<int>(received.size()) == nodes * c);
    for (const auto& [key, k] : sent)
      CHECK(k == 1);
    for (const auto& [key, k] : received)
      CHECK(k == 1);
  }
}

TEST_CASE("predicted_s of a ring all-reduce is 2(N-1)/N S/B plus NCCL's latency terms")
{
  SUBCASE("4 nodes x 8 GPUs, 8 NICs")
  {
    // B = C x min(NIC, NVLink / (C-1)) = 8 x min(25, 300/7) GB/s = 200 GB/s (each GPU is one channel's exit,
    // so C-1 channels share its NVLink).
    const Fabric f = fabric(4, 8, 8);
    const double S = 1e9;
    const double N = 32;
    const double B = 8 * std::min(INTER_BPS, INTRA_BPS / 7);
    CHECK(B == doctest::Approx(200e9));
    // nsteps 2(N-1) = 62, of which 2 x nodes = 8 inter-node (tuning.cc); base 8.4 us; an intra step on several
    // nodes is at least the Simple post overhead: max(1 + 2.8, 6.0) = 6.0 us.
    const double intra_step = std::max(INTRA_LAT + RING_NVLINK_OVERHEAD, NET_POST_OVERHEAD_SIMPLE);
    CHECK(intra_step == doctest::Approx(6.0 * US));
    const double latency = RING_BASE + (62 - 8) * intra_step + 8 * (INTER_LAT + RING_NET_OVERHEAD);
    const Plan p = collectives::plan(CollectiveKind::ALL_REDUCE, static_cast<std::int64_t>(S), f,
                                     forced(Algorithm::RING, simple_line_rate()));
    CHECK(p.predicted_s == doctest::Approx(2 * (N - 1) / N * S / B + latency));
    // The flows pay one inter-node route latency; the phase adds the rest.
    CHECK(p.phases[0].latency_s == doctest::Approx(latency - INTER_LAT));
  }
  SUBCASE("1 node x 8 GPUs: B is one NVLink direction, 2(N-1) intra steps")
  {
    const Fabric f = fabric(1, 8, 8);
    const double S = 1e9;
    const double latency = RING_BASE + 14 * (INTRA_LAT + RING_NVLINK_OVERHEAD);
    const Plan p = collectives::plan(CollectiveKind::ALL_REDUCE, static_cast<std::int64_t>(S), f, simple_line_rate());
    CHECK(p.algorithm == "ring");
    CHECK(p.predicted_s == doctest::Approx(2.0 * 7 / 8 * S / INTRA_BPS + latency));
    CHECK(p.phases[0].latency_s == doctest::Approx(latency - INTRA_LAT));
  }
  SUBCASE("all-gather on 2 nodes x 4 GPUs, 2 NICs: N-1 steps, nodes-1 inter")
  {
    // C = 2 < G: every GPU but the exits carries both channels on NVLink: B = 2 x min(25, 300/2) GB/s.
    const Fabric f = fabric(2, 4, 2);
    const double S = 1e9;
    const double latency = RING_BASE + (7 - 1) * std::max(INTRA_LAT + RING_NVLINK_OVERHEAD, NET_POST_OVERHEAD_SIMPLE) +
                           1 * (INTER_LAT + RING_NET_OVERHEAD);
    const Plan p = collectives::plan(CollectiveKind::ALL_GATHER, static_cast<std::int64_t>(S), f, simple_line_rate());
    CHECK(p.predicted_s == doctest::Approx(7.0 / 8 * S / (2 * INTER_BPS) + latency));
  }
}

TEST_CASE("AUTO, Simple at line rate: tree for small all-reduces on many nodes, ring for large, ring on 1-2 nodes")
{
  // The Simple-only crossover written out (simple_line_rate: the ablation configuration); with protocols the
  // choice is among 6 (algorithm, protocol) pairs, tested in "protocols: ...".
  // 32 nodes x 8 GPUs, 8 NICs: N = 256, B = 200 GB/s.
  // Ring latency: 8.4 + 446 x max(3.8, 6.0) + 64 x 16.3 = 3727.6 us (an intra step on several nodes is at least
  // the Simple post overhead, 3 x 2 us); tree latency (tuning.cc, 0 base):
  // 2 x (7 x (1 + 27.4) + log2(32) x (5 + 23)) = 677.6 us. Tree bandwidth: 0.92 x B x 0.5.
  // Tree wins while L_tree + S / (0.46 B) < L_ring + 2(N-1)/N S / B, i.e. below
  // S* = (L_ring - L_tree) B / (1/0.46 - 2(N-1)/N) = 3050.0 us x 200 GB/s / 0.18173 = 3.357 GB.
  const Fabric f = fabric(32, 8, 8);
  const double N = 256;
  const double B = 200e9;
  const double l_ring = RING_BASE + (510 - 64) * std::max(INTRA_LAT + RING_NVLINK_OVERHEAD, NET_POST_OVERHEAD_SIMPLE) +
                        64 * (INTER_LAT + RING_NET_OVERHEAD);
  const double l_tree = 2 * (7 * (INTRA_LAT + TREE_NVLINK_OVERHEAD) + 5 * (INTER_LAT + TREE_NET_OVERHEAD));
  CHECK(l_ring == doctest::Approx(3727.6 * US));
  CHECK(l_tree == doctest::Approx(677.6 * US));
  const double crossover = (l_ring - l_tree) * B / (1 / 0.46 - 2 * (N - 1) / N);
  CHECK(crossover == doctest::Approx(3.357e9).epsilon(1e-3));

  const auto algo = [&](double s) {
    return collectives::plan(CollectiveKind::ALL_REDUCE, static_cast<std::int64_t>(s), f, simple_line_rate()).algorithm;
  };
  CHECK(algo(64e6) == "tree");
  CHECK(algo(0.99 * crossover) == "tree");
  CHECK(algo(1.01 * crossover) == "ring");
  CHECK(algo(8e9) == "ring");
  const Plan tree = collectives::plan(CollectiveKind::ALL_REDUCE, 64'000'000, f, simple_line_rate());
  CHECK(tree.predicted_s == doctest::Approx(l_tree + 64e6 / (0.46 * B)));
  CHECK(tree.phases.at(0).latency_s == doctest::Approx(l_tree - INTER_LAT));

  // One node (and two): the Simple tree has more latency (2 (G-1) x 28 us against 8.4 + 2(G-1) x 3.4 us)
  // and less bandwidth (0.46 B against B N / (2(N-1)) >= 0.5 B): ring at every size.
  for (double s : {1.0, 1e6, 1e9, 16e9}) {
    CHECK(
        collectives::plan(CollectiveKind::ALL_REDUCE, static_cast<std::int64_t>(s), fabric(1, 8, 8), simple_line_rate())
            .algorithm == "ring");
    CHECK(
        collectives::plan(CollectiveKind::ALL_REDUCE, static_cast<std::int64_t>(s), fabric(2, 8, 8), simple_line_rate())
            .algorithm == "ring");
  }
  // All-gather and reduce-scatter are always rings, whatever all_reduce says.
  CHECK(collectives::plan(CollectiveKind::ALL_GATHER, 1000, f, forced(Algorithm::TREE)).algorithm == "ring");
  CHECK(collectives::plan(CollectiveKind::REDUCE_SCATTER, 1000, f, forced(Algorithm::TREE)).algorithm == "ring");
}

TEST_CASE("double binary tree: NCCL's trees.cc shapes, every node has one parent per tree except the roots")
{
  // trees.cc illustration, 14 ranks: 0 -> 8 -> {4, 12}; 12 -> {10, 13}; 4 -> {2, 6}.
  CHECK(collectives::dtree_links(0, 8, 14).parent == 0);
  CHECK(collectives::dtree_links(0, 12, 14).children == std::array<int, 2>{10, 13});
  CHECK(collectives::dtree_links(0, 4, 14).children == std::array<int, 2>{2, 6});
  CHECK(collectives::dtree_links(0, 13, 14).parent == 12);
  // Mirror (12 ranks, even): tree 1 is rooted at 11, whose child is 3, whose children are 1 and 7.
  CHECK(collectives::dtree_links(1, 11, 12).parent == -1);
  CHECK(collectives::dtree_links(1, 3, 12).parent == 11);
  CHECK(collectives::dtree_links(1, 3, 12).children == std::array<int, 2>{7, 1}); // mirrors of 8's {4, 10}
  // Shift (13 ranks, odd): tree 1 is rooted at 1 -> 9 -> {5, 0}; 0 -> 11.
  CHECK(collectives::dtree_links(1, 1, 13).parent == -1);
  CHECK(collectives::dtree_links(1, 9, 13).parent == 1);
  CHECK(collectives::dtree_links(1, 9, 13).children == std::array<int, 2>{5, 0});
  CHECK(collectives::dtree_links(1, 0, 13).children == std::array<int, 2>{11, -1});

  for (int n = 1; n <= 300; ++n) {
    CAPTURE(n);
    int ceil_log2 = 0;
    while ((1 << ceil_log2) < n)
      ++ceil_log2;
    for (int t = 0; t < 2; ++t) {
      int roots = 0;
      for (int v = 0; v < n; ++v) {
        const auto l = collectives::dtree_links(t, v, n);
        if (l.parent < 0) {
          ++roots;
        } else {
          const auto pl = collectives::dtree_links(t, l.parent, n);
          CHECK((pl.children[0] == v || pl.children[1] == v));
        }
        for (int c : l.children)
          if (c >= 0)
            CHECK(collectives::dtree_links(t, c, n).parent == v);
        // Depth at most ceil(log2 n): walk up to the root.
        int depth = 0;
        for (int u = v; collectives::dtree_links(t, u, n).parent >= 0; u = collectives::dtree_links(t, u, n).parent)
          ++depth;
        CHECK(depth <= ceil_log2);
      }
      CHECK(roots == 1);
    }
    // The two trees give a node different roles: with n even no node has children in both; in all cases a
    // node has at most 4 tree edges in all (parent + children over both trees).
    for (int v = 0; v < n; ++v) {
      const auto a = collectives::dtree_links(0, v, n);
      const auto b = collectives::dtree_links(1, v, n);
      const int ca = (a.children[0] >= 0) + (a.children[1] >= 0);
      const int cb = (b.children[0] >= 0) + (b.children[1] >= 0);
      if (n % 2 == 0)
        CHECK((ca == 0 || cb == 0));
      CHECK((a.parent >= 0) + (b.parent >= 0) + ca + cb <= 4);
    }
  }
}

TEST_CASE("tree all-reduce: chain flows of S/C each way, inter-node flows of S/(2C) per tree")
{
  SUBCASE("4 nodes x 8, 8 NICs")
  {
    const Fabric f = fabric(4, 8, 8);
    const double S = 1.6e9;
    const Plan p =
        collectives::plan(CollectiveKind::ALL_REDUCE, static_cast<std::int64_t>(S), f, forced(Algorithm::TREE));
    CHECK(p.algorithm == "tree");
    CHECK(p.channels == 8);
    REQUIRE(p.phases.size() == 1);
    check_endpoints(p, f);
    int intra = 0;
    double inter_bytes = 0;
    for (const Flow& fl : p.phases[0].flows) {
      if (fl.src.node == fl.dst.node) {
        ++intra;
        CHECK(fl.bytes == doctest::Approx(S / 8));
      } else {
        // Heads face the network: channel c's head is GPU e_c = c on every node.
        CHECK(fl.src.local == fl.channel);
        CHECK(fl.dst.local == fl.channel);
        inter_bytes += fl.bytes;
      }
    }
    // Chain: C channels x nodes x (G-1) edges x 2 directions.
    CHECK(intra == 8 * 4 * 7 * 2);
    // Each tree has nodes-1 edges, each carrying S/(2C) up and S/(2C) down, for 2 trees x C channels:
    // 2 x C x 2 (nodes-1) x S/(2C) = 2 (nodes-1) S.
    CHECK(inter_bytes == doctest::Approx(2.0 * 3 * S));
    // No NIC sends more than 4 x S/(2C) per channel (interior in one tree, leaf in the other).
    std::map<std::tuple<int, int>, double> nic_out;
    for (const Flow& fl : p.phases[0].flows)
      if (fl.src.node != fl.dst.node)
        nic_out[{fl.src.node, fl.channel}] += fl.bytes;
    for (const auto& [key, b] : nic_out)
      CHECK(b <= 4 * S / 16 * (1 + 1e-12));
  }
  SUBCASE("2 nodes: tree 0 up 1->0, down 0->1; tree 1 mirrored: per channel one flow of S/C each way")
  {
    const Fabric f = fabric(2, 4, 2);
    const double S = 1e9;
    const Plan p =
        collectives::plan(CollectiveKind::ALL_REDUCE, static_cast<std::int64_t>(S), f, forced(Algorithm::TREE));
    std::vector<Flow> inter;
    for (const Flow& fl : p.phases.at(0).flows)
      if (fl.src.node != fl.dst.node)
        inter.push_back(fl);
    CHECK(inter.size() == 4); // 2 channels x 2 directions
    for (const Flow& fl : inter)
      CHECK(fl.bytes == doctest::Approx(S / 2));
  }
  SUBCASE("forced on one node: the chain, S each way on each edge")
  {
    const Plan p = collectives::plan(CollectiveKind::ALL_REDUCE, 1'000'000, fabric(1, 8, 8),
                                     forced(Algorithm::TREE, simple_line_rate()));
    CHECK(p.algorithm == "tree");
    CHECK(p.phases.at(0).flows.size() == 14);
    for (const Flow& fl : p.phases.at(0).flows)
      CHECK(fl.bytes == doctest::Approx(1e6));
    // 2 (G-1) tree steps inside the node, minus the route latency.
    CHECK(p.phases.at(0).latency_s == doctest::Approx(2 * 7 * (INTRA_LAT + TREE_NVLINK_OVERHEAD) - INTRA_LAT));
  }
}

TEST_CASE("hierarchical: intra RS, inter AR among equal local indices, intra AG, AG inter first, RS intra first")
{
  const Fabric f = fabric(4, 8, 8);
  const double S = 3.2e9;
  Options o = simple_line_rate(); // the Simple formulas at line rate, written out
  o.hierarchical = true;
  const double intra_rs = RING_BASE + 7 * (INTRA_LAT + RING_NVLINK_OVERHEAD);
  SUBCASE("all-reduce")
  {
    const Plan p = collectives::plan(CollectiveKind::ALL_REDUCE, static_cast<std::int64_t>(S), f, o);
    CHECK(p.algorithm == "hierarchical");
    CHECK(p.channels == 8);
    REQUIRE(p.phases.size() == 3);
    check_endpoints(p, f);
    // Phase 1 and 3: a ring in each node, (G-1)/G S per edge; phase 2: G rings of `nodes` ranks on S/G,
    // 2 (nodes-1)/nodes S/G per edge, between GPUs of the same local index.
    for (int i : {0, 2}) {
      CHECK(p.phases[static_cast<std::size_t>(i)].flows.size() == 4 * 8);
      for (const Flow& fl : p.phases[static_cast<std::size_t>(i)].flows) {
        CHECK(fl.src.node == fl.dst.node);
        CHECK(fl.bytes == doctest::Approx(7.0 / 8 * S));
      }
      CHECK(p.phases[static_cast<std::size_t>(i)].latency_s == doctest::Approx(intra_rs - INTRA_LAT));
    }
    CHECK(p.phases[1].flows.size() == 8 * 4);
    for (const Flow& fl : p.phases[1].flows) {
      CHECK(fl.src.node != fl.dst.node);
      CHECK(fl.src.local == fl.dst.local);
      CHECK(fl.bytes == doctest::Approx(2.0 * 3 / 4 * S / 8));
    }
    const double inter_ar = RING_BASE + 6 * (INTER_LAT + RING_NET_OVERHEAD);
    CHECK(p.phases[1].latency_s == doctest::Approx(inter_ar - INTER_LAT));
    CHECK(p.predicted_s ==
          doctest::Approx(2 * (intra_rs + 7.0 / 8 * S / INTRA_BPS) + inter_ar + 2.0 * 3 / 4 * S / 8 / INTER_BPS));
    // Forcing the all-reduce alone gives the same plan.
    const Plan q = collectives::plan(CollectiveKind::ALL_REDUCE, static_cast<std::int64_t>(S), f,
                                     forced(Algorithm::HIERARCHICAL, simple_line_rate()));
    CHECK(q.algorithm == "hierarchical");
    CHECK(q.predicted_s == doctest::Approx(p.predicted_s));
  }
  SUBCASE("all-gather: inter-node (nodes-1)/nodes S/G, then intra-node (G-1)/G S")
  {
    const Plan p = collectives::plan(CollectiveKind::ALL_GATHER, static_cast<std::int64_t>(S), f, o);
    REQUIRE(p.phases.size() == 2);
    for (const Flow& fl : p.phases[0].flows)
      CHECK((fl.src.node != fl.dst.node && fl.bytes == doctest::Approx(3.0 / 4 * S / 8)));
    for (const Flow& fl : p.phases[1].flows)
      CHECK((fl.src.node == fl.dst.node && fl.bytes == doctest::Approx(7.0 / 8 * S)));
  }
  SUBCASE("reduce-scatter: intra-node (G-1)/G S, then inter-node (nodes-1)/nodes S/G")
  {
    const Plan p = collectives::plan(CollectiveKind::REDUCE_SCATTER, static_cast<std::int64_t>(S), f, o);
    REQUIRE(p.phases.size() == 2);
    for (const Flow& fl : p.phases[0].flows)
      CHECK((fl.src.node == fl.dst.node && fl.bytes == doctest::Approx(7.0 / 8 * S)));
    for (const Flow& fl : p.phases[1].flows)
      CHECK((fl.src.node != fl.dst.node && fl.bytes == doctest::Approx(3.0 / 4 * S / 8)));
  }
  SUBCASE("one node has no hierarchy: the flat ring")
  {
    CHECK(collectives::plan(CollectiveKind::ALL_REDUCE, 1000, fabric(1, 8, 8), o).algorithm == "ring");
  }
}

TEST_CASE("focus_node keeps exactly the flows touching the node, with the same bytes and latency")
{
  for (const auto& [nodes, g, nics] :
       std::vector<std::tuple<int, int, int>>{{4, 8, 8}, {2, 4, 2}, {5, 8, 4}, {3, 1, 1}}) {
    const Fabric f = fabric(nodes, g, nics);
    for (Options base : {forced(Algorithm::RING), forced(Algorithm::TREE), forced(Algorithm::HIERARCHICAL)}) {
      for (CollectiveKind k :
           {CollectiveKind::ALL_REDUCE, CollectiveKind::ALL_GATHER, CollectiveKind::REDUCE_SCATTER}) {
        Options all = base;
        all.hierarchical = base.all_reduce == Algorithm::HIERARCHICAL;
        const Plan full = collectives::plan(k, 123'456'789, f, all);
        for (int focus = 0; focus < nodes; ++focus) {
          CAPTURE(nodes);
          CAPTURE(focus);
          const Plan part = collectives::plan(k, 123'456'789, f, with_focus(focus, all));
          CHECK(part.algorithm == full.algorithm);
          CHECK(part.predicted_s == full.predicted_s);
          REQUIRE(part.phases.size() == full.phases.size());
          for (std::size_t i = 0; i < full.phases.size(); ++i) {
            CHECK(part.phases[i].latency_s == full.phases[i].latency_s);
            const std::vector<Flow> want = sorted(touching(full.phases[i].flows, focus));
            const std::vector<Flow> got = sorted(part.phases[i].flows);
            REQUIRE(got.size() == want.size());
            for (std::size_t j = 0; j < got.size(); ++j) {
              CHECK(got[j].src == want[j].src);
              CHECK(got[j].dst == want[j].dst);
              CHECK(got[j].channel == want[j].channel);
              CHECK(got[j].bytes == doctest::Approx(want[j].bytes));
            }
          }
        }
      }
    }
  }
}

TEST_CASE("focus plans stay O(G C) flows on 1536 GPUs")
{
  // 192 nodes x 8 GPUs x 8 NICs. Ring: per channel G-1 intra edges + one edge in + one edge out = C (G+1).
  // Tree: per channel 2 (G-1) chain flows + at most 3 neighbours x 2 directions x 2 trees.
  const Fabric f = fabric(192, 8, 8);
  const Options o = with_focus(0);
  CHECK(collectives::plan(CollectiveKind::ALL_GATHER, 1 << 30, f, o).phases.at(0).flows.size() == 8 * 9);
  const Plan tree = collectives::plan(CollectiveKind::ALL_REDUCE, 1 << 20, f, o);
  CHECK(tree.algorithm == "tree");
  CHECK(tree.phases.at(0).flows.size() <= 8 * (14 + 12));
  Options merged = o;
  merged.merge_channels = true;
  // Merged ring: G intra pairs (g -> g+1), G pairs out of the node and G into it.
  CHECK(collectives::plan(CollectiveKind::ALL_GATHER, 1 << 30, f, merged).phases.at(0).flows.size() == 24);
}

TEST_CASE("merge_channels keeps the bytes between every GPU pair")
{
  const Fabric f = fabric(4, 8, 4);
  Options m;
  m.merge_channels = true;
  for (CollectiveKind k : {CollectiveKind::ALL_REDUCE, CollectiveKind::ALL_GATHER}) {
    const Plan a = collectives::plan(k, 1'000'000'000, f);
    const Plan b = collectives::plan(k, 1'000'000'000, f, m);
    REQUIRE(a.phases.size() == b.phases.size());
    for (std::size_t i = 0; i < a.phases.size(); ++i) {
      std::map<std::pair<Gpu, Gpu>, double> pa;
      std::map<std::pair<Gpu, Gpu>, double> pb;
      for (const Flow& fl : a.phases[i].flows)
        pa[{fl.src, fl.dst}] += fl.bytes;
      for (const Flow& fl : b.phases[i].flows)
        pb[{fl.src, fl.dst}] += fl.bytes;
      CHECK(b.phases[i].flows.size() == pb.size());
      REQUIRE(pa.size() == pb.size());
      for (const auto& [key, bytes] : pa)
        CHECK(pb.at(key) == doctest::Approx(bytes));
    }
  }
}

TEST_CASE("inter_node_pairs covers every inter-node flow of ring, tree and hierarchical plans")
{
  for (const auto& [nodes, g, nics] :
       std::vector<std::tuple<int, int, int>>{{4, 8, 8}, {2, 4, 2}, {7, 4, 2}, {3, 1, 1}}) {
    const Fabric f = fabric(nodes, g, nics);
    const auto pairs = collectives::inter_node_pairs(f);
    CHECK(std::is_sorted(pairs.begin(), pairs.end()));
    CHECK(std::adjacent_find(pairs.begin(), pairs.end()) == pairs.end());
    const std::set<std::pair<Gpu, Gpu>> have(pairs.begin(), pairs.end());
    std::set<std::pair<Gpu, Gpu>> used;
    Options hier;
    hier.hierarchical = true;
    for (Options o : {forced(Algorithm::RING), forced(Algorithm::TREE), hier})
      for (CollectiveKind k : {CollectiveKind::ALL_REDUCE, CollectiveKind::ALL_GATHER, CollectiveKind::REDUCE_SCATTER})
        for (spec::CommGroup grp : {spec::CommGroup::WORLD, spec::CommGroup::INTER_NODE})
          for (const auto& ph : collectives::plan(k, 1 << 24, f, o, grp).phases)
            for (const Flow& fl : ph.flows)
              if (fl.src.node != fl.dst.node)
                used.insert({fl.src, fl.dst});
    // Every pair some plan uses is listed, and every listed pair is used by some plan.
    CHECK(used == have);
    // Focus: exactly the listed pairs with an end on the node.
    for (int focus = 0; focus < nodes; ++focus) {
      const auto part = collectives::inter_node_pairs(f, with_focus(focus));
      std::vector<std::pair<Gpu, Gpu>> want;
      for (const auto& pr : pairs)
        if (pr.first.node == focus || pr.second.node == focus)
          want.push_back(pr);
      CHECK(part == want);
    }
  }
  CHECK(collectives::inter_node_pairs(fabric(1, 8, 8)).empty());
}

TEST_CASE("group plans: INTRA_NODE is the one-node plan on every node, INTER_NODE one ring per local index")
{
  const Fabric f = fabric(4, 8, 2);
  const std::int64_t S = 1 << 26;
  // INTRA_NODE reduce-scatter: the 8-GPU ring of one node, on each of the 4 nodes: 4 x the flows of the
  // one-node plan, each flow inside its node, the same latency (the groups run side by side).
  Fabric one = f;
  one.nodes = 1;
  const Plan node_plan = collectives::plan(CollectiveKind::REDUCE_SCATTER, S, one);
  const Plan intra = collectives::plan(CollectiveKind::REDUCE_SCATTER, S, f, {}, spec::CommGroup::INTRA_NODE);
  REQUIRE(intra.phases.size() == node_plan.phases.size());
  for (std::size_t i = 0; i < intra.phases.size(); ++i) {
    CHECK(intra.phases[i].flows.size() == 4 * node_plan.phases[i].flows.size());
    CHECK(intra.phases[i].latency_s == node_plan.phases[i].latency_s);
    for (const Flow& fl : intra.phases[i].flows)
      CHECK(fl.src.node == fl.dst.node);
  }
  // INTER_NODE all-gather (ring over 4 nodes, one GPU each): each of the 8 local indices has a ring of 4
  // edges, each carrying (N-1)/N S = 3/4 S (ring all-gather per-edge volume, docs/collectives.md).
  const Plan inter =
      collectives::plan(CollectiveKind::ALL_GATHER, S, f, forced(Algorithm::RING), spec::CommGroup::INTER_NODE);
  std::map<int, int> edges_per_local;
  for (const auto& ph : inter.phases)
    for (const Flow& fl : ph.flows) {
      CHECK(fl.src.local == fl.dst.local);
      CHECK(fl.src.node != fl.dst.node);
      CHECK(fl.bytes == doctest::Approx(0.75 * S));
      ++edges_per_local[fl.src.local];
    }
  CHECK(edges_per_local.size() == 8);
  for (const auto& [local, n] : edges_per_local)
    CHECK(n == 4);
  // Focus on node 1: only the flows with an end there (2 per local index: in and out).
  Options focus = forced(Algorithm::RING);
  focus.focus_node = 1;
  std::size_t focused = 0;
  for (const auto& ph : collectives::plan(CollectiveKind::ALL_GATHER, S, f, focus, spec::CommGroup::INTER_NODE).phases)
    for (const Flow& fl : ph.flows) {
      CHECK((fl.src.node == 1 || fl.dst.node == 1));
      ++focused;
    }
  CHECK(focused == 16);
}

TEST_CASE("bad fabrics and options are errors")
{
  CHECK_THROWS_AS(collectives::plan(CollectiveKind::ALL_REDUCE, 1, fabric(2, 8, 0)), core::InputError);
  Fabric no_nvlink = fabric(1, 8, 8);
  no_nvlink.intra_Bps = 0;
  CHECK_THROWS_AS(collectives::plan(CollectiveKind::ALL_REDUCE, 1, no_nvlink), core::InputError);
  CHECK_THROWS_AS(collectives::plan(CollectiveKind::ALL_REDUCE, -1, fabric(2, 8, 8)), core::InternalError);
  CHECK_THROWS_AS(collectives::plan(CollectiveKind::ALL_REDUCE, 1, fabric(2, 8, 8), with_focus(2)),
                  core::InternalError);
  CHECK_THROWS_AS(collectives::inter_node_pairs(fabric(2, 8, 8), with_focus(-2)), core::InternalError);
}

// ---- Tensor parallelism (Megatron): TENSOR groups are t consecutive GPUs of a node, DATA_PARALLEL groups the GPUs
// with the same local index modulo t on every node (nccl.hpp, plan(..., CommGroup)). t = Fabric::tensor_parallel.

namespace {

Fabric with_tp(Fabric f, int t)
{
  f.tensor_parallel = t;
  return f;
}

/// The fabric one DATA_PARALLEL group runs on (nccl.hpp): G/t GPUs per node and min(NICs, G/t) NICs.
Fabric dp_group_fabric(const Fabric& f)
{
  const int g = f.gpus_per_node / f.tensor_parallel;
  return fabric(f.nodes, g, std::min(f.nics_per_node, g));
}

using FlowKey = std::tuple<Gpu, Gpu, int, double>;

std::vector<FlowKey> keys(const std::vector<Flow>& flows)
{
  std::vector<FlowKey> out;
  for (const Flow& fl : flows)
    out.emplace_back(fl.src, fl.dst, fl.channel, fl.bytes);
  std::sort(out.begin(), out.end());
  return out;
}

/// Every option set the planner takes for an all-reduce: forced ring, forced tree, NCCL's choice, hierarchical.
std::vector<Options> all_options()
{
  Options hier;
  hier.hierarchical = true;
  return {forced(Algorithm::RING), forced(Algorithm::TREE), Options{}, hier, forced(Algorithm::HIERARCHICAL)};
}

constexpr std::array<CollectiveKind, 3> KINDS{CollectiveKind::ALL_REDUCE, CollectiveKind::ALL_GATHER,
                                              CollectiveKind::REDUCE_SCATTER};

/// All t DATA_PARALLEL groups run at once and share the node's NICs (GPU g uses NIC g NICs / G, nic_of). Summed over
/// the groups, a ring's inter-node flows out of a node are F = t x C_group (C_group the group's channels), as many into
/// it; spread over C_used = min(NICs, F) NICs, each NIC in use sends F / C_used of them and receives F / C_used (the
/// WORLD ring's property, "ring channels balance the NICs", for the groups together). Otherwise a NIC direction
/// carries more flows than the plan's estimate (one NIC direction per channel) assumes.
void check_dp_nic_balance(int nodes, int g, int nics, int t)
{
  CAPTURE(nodes);
  CAPTURE(g);
  CAPTURE(nics);
  CAPTURE(t);
  const Fabric f = with_tp(fabric(nodes, g, nics), t);
  const int flows = t * collectives::channels(dp_group_fabric(f));
  const int c_used = std::min(nics, flows);
  REQUIRE(flows % c_used == 0);
  const Plan p = collectives::plan(CollectiveKind::ALL_GATHER, 1 << 30, f, {}, spec::CommGroup::DATA_PARALLEL);
  std::map<std::pair<int, int>, int> sent, received;
  for (const Flow& fl : p.phases.at(0).flows) {
    if (fl.src.node == fl.dst.node)
      continue;
    ++sent[{fl.src.node, spec::nic_of(fl.src.local, g, nics)}];
    ++received[{fl.dst.node, spec::nic_of(fl.dst.local, g, nics)}];
  }
  CHECK(static_cast<int>(sent.size()) == nodes * c_used);
  CHECK(static_cast<int>(received.size()) == nodes * c_used);
  for (const auto& [key, n] : sent)
    CHECK(n == flows / c_used);
  for (const auto& [key, n] : received)
    CHECK(n == flows / c_used);
}

} // namespace

TEST_SUITE("collectives: tensor parallelism")
{
  TEST_CASE("TENSOR on 2 nodes x 8 GPUs, t = 4: the ring of a 4-GPU node on every group {4j..4j+3} of every node")
  {
    const int t = 4;
    const Fabric f = with_tp(fabric(2, 8, 8), t);
    const Fabric node_of_t = fabric(1, t, 8); // one group alone: a node of t GPUs
    const double S = 1 << 26;
    for (CollectiveKind k : KINDS) {
      CAPTURE(static_cast<int>(k));
      const Plan p = collectives::plan(k, static_cast<std::int64_t>(S), f, {}, spec::CommGroup::TENSOR);
      const Plan one = collectives::plan(k, static_cast<std::int64_t>(S), node_of_t);
      // The groups run side by side: the plan's latency and estimate are one group's.
      CHECK(p.algorithm == "ring");
      CHECK(p.algorithm == one.algorithm);
      CHECK(p.channels == one.channels);
      CHECK(p.predicted_s == one.predicted_s);
      REQUIRE(p.phases.size() == 1);
      REQUIRE(one.phases.size() == 1);
      CHECK(p.phases[0].latency_s == one.phases[0].latency_s);
      // 2 nodes x G/t = 2 groups each = 4 groups, each a ring of t flows.
      CHECK(p.phases[0].flows.size() == 4 * one.phases[0].flows.size());
      CHECK(p.phases[0].flows.size() == 4 * t);
      // Ring volume per edge: 2(t-1)/t S for all-reduce, (t-1)/t S for all-gather and reduce-scatter.
      const double edge = (k == CollectiveKind::ALL_REDUCE ? 2.0 : 1.0) * (t - 1) / t * S;
      std::map<std::pair<int, int>, int> out_of, in_to; // (node, local) -> flows
      for (const Flow& fl : p.phases[0].flows) {
        CHECK(fl.src.node == fl.dst.node);           // inside one node
        CHECK(fl.src.local / t == fl.dst.local / t); // inside one group {t j .. t j + t-1}
        CHECK(fl.bytes == doctest::Approx(edge));
        ++out_of[{fl.src.node, fl.src.local}];
        ++in_to[{fl.dst.node, fl.dst.local}];
      }
      // A ring: every GPU of the cluster sends one flow and receives one.
      CHECK(out_of.size() == 16);
      CHECK(in_to.size() == 16);
      for (const auto& [g, n] : out_of)
        CHECK(n == 1);
      for (const auto& [g, n] : in_to)
        CHECK(n == 1);
    }
    // The all-reduce's estimate, written out (docs/collectives.md, NCCL tuning.cc): one NVLink direction per GPU,
    // 2(t-1)/t S / B_nvlink, plus the ring's base latency and 2(t-1) NVLink steps; the flows pay one route latency.
    const Plan ar = collectives::plan(CollectiveKind::ALL_REDUCE, static_cast<std::int64_t>(S), f, simple_line_rate(),
                                      spec::CommGroup::TENSOR);
    const double latency = RING_BASE + 2 * (t - 1) * (INTRA_LAT + RING_NVLINK_OVERHEAD);
    CHECK(ar.predicted_s == doctest::Approx(2.0 * (t - 1) / t * S / INTRA_BPS + latency));
    CHECK(ar.phases.at(0).latency_s == doctest::Approx(latency - INTRA_LAT));
    // The other groups are unaffected by t: WORLD is the flat plan of the whole cluster.
    const Plan world =
        collectives::plan(CollectiveKind::ALL_REDUCE, static_cast<std::int64_t>(S), f, {}, spec::CommGroup::WORLD);
    CHECK(world.predicted_s ==
          collectives::plan(CollectiveKind::ALL_REDUCE, static_cast<std::int64_t>(S), fabric(2, 8, 8)).predicted_s);
  }

  TEST_CASE("TENSOR with t = 1 is local (no flows), with t = G one group per node")
  {
    const Plan local = collectives::plan(CollectiveKind::ALL_REDUCE, 1 << 20, with_tp(fabric(2, 8, 8), 1), {},
                                         spec::CommGroup::TENSOR);
    CHECK(local.algorithm == "local");
    CHECK(local.phases.empty());
    CHECK(local.predicted_s == 0);
    // t = G = 8 on 3 nodes: the INTRA_NODE plan (the node's own ring on every node).
    const Fabric f = with_tp(fabric(3, 8, 8), 8);
    const Plan tensor = collectives::plan(CollectiveKind::ALL_GATHER, 1 << 24, f, {}, spec::CommGroup::TENSOR);
    const Plan intra =
        collectives::plan(CollectiveKind::ALL_GATHER, 1 << 24, fabric(3, 8, 8), {}, spec::CommGroup::INTRA_NODE);
    CHECK(tensor.predicted_s == intra.predicted_s);
    REQUIRE(tensor.phases.size() == intra.phases.size());
    for (std::size_t i = 0; i < tensor.phases.size(); ++i) {
      CHECK(tensor.phases[i].latency_s == intra.phases[i].latency_s);
      CHECK(keys(tensor.phases[i].flows) == keys(intra.phases[i].flows));
    }
  }

  TEST_CASE("DATA_PARALLEL: the plan of the (G/t)-GPU cluster, its GPU v placed on local v t + c for every c < t")
  {
    // (nodes, G, NICs, t)
    for (const auto& [nodes, g, nics, t] : std::vector<std::tuple<int, int, int, int>>{
             {2, 8, 8, 4}, {4, 8, 8, 8}, {2, 8, 4, 2}, {3, 4, 2, 2}, {2, 8, 2, 4}, {5, 8, 8, 2}}) {
      CAPTURE(nodes);
      CAPTURE(g);
      CAPTURE(nics);
      CAPTURE(t);
      const Fabric f = with_tp(fabric(nodes, g, nics), t);
      const Fabric group = dp_group_fabric(f);
      for (const Options& o : all_options())
        for (CollectiveKind k : KINDS) {
          CAPTURE(static_cast<int>(k));
          CAPTURE(static_cast<int>(o.all_reduce));
          CAPTURE(o.hierarchical);
          const std::int64_t S = 123'456'789;
          const Plan p = collectives::plan(k, S, f, o, spec::CommGroup::DATA_PARALLEL);
          const Plan q = collectives::plan(k, S, group, o);
          CHECK(p.algorithm == q.algorithm);
          CHECK(p.channels == q.channels);
          CHECK(p.predicted_s == q.predicted_s);
          REQUIRE(p.phases.size() == q.phases.size());
          for (std::size_t i = 0; i < p.phases.size(); ++i) {
            CHECK(p.phases[i].latency_s == q.phases[i].latency_s);
            CHECK(p.phases[i].flows.size() == static_cast<std::size_t>(t) * q.phases[i].flows.size());
            // Every flow joins two GPUs of one data-parallel group: the same local index modulo t.
            for (const Flow& fl : p.phases[i].flows)
              CHECK(fl.src.local % t == fl.dst.local % t);
            // The group of residue c is the one-group plan with local v -> v t + c.
            for (int c = 0; c < t; ++c) {
              std::vector<Flow> mine, want;
              for (const Flow& fl : p.phases[i].flows)
                if (fl.src.local % t == c)
                  mine.push_back(fl);
              for (Flow fl : q.phases[i].flows) {
                fl.src.local = fl.src.local * t + c;
                fl.dst.local = fl.dst.local * t + c;
                want.push_back(fl);
              }
              CHECK(keys(mine) == keys(want));
            }
          }
        }
    }
  }

  TEST_CASE("DATA_PARALLEL on 2 nodes x 8, t = 4: predicted_s is the ring of 2 nodes x 2 GPUs, 2 NICs, written out")
  {
    // Group: N = 4 ranks, C = min(2 NICs, 2 GPUs) = 2 channels, each GPU one channel's exit, so a channel's
    // bandwidth is min(B_nic, B_nvlink / (C-1)) = 25 GB/s: 2(N-1)/N S / (C x 25 GB/s). Latency (tuning.cc): base +
    // (2(N-1) - 2 nodes) NVLink steps + 2 nodes network steps.
    const Fabric f = with_tp(fabric(2, 8, 8), 4);
    const double S = 1e9, N = 4, C = 2;
    const Plan p = collectives::plan(CollectiveKind::ALL_REDUCE, static_cast<std::int64_t>(S), f,
                                     forced(Algorithm::RING, simple_line_rate()), spec::CommGroup::DATA_PARALLEL);
    const double latency =
        RING_BASE + (6 - 4) * (INTRA_LAT + RING_NVLINK_OVERHEAD) + 4 * (INTER_LAT + RING_NET_OVERHEAD);
    CHECK(p.predicted_s == doctest::Approx(2 * (N - 1) / N * S / (C * std::min(INTER_BPS, INTRA_BPS)) + latency));
    CHECK(p.predicted_s == collectives::plan(CollectiveKind::ALL_REDUCE, static_cast<std::int64_t>(S), fabric(2, 2, 2),
                                             forced(Algorithm::RING, simple_line_rate()))
                               .predicted_s);
    for (const Flow& fl : p.phases.at(0).flows)
      CHECK(fl.bytes == doctest::Approx(2 * (N - 1) / N * S / C));
    // t = G: one GPU per node per group, a ring of `nodes` ranks through the NIC: 2(n-1)/n S / B_nic, every step a
    // network step (inter steps clamped to nsteps = 2(n-1)).
    const Fabric g = with_tp(fabric(2, 8, 8), 8);
    const Plan q = collectives::plan(CollectiveKind::ALL_REDUCE, static_cast<std::int64_t>(S), g,
                                     forced(Algorithm::RING, simple_line_rate()), spec::CommGroup::DATA_PARALLEL);
    CHECK(q.predicted_s ==
          doctest::Approx(2.0 * 1 / 2 * S / INTER_BPS + RING_BASE + 2 * (INTER_LAT + RING_NET_OVERHEAD)));
    for (const Flow& fl : q.phases.at(0).flows) {
      CHECK(fl.src.node != fl.dst.node);
      CHECK(fl.src.local == fl.dst.local);
    }
  }

  TEST_CASE("DATA_PARALLEL with t = 1 is the WORLD plan")
  {
    const Fabric f = fabric(2, 8, 8);
    for (CollectiveKind k : KINDS) {
      const Plan p = collectives::plan(k, 1 << 26, f, {}, spec::CommGroup::DATA_PARALLEL);
      const Plan w = collectives::plan(k, 1 << 26, f);
      CHECK(p.predicted_s == w.predicted_s);
      REQUIRE(p.phases.size() == w.phases.size());
      for (std::size_t i = 0; i < p.phases.size(); ++i)
        CHECK(keys(p.phases[i].flows) == keys(w.phases[i].flows));
    }
  }

  TEST_CASE("TENSOR and DATA_PARALLEL: focus_node keeps exactly the flows touching the node")
  {
    for (const auto& [nodes, g, nics, t] :
         std::vector<std::tuple<int, int, int, int>>{{2, 8, 8, 4}, {3, 8, 4, 2}, {4, 4, 2, 4}}) {
      const Fabric f = with_tp(fabric(nodes, g, nics), t);
      for (spec::CommGroup grp : {spec::CommGroup::TENSOR, spec::CommGroup::DATA_PARALLEL})
        for (const Options& o : all_options())
          for (CollectiveKind k : KINDS) {
            const Plan full = collectives::plan(k, 98'765'432, f, o, grp);
            for (int focus = 0; focus < nodes; ++focus) {
              CAPTURE(nodes);
              CAPTURE(t);
              CAPTURE(focus);
              CAPTURE(static_cast<int>(grp));
              const Plan part = collectives::plan(k, 98'765'432, f, with_focus(focus, o), grp);
              CHECK(part.algorithm == full.algorithm);
              CHECK(part.predicted_s == full.predicted_s);
              REQUIRE(part.phases.size() == full.phases.size());
              for (std::size_t i = 0; i < full.phases.size(); ++i) {
                CHECK(part.phases[i].latency_s == full.phases[i].latency_s);
                CHECK(keys(part.phases[i].flows) == keys(touching(full.phases[i].flows, focus)));
              }
            }
          }
    }
  }

  TEST_CASE("inter_node_pairs with t > 1 lists exactly the pairs the WORLD, INTER_NODE and DATA_PARALLEL plans use")
  {
    for (const auto& [nodes, g, nics, t] : std::vector<std::tuple<int, int, int, int>>{
             {2, 8, 8, 4}, {4, 8, 8, 8}, {2, 8, 4, 2}, {3, 4, 2, 2}, {2, 8, 2, 4}, {7, 4, 2, 2}}) {
      CAPTURE(nodes);
      CAPTURE(g);
      CAPTURE(nics);
      CAPTURE(t);
      const Fabric f = with_tp(fabric(nodes, g, nics), t);
      const auto pairs = collectives::inter_node_pairs(f);
      CHECK(std::is_sorted(pairs.begin(), pairs.end()));
      CHECK(std::adjacent_find(pairs.begin(), pairs.end()) == pairs.end());
      const std::set<std::pair<Gpu, Gpu>> have(pairs.begin(), pairs.end());
      std::set<std::pair<Gpu, Gpu>> used, used_dp;
      for (const Options& o : all_options())
        for (CollectiveKind k : KINDS)
          for (std::int64_t S : {std::int64_t{1} << 10, std::int64_t{1} << 24, std::int64_t{1} << 34})
            for (spec::CommGroup grp : {spec::CommGroup::WORLD, spec::CommGroup::INTER_NODE,
                                        spec::CommGroup::DATA_PARALLEL, spec::CommGroup::TENSOR})
              for (const auto& ph : collectives::plan(k, S, f, o, grp).phases)
                for (const Flow& fl : ph.flows)
                  if (fl.src.node != fl.dst.node) {
                    CHECK(grp != spec::CommGroup::TENSOR); // a TENSOR group never leaves its node
                    used.insert({fl.src, fl.dst});
                    if (grp == spec::CommGroup::DATA_PARALLEL)
                      used_dp.insert({fl.src, fl.dst});
                  }
      // Every DATA_PARALLEL pair has a route ...
      CHECK(!used_dp.empty());
      for (const auto& pr : used_dp)
        CHECK(have.count(pr) == 1);
      // ... and every listed pair is some plan's.
      CHECK(used == have);
      for (int focus = 0; focus < nodes; ++focus) {
        std::vector<std::pair<Gpu, Gpu>> want;
        for (const auto& pr : pairs)
          if (pr.first.node == focus || pr.second.node == focus)
            want.push_back(pr);
        CHECK(collectives::inter_node_pairs(f, with_focus(focus)) == want);
      }
    }
  }

  TEST_CASE("DATA_PARALLEL rings use every NIC of a node equally in each direction")
  {
    for (const auto& [nodes, g, nics, t] : std::vector<std::tuple<int, int, int, int>>{
             {2, 8, 8, 4}, {4, 8, 8, 8}, {2, 8, 8, 2}, {2, 8, 4, 8}, {3, 4, 4, 2}, {2, 4, 1, 4}})
      check_dp_nic_balance(nodes, g, nics, t);
  }

  // The group fabric has min(NICs, G/t) NICs, so its GPU v uses the NIC local v t + c really uses (NIC (v t + c) NICs
  // / G): with fewer NICs than GPUs per group too, every NIC sends and receives equally (this failed with NICs / t:
  // 8 GPUs, 4 NICs, t = 2 put every outgoing flow on NICs 1 and 3 and every incoming one on NICs 0 and 2).
  TEST_CASE("DATA_PARALLEL rings use every NIC of a node equally when NICs / t < G / t")
  {
    for (const auto& [nodes, g, nics, t] :
         std::vector<std::tuple<int, int, int, int>>{{2, 8, 4, 2}, {2, 8, 2, 4}, {3, 8, 2, 2}})
      check_dp_nic_balance(nodes, g, nics, t);
  }

  TEST_CASE("a tensor-parallel degree that does not divide the GPUs of a node is an input error")
  {
    for (int t : {3, 5, 16, 0, -2}) {
      CAPTURE(t);
      const Fabric f = with_tp(fabric(2, 8, 8), t);
      CHECK_THROWS_AS(collectives::plan(CollectiveKind::ALL_REDUCE, 1024, f, {}, spec::CommGroup::TENSOR),
                      core::InputError);
      CHECK_THROWS_AS(collectives::plan(CollectiveKind::ALL_GATHER, 1024, f, {}, spec::CommGroup::DATA_PARALLEL),
                      core::InputError);
      if (t > 1)
        CHECK_THROWS_AS(collectives::inter_node_pairs(f), core::InputError);
    }
  }
}

// ---- Protocols and achieved bus bandwidth (docs/collectives.md "Protocols", "Achieved bus bandwidth") ----

namespace {

/// A DGX A100-like fabric whose hops are NCCL's own LL step latencies (tuning.cc hwLat: NVLink ring LL 0.6 us,
/// network ring LL 2.7 us), so that the planner's ring latencies are NCCL's tuning-model latencies exactly and
/// can be computed by hand from NCCL's tables.
Fabric nccl_fabric(int nodes, int gpus, int nics)
{
  Fabric f = fabric(nodes, gpus, nics);
  f.intra_latency_s = 0.6 * US;
  f.inter_latency_s = 2.7 * US;
  return f;
}

Options ring_with(collectives::Protocol p)
{
  Options o = forced(Algorithm::RING);
  o.protocol = p;
  return o;
}

/// nccl-tests' all-reduce bus bandwidth of the planner's estimate: 2(N-1)/N S / predicted_s.
double busbw(const Fabric& f, double s, const Options& o = {})
{
  const double n = static_cast<double>(f.nodes) * f.gpus_per_node;
  return 2 * (n - 1) / n * s /
         collectives::plan(CollectiveKind::ALL_REDUCE, static_cast<std::int64_t>(s), f, o).predicted_s;
}

} // namespace

TEST_CASE("protocols, one node of 8 A100: NCCL's own ring predictions by hand, LL below 1.2 MB, Simple above 24 MB")
{
  // NCCL 2.20.3 tuning.cc for 8 GPUs on one NVSwitch node, ring all-reduce, 2(N-1) = 14 steps, by hand:
  // NCCL's bus bandwidth is nChannels x its NVLink bandwidth: 12 NVLinks x 20 GB/s (topo.h SM80_NVLINK_BW) =
  // 240 GB/s, the planner's 0.80 x 300 GB/s. Algorithm bandwidth = bus x N / nsteps = bus x 8 / 14.
  //   LL:     latency 6.6 + 14 x 0.6 = 15.0 us;  bus min(240 / 4, llMaxBw 87.7) = 60 GB/s;  alg 34.2857 GB/s
  //   LL128:  latency 14.0 + 14 x 1.9 = 40.6 us; bus 0.92 x 240 = 220.8 GB/s;             alg 126.171 GB/s
  //   Simple: latency 8.4 + 14 x 3.4 = 56.0 us;  bus 240 GB/s;                            alg 137.143 GB/s
  // Crossovers: LL/LL128 at 25.6 us / (1/34.2857 - 1/126.171) ns/B = 1.2052 MB;
  //             LL128/Simple at 15.4 us / (1/126.171 - 1/137.143) ns/B = 24.286 MB.
  const Fabric f = nccl_fabric(1, 8, 8);
  const auto ar = [&](double s, Options o = forced(Algorithm::RING)) {
    return collectives::plan(CollectiveKind::ALL_REDUCE, static_cast<std::int64_t>(s), f, o);
  };
  const double s_ll = 1.2052e6, s_simple = 24.286e6;
  CHECK(ar(0.99 * s_ll).protocol == collectives::Protocol::LL);
  CHECK(ar(1.01 * s_ll).protocol == collectives::Protocol::LL128);
  CHECK(ar(0.99 * s_simple).protocol == collectives::Protocol::LL128);
  CHECK(ar(1.01 * s_simple).protocol == collectives::Protocol::SIMPLE);
  CHECK(ar(1e9).protocol == collectives::Protocol::SIMPLE);

  // 64 KiB: LL, NCCL's time 15.0 us + 65536 B / 34.2857 GB/s = 16.911 us; Simple only (the ablation, at the same
  // achieved bandwidth) 56.0 + 65536 / 137.143 GB/s = 56.478 us: the protocol cuts small-message time 3.3 x.
  const Plan small = ar(65536);
  CHECK(small.predicted_s == doctest::Approx(16.911 * US).epsilon(1e-3));
  CHECK(small.phases.at(0).latency_s == doctest::Approx((15.0 - 0.6) * US)); // less the flows' route latency
  Options simple_only = forced(Algorithm::RING);
  simple_only.protocols = false;
  CHECK(ar(65536, simple_only).predicted_s == doctest::Approx(56.478 * US).epsilon(1e-3));
  // LL's flows run at a quarter of the achieved NVLink bandwidth: efficiency 0.8 x 1/4.
  for (const Flow& fl : small.phases.at(0).flows)
    CHECK(fl.efficiency == doctest::Approx(0.2));
  // 1 GB: Simple, the same plan as with protocols off (large-message bandwidth is Simple's).
  CHECK(ar(1e9).predicted_s == doctest::Approx(ar(1e9, simple_only).predicted_s));

  // AUTO may take a tree; NCCL's medium-size tree correction (tuning.cc treeCorrectionFactor, LL128 0.6 at
  // 1-2 MB) keeps the ring: tree LL128 31.5 us + 1 MB / (0.5 x 0.92 x 240 x 7/9 x 0.6 GB/s) = 50.9 us against
  // ring LL 15.0 + 1 MB / 34.29 GB/s = 44.2 us.
  const Plan mb = collectives::plan(CollectiveKind::ALL_REDUCE, 1'000'000, f);
  CHECK(mb.algorithm == "ring");
  CHECK(mb.protocol == collectives::Protocol::LL);
}

TEST_CASE("protocols, 2 nodes x 8 A100, 8 NICs: NCCL's ring latencies by hand, LL below 173 kB, Simple above 163 MB")
{
  // NCCL 2.20.3 tuning.cc, ring all-reduce on 2 nodes of 8 (N = 16): nsteps 30, nInterSteps 2 x nodes = 4. Intra
  // steps are at least the network post overhead (getNetOverhead, AMD host as DGX A100: 2 us, x 3 for Simple):
  // LL max(0.6, 2.0) = 2.0, LL128 max(1.9, 2.0) = 2.0, Simple max(3.4, 6.0) = 6.0 us; inter steps LL 2.7, LL128
  // 4.0, Simple 14.0 us:
  //   LL     6.6 + 26 x 2.0 + 4 x 2.7 = 69.4 us;   LL128 14.0 + 26 x 2.0 + 4 x 4.0 = 82.0 us;
  //   Simple 8.4 + 26 x 6.0 + 4 x 14.0 = 220.4 us.
  // Bus bandwidth: 8 channels x min(0.96 x 25, 0.8 x 300 / 7) = 192 GB/s; LL min(192 / 4, llMaxBw 22.5) = 22.5,
  // LL128 0.92 x 192 = 176.64, Simple 192 GB/s; algorithm bandwidth x 16 / 30: 12.0, 94.208, 102.4 GB/s.
  // Crossovers: 12.6 us / (1/12 - 1/94.208) ns/B = 173.27 kB; 138.4 us / (1/94.208 - 1/102.4) ns/B = 162.98 MB.
  const Fabric f = nccl_fabric(2, 8, 8);
  const auto ar = [&](double s, Options o = forced(Algorithm::RING)) {
    return collectives::plan(CollectiveKind::ALL_REDUCE, static_cast<std::int64_t>(s), f, o);
  };
  CHECK(ar(0, ring_with(collectives::Protocol::LL)).predicted_s == doctest::Approx(69.4 * US));
  CHECK(ar(0, ring_with(collectives::Protocol::LL128)).predicted_s == doctest::Approx(82.0 * US));
  CHECK(ar(0, ring_with(collectives::Protocol::SIMPLE)).predicted_s == doctest::Approx(220.4 * US));
  CHECK(ar(0.99 * 173.27e3).protocol == collectives::Protocol::LL);
  CHECK(ar(1.01 * 173.27e3).protocol == collectives::Protocol::LL128);
  CHECK(ar(0.99 * 162.98e6).protocol == collectives::Protocol::LL128);
  CHECK(ar(1.01 * 162.98e6).protocol == collectives::Protocol::SIMPLE);
  // The phase's latency is the protocol's, less the inter-node route latency the flows pay, plus what LL's
  // ceiling adds to the flows' time: 2 x 15/16 x 4096 = 7680 bus bytes at 22.5 GB/s instead of 192 / 4 = 48 GB/s.
  const Plan tiny = ar(4096);
  CHECK(tiny.phases.at(0).latency_s == doctest::Approx((69.4 - 2.7) * US + 7680 / 22.5e9 - 7680 / 48e9));
  // LL's flows run at a quarter of the achieved bandwidth: 0.8 x 1/4 on NVLink, 0.96 x 1/4 on the network (the
  // ceiling is the GPU's, paid as latency above, not as wire bytes).
  for (const Flow& fl : tiny.phases.at(0).flows)
    CHECK(fl.efficiency == doctest::Approx((fl.src.node != fl.dst.node ? 0.96 : 0.8) / 4));
  // On two nodes NCCL's tuner takes the tree for small all-reduces (nccl-tests issue 196, S. Jeaugey: "On two
  // nodes, NCCL uses the tree"): NCCL's tree LL latency 6.8 + 2 x (7 x 0.6 + 1 x 5.0) = 25.2 us (the planner's
  // 20.6 us, its inter step being the 2.7 us hop) against the ring's 69.4 us.
  CHECK(collectives::plan(CollectiveKind::ALL_REDUCE, 4096, f).algorithm == "tree");
}

TEST_CASE("protocols, 2 nodes x 8 A100: the tree's size correction applies after LL's llMaxBw ceiling, as in NCCL")
{
  // NCCL 2.20.3 tuning.cc, tree all-reduce with LL on 2 nodes of 8, 1 MB (S = 1e6 B), by hand:
  //   ncclTopoTuneModel: busBw = C x per-channel = 8 x min(0.96 x 25, 0.8 x 300 / 7) = 192 GB/s (the planner's B),
  //   x 0.92 (tree) = 176.64, LL: min(176.64 / 3.8, llMaxBw 22.5) = min(46.48, 22.5) = 22.5 GB/s; algorithm
  //   bandwidth x 0.5 = 11.25 GB/s.
  //   ncclTopoGetAlgoTime: bw x treeCorrectionFactor[LL][log2i(1e6 >> 6) = log2i(15625) = 13] = 11.25 x 0.4 = 4.5 GB/s,
  //   time = latency + S / bw = latency + 1e6 / 4.5e9 = latency + 222.22 us (the ceiling corrected too; correcting
  //   before the ceiling would give max(2e6 / (46.48 x 0.4), 2e6 / 22.5) = 107.56 us).
  //   Latency (the planner's, hops = NCCL's LL steps): 6.8 + 2 x (7 x 0.6 + 1 x 2.7) = 20.6 us.
  const Fabric f = nccl_fabric(2, 8, 8);
  Options o = forced(Algorithm::TREE);
  o.protocol = collectives::Protocol::LL;
  const Plan p = collectives::plan(CollectiveKind::ALL_REDUCE, 1'000'000, f, o);
  REQUIRE(p.algorithm == "tree");
  REQUIRE(p.protocol == collectives::Protocol::LL);
  const double bandwidth_s = 1e6 / (0.5 * 22.5e9 * 0.4);
  CHECK(p.predicted_s == doctest::Approx(20.6 * US + bandwidth_s));
  // The flows run at the achieved fraction x 1/3.8 x 0.4 (no ceiling in the wire bytes); the ceiling's extra time,
  // NCCL's bandwidth term less the flows' own 2S / (176.64 / 3.8 x 0.4 GB/s), is phase latency, less the route's 2.7
  // us.
  const double flows_s = 2e6 / (176.64e9 / 3.8 * 0.4);
  CHECK(p.phases.at(0).latency_s == doctest::Approx((20.6 - 2.7) * US + bandwidth_s - flows_s));
  for (const Flow& fl : p.phases.at(0).flows)
    CHECK(fl.efficiency == doctest::Approx((fl.src.node != fl.dst.node ? 0.96 : 0.8) / 3.8 * 0.4));
}

TEST_CASE("protocols on 1536 GPUs: a 1 MB all-gather runs LL, under a third of Simple's step latency")
{
  // 192 nodes x 8: N - 1 = 1535 steps, nodes - 1 = 191 across nodes (tuning.cc), 1344 inside, each at least the
  // AMD host's post overhead (2 us, x 3 for Simple):
  //   LL     6.6 + 1344 x max(0.6, 2.0) + 191 x 2.7 = 3210.3 us;
  //   Simple 8.4 + 1344 x max(3.4, 6.0) + 191 x 14.0 = 10746.4 us (the pricing with protocols off).
  const Fabric f = nccl_fabric(192, 8, 8);
  Options focus;
  focus.focus_node = 0;
  const Plan p = collectives::plan(CollectiveKind::ALL_GATHER, 1'000'000, f, focus);
  CHECK(p.protocol == collectives::Protocol::LL);
  // LL's bandwidth there is its ceiling llMaxBw, 19.0 GB/s on more than two nodes: predicted 3210.3 us +
  // 1535/1536 x 1 MB / 19.0 GB/s = 1918.9 us.
  CHECK(p.predicted_s == doctest::Approx(3210.3 * US + 1535.0 / 1536 * 1e6 / 19.0e9));
  Options off = focus;
  off.protocols = false;
  CHECK(collectives::plan(CollectiveKind::ALL_GATHER, 1'000'000, f, off).phases.at(0).latency_s ==
        doctest::Approx((10746.4 - 2.7) * US));
}

TEST_CASE("protocols: LL128 only over NVLink, a forced protocol is kept, names")
{
  // PCIe-only node (tuning.cc enables LL128 by default only for NVLink paths): LL or Simple, never LL128.
  Fabric pcie = fabric(1, 8, 8);
  pcie.intra_nvlink = false;
  pcie.intra_Bps = 12e9;
  for (double s : {1e3, 1e5, 1e6, 1e7, 1e8, 1e9})
    CHECK(collectives::plan(CollectiveKind::ALL_GATHER, static_cast<std::int64_t>(s), pcie).protocol !=
          collectives::Protocol::LL128);
  // Forced (NCCL_PROTO=LL128) it is used, as NCCL does when the user sets it.
  CHECK(collectives::plan(CollectiveKind::ALL_GATHER, 1'000'000, pcie, ring_with(collectives::Protocol::LL128))
            .protocol == collectives::Protocol::LL128);
  CHECK(std::string(collectives::protocol_name(collectives::Protocol::LL128)) == "LL128");
  CHECK(std::string(collectives::protocol_name(collectives::Protocol::SIMPLE)) == "Simple");
  // Hierarchical plans choose per phase (three NCCL calls); the plan reports the inter-node phase's protocol.
  Options h;
  h.hierarchical = true;
  const Plan hp = collectives::plan(CollectiveKind::ALL_REDUCE, 1'000'000'000, nccl_fabric(4, 8, 8), h);
  REQUIRE(hp.phases.size() == 3);
  CHECK(hp.protocol == hp.phases[1].protocol);
  for (const auto& ph : hp.phases)
    CHECK(ph.protocol != collectives::Protocol::AUTO);
}

TEST_CASE("achieved bus bandwidth, physics: nccl-tests busbw on 8 A100 and 8 H100 (NVSwitch), and on 3 nodes of 8 A100")
{
  // Measurements the fractions were not taken from: the planner's busbw against them.
  // nccl-tests issue 175 (NVIDIA/nccl-tests#175): one node of 8 A100, all_reduce_perf -b 8 -e 4G, busbw 232.54
  // GB/s at 4 GB, of 300 GB/s per direction (the NVLink fraction 0.80 is topo.h's 20 of 25 GB/s per link).
  // Predicted within 5 %; at line rate it would be 300 (+29 %).
  const Fabric a100 = fabric(1, 8, 8);
  CHECK(busbw(a100, 4e9) == doctest::Approx(232.54e9).epsilon(0.05).scale(0));
  Options line_rate;
  line_rate.achieved_busbw = false;
  CHECK(busbw(a100, 4e9, line_rate) > 1.25 * 232.54e9);
  // nccl-tests issue 212, S. Jeaugey (NVIDIA): H100 NVLink 450 GB/s line rate, "with the protocol overhead (~20%)
  // NCCL can get an effective NVLink bandwidth of 370GB/s" (ring). Within 5 %.
  Fabric h100 = fabric(1, 8, 8);
  h100.intra_Bps = 450e9;
  CHECK(busbw(h100, 8e9, forced(Algorithm::RING)) == doctest::Approx(370e9).epsilon(0.05).scale(0));
  // nccl-tests issue 119: 3 nodes x 8 A100, 4 HDR NICs each: peak busbw 96 GB/s of 100 GB/s (0.96); the fall-off
  // (fitted at 8 nodes, below) gives 0.96 / (1 + 0.046 log2 1.5) = 0.935 at 3 nodes, within 3 %.
  CHECK(collectives::achieved_fraction(fabric(3, 8, 4), true, Options{}) ==
        doctest::Approx(0.96).epsilon(0.03).scale(0));
}

TEST_CASE("achieved bus bandwidth, data and fit checks: the transport fractions, and the figures they were taken from")
{
  // Not physics: each check below gives back a figure a constant was derived from (nccl.hpp, docs/collectives.md
  // "Achieved bus bandwidth"), so it catches a changed constant or formula, not a wrong model.
  Options o;
  CHECK(collectives::achieved_fraction(fabric(1, 8, 8), false, o) == doctest::Approx(0.80)); // NVLINK_BUSBW_FRACTION
  Fabric pcie = fabric(1, 8, 8);
  pcie.intra_nvlink = false;
  CHECK(collectives::achieved_fraction(pcie, false, o) == doctest::Approx(1.0));            // PCIE_BUSBW_FRACTION
  CHECK(collectives::achieved_fraction(fabric(2, 8, 8), true, o) == doctest::Approx(0.96)); // NET_BUSBW_FRACTION
  // Fit check: NVIDIA/nccl issue 812, D. Addison (NVIDIA): "On an Nvidia DGX-A100 system we have 8x200Gbit/s IB
  // cards and we measure 192GB/s AllReduce BusBW" (two nodes, ring), the source of 0.96 = 192 / 200. Within 2 %.
  CHECK(busbw(fabric(2, 8, 8), 8e9, forced(Algorithm::RING)) == doctest::Approx(192e9).epsilon(0.02).scale(0));
  // Fit check: NVIDIA/nccl issue 319: 8 nodes, ring busbw 43.57 GB/s on one switch, 39.93 across two (0.916), the
  // pair k = 0.046 was fitted to: the fall-off at 8 nodes is 1 / (1 + 0.046 x 2) = 0.916 of the two-node fraction.
  CHECK(collectives::achieved_fraction(fabric(8, 8, 8), true, o) / 0.96 ==
        doctest::Approx(39.93 / 43.57).epsilon(0.01).scale(0));
  // Monotone in node count; off: line rate everywhere.
  double last = 1;
  for (int nodes : {2, 4, 16, 64, 192}) {
    const double x = collectives::achieved_fraction(fabric(nodes, 8, 8), true, o);
    CHECK(x <= last);
    last = x;
  }
  o.achieved_busbw = false;
  CHECK(collectives::achieved_fraction(fabric(192, 8, 8), true, o) == 1.0);
  CHECK(collectives::achieved_fraction(fabric(1, 8, 8), false, o) == 1.0);
  // Off together with protocols: every flow at efficiency 1 (the pricing before either was modelled).
  const Plan p = collectives::plan(CollectiveKind::ALL_REDUCE, 1'000'000, fabric(4, 8, 8),
                                   simple_line_rate(forced(Algorithm::RING)));
  for (const Flow& fl : p.phases.at(0).flows) {
    CHECK(fl.efficiency == 1.0);
    CHECK(fl.wire_bytes() == fl.bytes);
  }
}

TEST_CASE("achieved bus bandwidth: a calibration profile's busbw multipliers scale each transport, capped at line rate")
{
  // docs/calibration.md §1: busbw.nvlink / .pcie / .net multiply NVLINK_BUSBW_FRACTION (0.80), PCIE_BUSBW_FRACTION
  // (1.0) and NET_BUSBW_FRACTION (0.96, with its fall-off); the product never exceeds 1 (the line rate).
  Options o;
  o.busbw_factor_nvlink = 0.5;
  o.busbw_factor_net = 0.5;
  CHECK(collectives::achieved_fraction(fabric(1, 8, 8), false, o) == doctest::Approx(0.40));
  CHECK(collectives::achieved_fraction(fabric(2, 8, 8), true, o) == doctest::Approx(0.48));
  // 8 nodes: 0.96 x 0.5 / (1 + 0.046 x log2(4)).
  CHECK(collectives::achieved_fraction(fabric(8, 8, 8), true, o) == doctest::Approx(0.48 / 1.092));
  o.busbw_factor_nvlink = 1.3; // 0.80 x 1.3 = 1.04: capped at 1
  o.busbw_factor_net = 1.3;    // 0.96 x 1.3 = 1.248: capped at 1
  CHECK(collectives::achieved_fraction(fabric(1, 8, 8), false, o) == doctest::Approx(1.0));
  CHECK(collectives::achieved_fraction(fabric(2, 8, 8), true, o) == doctest::Approx(1.0));
  Fabric pcie = fabric(1, 8, 8);
  pcie.intra_nvlink = false;
  o.busbw_factor_pcie = 0.7;
  CHECK(collectives::achieved_fraction(pcie, false, o) == doctest::Approx(0.7));
  // With achieved_busbw off (the ablation) the multipliers do not apply: line rate.
  o.achieved_busbw = false;
  CHECK(collectives::achieved_fraction(fabric(2, 8, 8), true, o) == 1.0);
}

TEST_CASE("achieved bus bandwidth: a node's measured NIC fraction replaces the prior, the fall-off on top")
{
  // docs/collectives.md "Achieved bus bandwidth", topologies/jean-zay-a100-80gb.yaml: BigScience's all_reduce
  // benchmark on 4 Jean Zay A100 nodes (experiments/bandwidth/all_reduce_bench-a100-n4.txt, NCCL 2.10.3) measured a
  // median busbw of 40.54 Gb/s through one 100 Gb/s Omni-Path port; the node file's 0.424 is that with the 4-node
  // fall-off undone. Data check: at 4 nodes the model gives the measured 0.4054 back.
  Fabric f = fabric(4, 8, 4);
  f.inter_busbw_fraction = 0.424;
  Options o;
  CHECK(collectives::achieved_fraction(f, true, o) == doctest::Approx(40.54 / 100).epsilon(0.002).scale(0));
  f.nodes = 2;
  CHECK(collectives::achieved_fraction(f, true, o) == doctest::Approx(0.424));
  CHECK(collectives::achieved_fraction(f, false, o) == doctest::Approx(0.80)); // NVLink keeps its prior
  o.busbw_factor_net = 2.0;                                                    // a profile's multiplier still applies
  CHECK(collectives::achieved_fraction(f, true, o) == doctest::Approx(0.848));
  o.achieved_busbw = false;
  CHECK(collectives::achieved_fraction(f, true, o) == 1.0);

  // fabric_of takes the node's fraction while the scenario keeps the node's NIC rate; another rate gets the prior.
  spec::ClusterSpec c;
  c.nodes = 4;
  c.gpus_per_node = 8;
  c.node.gpus = 8;
  c.node.nics.count = 4;
  c.node.nics.bandwidth_Bps = 12.5e9;
  c.node.nics.busbw_fraction = 0.424;
  c.network.nics_per_node = 4;
  c.network.nic_bandwidth_Bps = 12.5e9;
  CHECK(collectives::fabric_of(c).inter_busbw_fraction == 0.424);
  c.network.nic_bandwidth_Bps = 25e9;
  CHECK(collectives::fabric_of(c).inter_busbw_fraction == 0.0);
}

TEST_CASE("nccl_ctas: the kind's figure inside a node, two per NIC across nodes, at most 32")
{
  // docs/research/nccl-ctas.md: NCCL's ring search finds one channel per NIC between nodes (DGX A100, 8 HDR NICs:
  // 8) and connect.cc doubles every search channel (16); MAXCHANNELS is 32 (NCCL 2.8-2.24).
  collectives::Fabric f;
  f.nodes = 4;
  f.gpus_per_node = 8;
  f.nics_per_node = 8;
  CHECK(collectives::nccl_ctas(f, spec::CommGroup::WORLD, 24) == 16);
  CHECK(collectives::nccl_ctas(f, spec::CommGroup::DATA_PARALLEL, 24) == 16);
  CHECK(collectives::nccl_ctas(f, spec::CommGroup::INTRA_NODE, 24) == 24);
  CHECK(collectives::nccl_ctas(f, spec::CommGroup::TENSOR, 24) == 24);
  CHECK(collectives::nccl_ctas(f, spec::CommGroup::INTER_NODE, 24) == 2); // one GPU of a node: one NIC
  f.nics_per_node = 4;                                                    // DGX-1V with 4 EDR NICs: 8
  CHECK(collectives::nccl_ctas(f, spec::CommGroup::WORLD, 12) == 8);
  f.gpus_per_node = 16; // DGX-2, 8 NICs: 16, though one node's collective runs 12
  f.nics_per_node = 8;
  CHECK(collectives::nccl_ctas(f, spec::CommGroup::WORLD, 12) == 16);
  f.nics_per_node = 20; // more NICs than GPUs: the GPUs bound it, and MAXCHANNELS
  CHECK(collectives::nccl_ctas(f, spec::CommGroup::WORLD, 24) == 32);
  f.tensor_parallel = 4; // data-parallel groups of 4 GPUs per node: 4 search channels
  CHECK(collectives::nccl_ctas(f, spec::CommGroup::DATA_PARALLEL, 24) == 8);
  f.nodes = 1; // one node: every group is inside it
  CHECK(collectives::nccl_ctas(f, spec::CommGroup::WORLD, 24) == 24);
}
