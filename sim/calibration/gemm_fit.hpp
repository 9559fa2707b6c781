// A GPU kind's GEMM fraction from a GEMM sweep (docs/calibration.md "GEMM sweeps"): the multiplier on
// calibration/kernels.yaml's `gemm` that makes the compute model's time of each timed GEMM (compute::op_time: the
// roofline with tile and wave quantisation and the launch overhead) closest to the measured ones.
#pragma once

#include "calibration/gemm_timings.hpp"
#include "spec/scenario_spec.hpp"

#include <string>
#include <vector>

namespace zerosim::calibration {

struct GemmFit {
  std::string param;                ///< "gemm.<kind>"
  double multiplier = 1;            ///< within the gemm family's bounds
  int rows = 0;                     ///< timings fitted (bf16, fp16, tf32)
  int skipped_fp32 = 0;             ///< fp32 timings left out (the model prices fp32 matmuls at the TF32 peak)
  double prior_median_abs_pct = 0;  ///< median |model time / measured - 1| at multiplier 1, %
  double fitted_median_abs_pct = 0; ///< the same at the fitted multiplier
  bool at_bound = false;
};

/// The model's seconds for one timed GEMM on the GPU of `s` with `gemm_factor` as `gemm.<kind>`.
double model_gemm_seconds(const GemmTiming& g, const spec::Scenario& s, double gemm_factor);

/// Fits the multiplier: least squares on ln(model / measured) over the timings with the gemm family's prior and
/// bounds (a one-dimensional minimisation by golden section; the model time falls monotonically with the
/// multiplier). `s` gives the GPU (its node) and the kernel data. Throws core::InputError when no timing can be
/// fitted (all fp32).
GemmFit fit_gemm_timings(const std::vector<GemmTiming>& timings, const spec::Scenario& s);

} // namespace zerosim::calibration
