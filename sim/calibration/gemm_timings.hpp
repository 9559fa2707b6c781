// The GEMM timing CSV that `zerosim calibrate` fits the compute efficiency against: one timed matrix multiply per
// row (m, n, k, dtype, seconds). Format: docs/calibration-inputs.md. No YAML, no SimGrid.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace zerosim::calibration {

/// One timed GEMM: C[m x n] = A[m x k] · B[k x n] in `dtype`, taking `seconds` per call.
struct GemmTiming {
  std::int64_t m = 0;
  std::int64_t n = 0;
  std::int64_t k = 0;
  std::string dtype;  ///< "bf16", "fp16", "fp32" or "tf32"
  double seconds = 0; ///< positive and finite
  int line = 0;       ///< 1-based line of the CSV file where the row begins
};

/// The columns of a GEMM timing CSV, in the order messages list them.
const std::vector<std::string>& gemm_timing_columns();

/// The accepted dtypes: bf16, fp16, fp32, tf32.
const std::vector<std::string>& gemm_dtypes();

/// Reads the GEMM timing CSV at `path`. Throws core::InputError for a file that cannot be read and for every
/// malformed input, the message naming file, line and column: "gemm.csv:4: column 'm': expected a positive
/// integer (digits only), found '0'".
std::vector<GemmTiming> read_gemm_timings(const std::string& path);

/// Reads GEMM timings from `text`; `file` names it in messages.
std::vector<GemmTiming> read_gemm_timings_text(std::string_view text, const std::string& file);

/// FLOP/s the GEMM achieved: 2·m·n·k / seconds (one multiply and one add per term).
double achieved_flops(const GemmTiming& timing);

} // namespace zerosim::calibration
