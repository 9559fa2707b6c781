// A transport from nccl-tests (docs/calibration.md "nccl-tests"): one table's times fitted to t(S) = latency +
// S·f / busbw (f: nccl-tests' bus-bandwidth factor of the collective), and the busbw multiplier of spec's
// calibration registry that makes the model's achieved fraction give that bus bandwidth on the table's cluster.
#pragma once

#include "calibration/nccl_tests.hpp"
#include "spec/node_spec.hpp"

#include <string>

namespace zerosim::calibration {

/// Sizes from this up are fitted and checked (1 MiB: below it NCCL switches protocols and algorithms).
inline constexpr std::int64_t NCCL_FIT_MIN_CHECK_BYTES = 1 << 20;

struct NcclFit {
  double busbw_GBps = 0;        ///< the fitted large-message bus bandwidth, 10^9 B/s
  double latency_us = 0;        ///< the fitted per-call latency, microseconds (>= 0)
  int rows = 0;                 ///< rows fitted
  double max_deviation_pct = 0; ///< max |model busbw / measured busbw - 1| over rows >= NCCL_FIT_MIN_CHECK_BYTES, %
  int checked = 0;              ///< rows in that check
};

/// Fits `t`'s out-of-place times: relative least squares of latency + S·f·(1/busbw) against the measured time (a
/// linear problem in latency and 1/busbw), latency held at 0 when the free fit makes it negative. Throws
/// core::InputError (naming the file) for a table with fewer than two rows or ranks it does not state.
NcclFit fit_nccl_table(const NcclTestsTable& t);

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
