// gemm_fit.hpp: the GEMM fraction of a GPU kind from timed GEMMs.
#include "calibration/gemm_fit.hpp"

#include "compute/compute_model.hpp"
#include "core/error.hpp"
#include "core/stats.hpp"
#include "spec/calibration_spec.hpp"

#include <algorithm>
#include <cmath>

namespace zerosim::calibration {
namespace {

/// The spread assumed for one timed GEMM's ln(seconds) (as DATA_SIGMA of the runs fit: a few percent of run-to-run
/// noise and clock variation).
constexpr double GEMM_SIGMA = 0.05;

spec::Precision precision_of(const std::string& dtype)
{
  if (dtype == "bf16")
    return spec::Precision::BF16;
  if (dtype == "fp16")
    return spec::Precision::FP16;
  return spec::Precision::FP32; // tf32: the FP32 matmul at the tf32 peak (compute::peak_flops)
}

double bytes_of(const std::string& dtype)
{
  return dtype == "bf16" || dtype == "fp16" ? 2.0 : 4.0;
}

} // namespace

double model_gemm_seconds(const GemmTiming& g, const spec::Scenario& s, double gemm_factor)
{
  spec::Scenario t = s;
  compute::GpuEfficiency e = compute::gpu_efficiency(t);
  t.calibration.factors["gemm." + e.kind] = gemm_factor;
  e = compute::gpu_efficiency(t);
  workload::Op op;
  op.name = "gemm";
  op.kind = workload::OpKind::GEMM;
  op.m = g.m;
  op.n = g.n;
  op.k = g.k;
  op.fwd_flops = 2.0 * static_cast<double>(g.m) * static_cast<double>(g.n) * static_cast<double>(g.k);
  // A[m x k], B[k x n] read, C[m x n] written once.
  op.fwd_bytes = bytes_of(g.dtype) * (static_cast<double>(g.m) * static_cast<double>(g.k) +
                                      static_cast<double>(g.k) * static_cast<double>(g.n) +
                                      static_cast<double>(g.m) * static_cast<double>(g.n));
  return compute::op_time(op, false, t.cluster.node.gpu, precision_of(g.dtype), e);
}

GemmFit fit_gemm_timings(const std::vector<GemmTiming>& timings, const spec::Scenario& s)
{
  GemmFit f;
  const compute::GpuEfficiency e = compute::gpu_efficiency(s);
  f.param = "gemm." + e.kind;
  std::vector<const GemmTiming*> used;
  for (const GemmTiming& g : timings) {
    if (g.dtype == "fp32")
      ++f.skipped_fp32;
    else
      used.push_back(&g);
  }
  if (used.empty())
    throw core::InputError("zerosim calibrate: --gemm: no bf16, fp16 or tf32 timing to fit (fp32 matmuls are priced "
                           "at the TF32 peak, so fp32 rows are not used)");
  f.rows = static_cast<int>(used.size());
  const spec::ParamFamilyInfo fam = *spec::param_family_of(f.param);
  auto cost = [&](double x) {
    double c = 0;
    for (const GemmTiming* g : used) {
      const double r = std::log(model_gemm_seconds(*g, s, std::exp(x)) / g->seconds) / GEMM_SIGMA;
      c += r * r;
    }
    return c + std::pow(x / fam.prior_sigma, 2);
  };
  // Golden section over [ln lower, ln upper]: the cost is unimodal (the model time is monotone in the multiplier).
  double a = std::log(fam.lower), b = std::log(fam.upper);
  const double phi = (std::sqrt(5.0) - 1) / 2;
  double c = b - phi * (b - a), d = a + phi * (b - a);
  double fc = cost(c), fd = cost(d);
  while (b - a > 1e-7) {
    if (fc < fd) {
      b = d;
      d = c;
      fd = fc;
      c = b - phi * (b - a);
      fc = cost(c);
    } else {
      a = c;
      c = d;
      fc = fd;
      d = a + phi * (b - a);
      fd = cost(d);
    }
  }
  const double x = (a + b) / 2;
  f.multiplier = std::exp(x);
  f.at_bound = x <= std::log(fam.lower) + 1e-5 || x >= std::log(fam.upper) - 1e-5;
  std::vector<double> before, after;
  for (const GemmTiming* g : used) {
    before.push_back(100.0 * (model_gemm_seconds(*g, s, 1.0) / g->seconds - 1.0));
    after.push_back(100.0 * (model_gemm_seconds(*g, s, f.multiplier) / g->seconds - 1.0));
  }
  f.prior_median_abs_pct = core::error_stats("", before).median_abs_pct;
  f.fitted_median_abs_pct = core::error_stats("", after).median_abs_pct;
  return f;
}

} // namespace zerosim::calibration
