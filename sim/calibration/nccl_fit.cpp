// nccl_fit.hpp: the latency-bandwidth fit of one nccl-tests table and its busbw multiplier.
#include "calibration/nccl_fit.hpp"

#include "collectives/nccl.hpp"
#include "core/error.hpp"

#include <Eigen/Dense>

#include <algorithm>
#include <cmath>

namespace zerosim::calibration {

int nccl_table_nodes(const NcclTestsTable& t, const spec::NodeSpec& node)
{
  if (t.nodes > 0)
    return t.nodes;
  if (t.ranks > 0 && t.ranks <= node.gpus)
    return 1;
  throw core::InputError(t.file + ": the table's device lines do not say on how many hosts its " +
                         std::to_string(t.ranks) + " ranks ran, and they do not fit in one node of " +
                         std::to_string(node.gpus) + " GPUs");
}

NcclFit fit_nccl_table(const NcclTestsTable& t)
{
  if (t.ranks < 2)
    throw core::InputError(t.file + ": the table does not state its ranks (no 'Rank N ... device' lines), so its bus "
                                    "bandwidth factor is unknown; give a table with its device lines");
  if (t.rows.size() < 2)
    throw core::InputError(t.file + ": " + std::to_string(t.rows.size()) +
                           " data row(s): a latency and a bandwidth need at least two sizes");
  const double f = busbw_factor(t.collective, t.ranks);
  // The rows the transport's bandwidth shows in: NCCL_FIT_MIN_CHECK_BYTES and above (below, protocol and algorithm
  // switches and launch overheads dominate, which one latency does not describe); all rows if fewer than two are.
  std::vector<const NcclTestsRow*> used;
  for (const NcclTestsRow& r : t.rows)
    if (r.size_bytes >= NCCL_FIT_MIN_CHECK_BYTES)
      used.push_back(&r);
  if (used.size() < 2) {
    used.clear();
    for (const NcclTestsRow& r : t.rows)
      used.push_back(&r);
  }
  // Minimise sum_i ((a + S_i f b) / t_i - 1)^2 over a (latency, us) and b (1 / busbw, us per byte).
  const auto n = static_cast<Eigen::Index>(used.size());
  Eigen::MatrixXd A(n, 2);
  Eigen::VectorXd y = Eigen::VectorXd::Ones(n);
  for (Eigen::Index i = 0; i < n; ++i) {
    const NcclTestsRow& r = *used[static_cast<std::size_t>(i)];
    A(i, 0) = 1.0 / r.oop_time_us;
    A(i, 1) = static_cast<double>(r.size_bytes) * f / r.oop_time_us;
  }
  Eigen::Vector2d x = A.colPivHouseholderQr().solve(y);
  if (x(0) < 0) { // no negative latency: the bandwidth alone
    x(0) = 0;
    x(1) = A.col(1).dot(y) / A.col(1).squaredNorm();
  }
  if (!(x(1) > 0))
    throw core::InputError(t.file + ": the times do not grow with the size; no bus bandwidth can be fitted");
  NcclFit fit;
  fit.latency_us = x(0);
  fit.busbw_GBps = 1.0 / x(1) / 1e3; // bytes per us -> 10^9 bytes per s
  fit.rows = static_cast<int>(n);
  for (const NcclTestsRow& r : t.rows) {
    if (r.size_bytes < NCCL_FIT_MIN_CHECK_BYTES)
      continue;
    const double model_time_us = fit.latency_us + static_cast<double>(r.size_bytes) * f * x(1);
    const double model_busbw = static_cast<double>(r.size_bytes) * f / model_time_us / 1e3;
    fit.max_deviation_pct = std::max(fit.max_deviation_pct, 100.0 * std::abs(model_busbw / r.oop_busbw_GBps - 1.0));
    ++fit.checked;
  }
  return fit;
}

namespace {

collectives::Fabric fabric_of(const NcclTestsTable& t, const spec::NodeSpec& node)
{
  collectives::Fabric f;
  f.nodes = nccl_table_nodes(t, node);
  f.gpus_per_node = std::max(1, t.ranks / f.nodes);
  f.nics_per_node = node.nics.count;
  f.intra_nvlink = node.nvlink.present;
  return f;
}

} // namespace

std::string nccl_transport_param(const NcclTestsTable& t, const spec::NodeSpec& node)
{
  if (nccl_table_nodes(t, node) > 1)
    return "busbw.net";
  return node.nvlink.present ? "busbw.nvlink" : "busbw.pcie";
}

double nccl_busbw_multiplier(const NcclTestsTable& t, const NcclFit& fit, const spec::NodeSpec& node)
{
  const collectives::Fabric f = fabric_of(t, node);
  const bool across = f.nodes > 1;
  double line_Bps = 0;
  if (across) {
    if (node.nics.count < 1 || !(node.nics.bandwidth_Bps > 0))
      throw core::InputError(t.file + ": the table ran on " + std::to_string(f.nodes) + " nodes, but node " +
                             node.name + " has no NICs");
    // nccl-tests' busbw across nodes is bounded by the NICs the channels use, one channel per NIC
    // (collectives::channels: min(NICs, GPUs per node)): 8 x 200 Gb/s NICs give the 192 GB/s of docs/collectives.md.
    line_Bps = node.nics.bandwidth_Bps * collectives::channels(f);
  } else {
    line_Bps = node.nvlink.present ? node.nvlink.bandwidth_Bps : node.pcie.bandwidth_Bps;
  }
  const double prior = line_Bps * collectives::achieved_fraction(f, across, collectives::Options{});
  return fit.busbw_GBps * 1e9 / prior;
}

} // namespace zerosim::calibration
