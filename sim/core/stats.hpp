// Error statistics of predictions beside measurements, for every report that judges the model against data (the
// validation reports, the calibration's report and GEMM fit): the median and 90th percentile of |error| over a group of
// signed errors in percent, and their Markdown table.
#pragma once

#include <ostream>
#include <string>
#include <vector>

namespace zerosim::core {

/// Median and 90th percentile of |error| over a group of comparisons.
struct ErrorStats {
  std::string group; ///< e.g. "source S09", "stage 3", "offload none", "overall"
  int n = 0;
  double median_abs_pct = 0;
  double p90_abs_pct = 0; ///< linear interpolation between order statistics (numpy's default)
  /// Median of the signed errors, in the direction of the caller's: memory, + = predicted above measured; time and
  /// throughput (validation::signed_error_pct), + = predicted faster than measured.
  double median_signed_pct = 0;
};

/// Median and 90th percentile of the absolute values of `errors_pct` (signed errors, in percent), and the median of
/// the signed values.
ErrorStats error_stats(const std::string& group, std::vector<double> errors_pct);

/// The Markdown table of median and 90th-percentile absolute errors, one row per group; "(none)" when empty.
void error_stats_table(std::ostream& md, const std::vector<ErrorStats>& stats);

} // namespace zerosim::core
