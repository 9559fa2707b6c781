// A transport from nccl-tests (docs/calibration.md "nccl-tests", docs/calibration-nccl-tests.md "The fit"): one
// table's times fitted either to the project's own NCCL planner (collectives::plan, its predicted_s with a fitted
// busbw multiplier and latency on the table's cluster of a given node), or, without a node, to t(S) = latency +
// S·f / busbw (f: nccl-tests' bus-bandwidth factor of the collective), with the busbw multiplier of spec's
// calibration registry that makes the model's achieved fraction give that bus bandwidth on the table's cluster.
#pragma once

#include "calibration/nccl_tests.hpp"
#include "collectives/nccl.hpp"
#include "spec/node_spec.hpp"

#include <cstdint>
#include <string>
#include <vector>

namespace zerosim::calibration {

/// Sizes from this up are fitted and checked (1 MiB: below it NCCL switches protocols and algorithms).
inline constexpr std::int64_t NCCL_FIT_MIN_CHECK_BYTES = 1 << 20;

/// The network's one-way NIC-to-NIC latency the planned fit assumes (a table does not state it): the scenario
/// loader's default for cluster.network.latency, NCCL's network step (tuning.cc hwLat[NET], Tree LL, 5.0 us).
inline constexpr double NCCL_FIT_NETWORK_LATENCY_S = 5e-6;

/// One checked row (size >= NCCL_FIT_MIN_CHECK_BYTES) of a fit: the model against the measured out-of-place row.
struct NcclFitRow {
  std::int64_t size_bytes = 0;
  double measured_time_us = 0;
  double measured_busbw_GBps = 0;
  double model_time_us = 0;
  double model_busbw_GBps = 0;
  double deviation_pct = 0; ///< 100 (model busbw / measured busbw - 1), signed
  /// The planner's plan at the fitted multiplier ("ring", "tree") and protocol; "" for the latency-bandwidth fit.
  std::string algorithm;
  collectives::Protocol protocol = collectives::Protocol::SIMPLE;
};

struct NcclFit {
  double busbw_GBps = 0;        ///< the fitted large-message bus bandwidth, 10^9 B/s
  double latency_us = 0;        ///< the fitted per-call latency, microseconds (>= 0); planned: beyond the planner's
  int rows = 0;                 ///< rows fitted
  double max_deviation_pct = 0; ///< max |model busbw / measured busbw - 1| over rows >= NCCL_FIT_MIN_CHECK_BYTES, %
  int checked = 0;              ///< rows in that check
  // ---- The planned fit (fit_nccl_table with a node) ----
  /// "planner" (collectives::plan's predicted_s) or "latency-bandwidth" (t = latency + S·f / busbw).
  std::string model = "latency-bandwidth";
  std::string param;     ///< the multiplier's parameter (nccl_transport_param); "" for the latency-bandwidth fit
  double multiplier = 0; ///< the fitted multiplier on that parameter's prior; 0 for the latency-bandwidth fit
  /// The same check at the prior (multiplier 1, no latency): how far the uncalibrated model is, %.
  double prior_max_deviation_pct = 0;
  std::vector<NcclFitRow> checked_rows; ///< the rows of that check, by size
};

/// Fits `t`'s out-of-place times: relative least squares of latency + S·f·(1/busbw) against the measured time (a
/// linear problem in latency and 1/busbw), latency held at 0 when the free fit makes it negative. Throws
/// core::InputError (naming the file) for a table with fewer than two rows or ranks it does not state.
NcclFit fit_nccl_table(const NcclTestsTable& t);

/// Whether collectives::plan models `c` (all-reduce, all-gather, reduce-scatter: the collectives the schedule
/// issues); broadcast, reduce, all-to-all and send/recv are not planned.
bool nccl_planner_models(NcclCollective c);

/// The planner's fabric of the table's cluster of `node`s (collectives::fabric_of, as the engine derives it): nodes
/// from nccl_table_nodes, ranks / nodes GPUs per node, the node's NICs at their bandwidth, `network_latency_s`.
collectives::Fabric nccl_table_fabric(const NcclTestsTable& t, const spec::NodeSpec& node,
                                      double network_latency_s = NCCL_FIT_NETWORK_LATENCY_S);

/// The planned fit: the model time of a size S is collectives::plan(kind, S, nccl_table_fabric(t, node), options
/// with the table's multiplier m).predicted_s + latency, where m is Options::busbw_factor_net across nodes, else
/// _nvlink or _pcie by the node (nccl_transport_param), so that the plan chooses its algorithm and protocol as the
/// engine's would under that profile. m and latency (>= 0; fitted only with two rows or more) minimise the relative
/// least squares of the model time against the measured out-of-place time over the rows >= NCCL_FIT_MIN_CHECK_BYTES
/// (all rows if none is), m by a scan and golden-section refinement over [0.05, 4] (the planner caps the achieved
/// fraction at line rate, so the objective is flat past it; the smallest such m is taken). busbw_GBps is the model's
/// bus bandwidth with m for very large sizes (S·f over the time a doubling of S adds). Collectives the planner does
/// not model (nccl_planner_models) get the latency-bandwidth fit and nccl_busbw_multiplier, model
/// "latency-bandwidth". Throws core::InputError as fit_nccl_table(t), and for a table the node cannot hold
/// (nccl_table_nodes, nccl_busbw_multiplier).
NcclFit fit_nccl_table(const NcclTestsTable& t, const spec::NodeSpec& node,
                       double network_latency_s = NCCL_FIT_NETWORK_LATENCY_S);

/// The model's bus-bandwidth parameter a table measures: "busbw.net" across nodes, else "busbw.nvlink" or
/// "busbw.pcie" by the node.
std::string nccl_transport_param(const NcclTestsTable& t, const spec::NodeSpec& node);

/// The multiplier on that parameter's prior fraction that gives `fit.busbw_GBps` on the table's cluster of `node`s:
/// busbw / (line rate x collectives::achieved_fraction at the prior). The line rate is the NVLink or PCIe figure per
/// GPU inside a node; across nodes the NIC rate x the channels (min(NICs, GPUs per node)), as nccl-tests counts busbw.
/// Throws core::InputError when the node has no such link.
double nccl_busbw_multiplier(const NcclTestsTable& t, const NcclFit& fit, const spec::NodeSpec& node);

/// The table's nodes: the distinct hosts of its device lines, else 1 when its ranks fit in one node.
int nccl_table_nodes(const NcclTestsTable& t, const spec::NodeSpec& node);

} // namespace zerosim::calibration
