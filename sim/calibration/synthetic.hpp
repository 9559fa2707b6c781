// Synthetic recovery for `zerosim calibrate --synthetic TRUE_PROFILE` (docs/calibration.md "Synthetic recovery"):
// the observations keep their scenarios, metrics and sources, their measured values become the simulator's
// prediction at known multipliers times exp(noise z); the fit then starts at the priors as usual, and its result is
// set beside the truth. The noise comes from a generator of its own (splitmix64 and Box-Muller), seeded by the seed
// and each row's label, so that a run is reproducible byte for byte on any standard library.
#pragma once

#include "calibration/calibrate.hpp"
#include "core/json.hpp"

#include <cmath>
#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

namespace zerosim::calibration {

/// A standard normal deviate that depends only on (seed, label): splitmix64 from seed ^ FNV-1a 64 of the label,
/// two uniforms in (0, 1), Box-Muller's cosine branch. Not std::normal_distribution (its output is
/// implementation-defined).
double synthetic_normal(std::uint64_t seed, std::string_view label);

struct SyntheticOptions {
  std::string truth_file;              ///< the true profile (for the report)
  std::map<std::string, double> truth; ///< the true multipliers (a parameter it does not name is at its prior, 1)
  double noise = 0.03;                 ///< the sd of ln(measured / true prediction); in [0, 1)
  std::uint64_t seed = 1;
};

/// The observations with their primary figure replaced by the simulator's prediction at the truth (every other
/// parameter at its prior; the case's other figures are dropped) times exp(noise z), z = synthetic_normal(seed,
/// label). Rows the simulator cannot predict at the truth are left out, a line each in `dropped`.
std::vector<Observation> synthesize(const std::vector<Observation>& observations, const SyntheticOptions& options,
                                    const BatchPredictor& predict, std::vector<std::string>& dropped);

/// One parameter of the truth or of the fit, the fitted value beside the true one.
struct RecoveryRow {
  std::string name;
  double truth = 1;                 ///< the true multiplier (1 where the true profile leaves it at its prior)
  double fitted = 1;                ///< the fit's multiplier; the value it was held at when it was not fitted
  bool fit = false;                 ///< fitted (false: not informed by any row, or held fixed)
  std::optional<double> prior_pull; ///< (sd of the fit / sd of the prior)^2, in ln: the prior's share
  std::optional<double> sigma_ln;   ///< the fit's one standard deviation of ln(fitted)
  /// How many of the fit's standard deviations ln(fitted / true) is (none when not fitted or without a spread).
  std::optional<double> deviation_sd() const
  {
    if (!fit || !sigma_ln || !(*sigma_ln > 0))
      return std::nullopt;
    return std::log(fitted / truth) / *sigma_ln;
  }
  bool at_bound = false;
  int rows = 0;
  int sources = 0;
  std::string note; ///< why it was not fitted, at a bound, one source
  /// Judged: the truth sets it or the fit fitted it (a parameter no row informs that the truth leaves at its prior is
  /// listed, not judged).
  bool judged = true;
  double error() const { return fitted / truth - 1.0; }
};

struct Recovery {
  std::vector<RecoveryRow> rows; ///< by name
  double tolerance = 0.05;       ///< |fitted / true - 1| within which a parameter counts as recovered
  /// The fit's cost (docs/calibration.md "The fit": weighted Huber data cost plus the priors' penalty over the fitted
  /// parameters) at the fitted multipliers and at the true ones, on the simulator's predictions: the fit has found
  /// the minimum it aims at when the first is not above the second, and a parameter it misses then is the
  /// estimator's bias (the priors' pull), not the optimiser's stop.
  double cost_fit = 0, cost_truth = 0;
  /// Whether the two costs compare: false when a parameter the runs use is held (not fitted) away from its true
  /// value, so that the fit cannot reach the truth's residuals.
  bool costs_compare = true;
  int judged() const;
  int recovered() const;
  /// "recovered: 9 of 13 parameters within 5 % ..." naming those that were not.
  std::string verdict() const;
  bool within(const RecoveryRow& r) const { return r.fit && std::abs(r.error()) <= tolerance; }
};

/// The fit's parameters set beside the truth: every parameter the truth names or the fit fitted; one the fit left
/// at its prior (uninformed, or left out of `fit.params`) or held fixed (`fit.fixed`: --nccl / --gemm) is reported as
/// not fitted, never hidden. `used`: the parameters the observations' runs use (applicable_params). The costs use
/// the rows' labels to give back each row's noise (its prediction at the truth is measured / exp(noise z)); `fit`
/// gives the Huber threshold and the fixed parameters.
Recovery recovery(const CalibrationResult& r, const SyntheticOptions& options, const CalibrateOptions& fit,
                  const std::set<std::string>& used, double tolerance = 0.05);

/// The report's "Synthetic recovery" section (markdown): how the data were made, the table and the verdict.
std::string recovery_markdown(const Recovery& rec, const SyntheticOptions& options, int rows);

/// The same as the --json report's "synthetic" object.
core::Json recovery_json(const Recovery& rec, const SyntheticOptions& options, int rows);

} // namespace zerosim::calibration
