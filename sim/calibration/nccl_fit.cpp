// nccl_fit.hpp: the fits of one nccl-tests table (the planner's prediction, or one latency and one bandwidth) and
// its busbw multiplier.
#include "calibration/nccl_fit.hpp"

#include "core/error.hpp"

#include <Eigen/Dense>

#include <algorithm>
#include <cmath>
#include <limits>

namespace zerosim::calibration {

namespace {

/// The rows a fit uses: those >= NCCL_FIT_MIN_CHECK_BYTES, or all when fewer than `min_rows` are.
std::vector<const NcclTestsRow*> fitted_rows(const NcclTestsTable& t, std::size_t min_rows)
{
  std::vector<const NcclTestsRow*> used;
  for (const NcclTestsRow& r : t.rows)
    if (r.size_bytes >= NCCL_FIT_MIN_CHECK_BYTES)
      used.push_back(&r);
  if (used.size() < min_rows) {
    used.clear();
    for (const NcclTestsRow& r : t.rows)
      used.push_back(&r);
  }
  return used;
}

} // namespace

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
  const std::vector<const NcclTestsRow*> used = fitted_rows(t, 2);
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

std::string nccl_transport_param(const NcclTestsTable& t, const spec::NodeSpec& node)
{
  if (nccl_table_nodes(t, node) > 1)
    return "busbw.net";
  return node.nvlink.present ? "busbw.nvlink" : "busbw.pcie";
}

double nccl_busbw_multiplier(const NcclTestsTable& t, const NcclFit& fit, const spec::NodeSpec& node)
{
  const collectives::Fabric f = nccl_table_fabric(t, node);
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

bool nccl_planner_models(NcclCollective c)
{
  return c == NcclCollective::ALL_REDUCE || c == NcclCollective::ALL_GATHER || c == NcclCollective::REDUCE_SCATTER;
}

collectives::Fabric nccl_table_fabric(const NcclTestsTable& t, const spec::NodeSpec& node, double network_latency_s)
{
  spec::ClusterSpec c;
  c.node = node;
  c.nodes = nccl_table_nodes(t, node);
  c.gpus_per_node = std::max(1, t.ranks / c.nodes);
  c.network.nic_bandwidth_Bps = node.nics.bandwidth_Bps;
  c.network.nics_per_node = node.nics.count;
  c.network.latency_s = network_latency_s;
  return collectives::fabric_of(c);
}

namespace {

/// The planner's model of one table: its plan of a size with the multiplier m on the table's transport.
struct PlannedModel {
  spec::CollectiveKind kind = spec::CollectiveKind::ALL_REDUCE;
  collectives::Fabric fabric;
  std::string param;

  collectives::Plan plan(std::int64_t bytes, double m) const
  {
    collectives::Options o;
    if (fabric.nodes > 1)
      o.focus_node = 0; // the same predicted_s as the full plan (docs/collectives.md "Symmetric replay"), fewer flows
    if (param == "busbw.net")
      o.busbw_factor_net = m;
    else if (param == "busbw.nvlink")
      o.busbw_factor_nvlink = m;
    else
      o.busbw_factor_pcie = m;
    return collectives::plan(kind, bytes, fabric, o);
  }
  double time_us(std::int64_t bytes, double m) const { return plan(bytes, m).predicted_s * 1e6; }
};

spec::CollectiveKind planner_kind(NcclCollective c)
{
  switch (c) {
  case NcclCollective::ALL_GATHER:
    return spec::CollectiveKind::ALL_GATHER;
  case NcclCollective::REDUCE_SCATTER:
    return spec::CollectiveKind::REDUCE_SCATTER;
  default:
    return spec::CollectiveKind::ALL_REDUCE;
  }
}

/// For the model times `p` (us) of the measured times `t`: the latency a >= 0 minimising sum ((p + a) / t - 1)^2
/// (0 when `fit_latency` is off), and that sum.
std::pair<double, double> best_latency(const std::vector<double>& p, const std::vector<double>& t, bool fit_latency)
{
  double a = 0;
  if (fit_latency) {
    double num = 0, den = 0;
    for (std::size_t i = 0; i < p.size(); ++i) {
      num += (1.0 - p[i] / t[i]) / t[i];
      den += 1.0 / (t[i] * t[i]);
    }
    a = std::max(0.0, num / den);
  }
  double sum = 0;
  for (std::size_t i = 0; i < p.size(); ++i)
    sum += std::pow((p[i] + a) / t[i] - 1.0, 2);
  return {a, sum};
}

/// The check over the rows >= NCCL_FIT_MIN_CHECK_BYTES of the planner with multiplier m and latency a (us).
std::vector<NcclFitRow> planned_rows(const NcclTestsTable& t, const PlannedModel& model, double m, double a)
{
  const double f = busbw_factor(t.collective, t.ranks);
  std::vector<NcclFitRow> out;
  for (const NcclTestsRow& r : t.rows) {
    if (r.size_bytes < NCCL_FIT_MIN_CHECK_BYTES)
      continue;
    const collectives::Plan p = model.plan(r.size_bytes, m);
    NcclFitRow row;
    row.size_bytes = r.size_bytes;
    row.measured_time_us = r.oop_time_us;
    row.measured_busbw_GBps = r.oop_busbw_GBps;
    row.model_time_us = p.predicted_s * 1e6 + a;
    row.model_busbw_GBps = static_cast<double>(r.size_bytes) * f / row.model_time_us / 1e3;
    row.deviation_pct = 100.0 * (row.model_busbw_GBps / r.oop_busbw_GBps - 1.0);
    row.algorithm = p.algorithm;
    row.protocol = p.protocol;
    out.push_back(row);
  }
  return out;
}

double max_abs_deviation(const std::vector<NcclFitRow>& rows)
{
  double worst = 0;
  for (const NcclFitRow& r : rows)
    worst = std::max(worst, std::abs(r.deviation_pct));
  return worst;
}

} // namespace

NcclFit fit_nccl_table(const NcclTestsTable& t, const spec::NodeSpec& node, double network_latency_s)
{
  if (!nccl_planner_models(t.collective)) {
    NcclFit fit = fit_nccl_table(t);
    fit.param = nccl_transport_param(t, node);
    fit.multiplier = nccl_busbw_multiplier(t, fit, node);
    return fit;
  }
  if (t.ranks < 2)
    throw core::InputError(t.file + ": the table does not state its ranks (no 'Rank N ... device' lines), so the "
                                    "planner cannot lay out its cluster; give a table with its device lines");
  if (t.rows.empty())
    throw core::InputError(t.file + ": no data row to fit");
  PlannedModel model;
  model.kind = planner_kind(t.collective);
  model.fabric = nccl_table_fabric(t, node, network_latency_s);
  model.param = nccl_transport_param(t, node);
  const collectives::Fabric& fab = model.fabric;
  if (t.ranks % fab.nodes != 0 || fab.gpus_per_node > node.gpus)
    throw core::InputError(t.file + ": " + std::to_string(t.ranks) + " ranks on " + std::to_string(fab.nodes) +
                           " node(s) do not fit nodes of " + std::to_string(node.gpus) + " GPUs (node " + node.name +
                           ")");
  if (fab.nodes > 1 && (node.nics.count < 1 || !(node.nics.bandwidth_Bps > 0)))
    throw core::InputError(t.file + ": the table ran on " + std::to_string(fab.nodes) + " nodes, but node " +
                           node.name + " has no NICs");

  const std::vector<const NcclTestsRow*> used = fitted_rows(t, 1);
  const bool fit_latency = used.size() >= 2; // one row holds one unknown: the multiplier
  std::vector<double> measured;
  for (const NcclTestsRow* r : used)
    measured.push_back(r->oop_time_us);
  const auto objective = [&](double m) {
    std::vector<double> p;
    for (const NcclTestsRow* r : used)
      p.push_back(model.time_us(r->size_bytes, m));
    return best_latency(p, measured, fit_latency);
  };

  // The multiplier: a log-spaced scan (the objective is piecewise smooth: the plan's protocol and algorithm switch
  // with m; flat where the achieved fraction reaches line rate), then golden-section search around the best point.
  constexpr double M_LO = 0.05, M_HI = 4.0;
  constexpr int SCAN = 240;
  std::vector<double> grid(SCAN + 1);
  for (int i = 0; i <= SCAN; ++i)
    grid[static_cast<std::size_t>(i)] = M_LO * std::pow(M_HI / M_LO, static_cast<double>(i) / SCAN);
  std::size_t best = 0;
  double best_sum = std::numeric_limits<double>::infinity();
  for (std::size_t i = 0; i < grid.size(); ++i) {
    const double sum = objective(grid[i]).second;
    if (sum < best_sum * (1 - 1e-12)) {
      best_sum = sum;
      best = i;
    }
  }
  double m = grid[best];
  {
    double lo = grid[best == 0 ? 0 : best - 1], hi = grid[std::min(best + 1, grid.size() - 1)];
    const double g = (std::sqrt(5.0) - 1) / 2;
    double x1 = hi - g * (hi - lo), x2 = lo + g * (hi - lo);
    double f1 = objective(x1).second, f2 = objective(x2).second;
    for (int it = 0; it < 60; ++it) {
      if (f1 <= f2) {
        hi = x2;
        x2 = x1;
        f2 = f1;
        x1 = hi - g * (hi - lo);
        f1 = objective(x1).second;
      } else {
        lo = x1;
        x1 = x2;
        f1 = f2;
        x2 = lo + g * (hi - lo);
        f2 = objective(x2).second;
      }
    }
    const double x = f1 <= f2 ? x1 : x2;
    if (std::min(f1, f2) < best_sum)
      m = x;
  }
  {
    // Where the objective is flat (the achieved fraction capped at line rate), the smallest m of that flat: bisect
    // between the scan point below and m for the first m that does as well.
    const double target = objective(m).second * (1 + 1e-9);
    double lo = grid[best == 0 ? 0 : best - 1];
    for (int it = 0; it < 60 && lo < m; ++it) {
      const double mid = (lo + m) / 2;
      if (objective(mid).second <= target)
        m = mid;
      else
        lo = mid;
    }
  }
  const double latency_us = objective(m).first;

  NcclFit fit;
  fit.model = "planner";
  fit.param = model.param;
  fit.multiplier = m;
  fit.latency_us = latency_us;
  fit.rows = static_cast<int>(used.size());
  // The bus bandwidth with m for very large sizes: S·f over what a doubling of S adds to the time.
  constexpr std::int64_t HUGE_BYTES = std::int64_t{1} << 40;
  const double extra_us = model.time_us(2 * HUGE_BYTES, m) - model.time_us(HUGE_BYTES, m);
  fit.busbw_GBps = static_cast<double>(HUGE_BYTES) * busbw_factor(t.collective, t.ranks) / extra_us / 1e3;
  fit.checked_rows = planned_rows(t, model, m, latency_us);
  fit.checked = static_cast<int>(fit.checked_rows.size());
  fit.max_deviation_pct = max_abs_deviation(fit.checked_rows);
  fit.prior_max_deviation_pct = max_abs_deviation(planned_rows(t, model, 1.0, 0.0));
  return fit;
}

} // namespace zerosim::calibration
