// `zerosim calibrate` (docs/calibration.md): fits the named multipliers of spec::param_families() to measured
// figures, on a surrogate linear in ln(multiplier) that the simulator re-linearises until it agrees with it, then
// judges the fit leave-one-source-out. The simulations run in the validation's worker pool (one SimGrid engine per
// process).
#pragma once

#include "calibration/fit.hpp"
#include "spec/calibration_spec.hpp"
#include "validation/run_validation.hpp"

#include <functional>
#include <map>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

namespace zerosim::calibration {

/// One measured figure the fit may use: a case (scenario and its primary figure, figures[0]) and its source.
struct Observation {
  validation::ThroughputCase c;
  std::string label;  ///< the row id, or file:line of a runs CSV
  std::string source; ///< what the weights and the folds group by
};

/// How predictions are made: the validation's worker pool over validation::predict_case by default; tests pass a
/// stand-in (a closed-form model) that runs in the same process.
using BatchPredictor =
    std::function<std::vector<validation::RowOutcome>(const std::vector<validation::ThroughputCase>&)>;

/// What the validation's fit and the shipped profile hold at their priors (docs/calibration.md "The shipped
/// profile"): every GPU kind's HBM fraction and the NVLink and PCIe bus bandwidths. On the validation data those
/// parameters went past what the hardware can do (hbm.A100 and hbm.V100 above the line rate once multiplied,
/// busbw.nvlink at its upper bound, 1.04 of NVLink's line rate): they stood in for something other than what they
/// name, so they are not fitted.
inline const std::vector<std::string> SHIPPED_HELD = {"hbm", "busbw.nvlink", "busbw.pcie"};

/// `held` as the command line writes it ("hbm,busbw.nvlink,busbw.pcie").
std::string held_list(const std::vector<std::string>& held);

/// The worker-pool predictor (`jobs` processes, `row_time_limit_s` each).
BatchPredictor pool_predictor(int jobs, double row_time_limit_s);

struct CalibrateOptions {
  /// Parameters to fit, by name; empty: every parameter that some observation's scenario uses (its GPU kind's
  /// gemm/hbm/attention, the transports it crosses, its framework's host cost, interference).
  std::vector<std::string> params;
  /// Parameters held at a value for every simulation and left out of the fit (an nccl-tests fit of a transport).
  std::map<std::string, double> fixed;
  /// Parameters held at their priors and left out of the default set (--hold): a name ("busbw.nvlink") or a family
  /// ("hbm": every GPU kind's). Ignored when `params` names the set.
  std::vector<std::string> held;
  bool loso = true;             ///< leave-one-source-out after the fit
  int max_linearisations = 6;   ///< re-linearise while the surrogate is off by more than 2 % on some row
  double initial_radius = 0.3;  ///< the first trust region, in ln(multiplier)
  double converged_step = 0.01; ///< an accepted step below this (in ln) ends the iteration
  /// Huber's threshold on |ln predicted - ln measured| (docs/calibration.md): 0.1, twice DATA_SIGMA. A row beyond it
  /// (a source with a mechanism the model lacks) pulls linearly, not quadratically, on the parameters.
  double huber_threshold = 0.1;
  double step = 0.1;              ///< the Jacobian's step in ln(multiplier), taken downwards (a cap never hides it)
  double inform_threshold = 1e-3; ///< |d ln prediction / d ln multiplier| at which a row informs a parameter
  /// A parameter whose prior holds more than this share of its variance at the priors (prior_share) is left at its
  /// prior: 0.5, where the data and the prior fix it equally. 1 fits every informed parameter.
  double identified_share = 0.5;
  std::ostream* progress = nullptr;
};

/// What the fit knows of one parameter.
struct ParameterResult {
  std::string name;
  spec::ParamFamilyInfo family;
  double value = 1;    ///< the fitted multiplier
  double sigma_ln = 0; ///< one standard deviation of ln(value)
  bool at_bound = false;
  int rows = 0;                     ///< rows that inform it
  std::vector<std::string> sources; ///< sources that inform it
  std::optional<double> loso_min, loso_max;
};

/// One observation's figures.
struct RowResult {
  std::string label;
  std::string source;
  validation::TimeMetric metric = validation::TimeMetric::STEP_TIME;
  double measured = 0;
  double prior = 0;           ///< predicted at the priors (the linearisation's first point)
  double fitted = 0;          ///< predicted by the simulator at the fitted multipliers
  double surrogate = 0;       ///< the surrogate's prediction at the fitted multipliers
  std::optional<double> loso; ///< predicted by the simulator with the fold that leaves its source out
  std::string group;          ///< GPU kind x framework (the accuracy band's group)
};

struct CalibrationResult {
  std::vector<ParameterResult> params;
  std::vector<RowResult> rows;      ///< the observations predicted at every stage, in input order
  std::vector<std::string> dropped; ///< observations the simulator could not predict, with why
  /// Parameters left at their prior because no row informs them (default set) or the data fix them less than their
  /// priors do: "name: why".
  std::vector<std::string> uninformed;
  double max_surrogate_deviation = 0; ///< max |ln fitted - ln surrogate| over rows, in-sample
  /// The same for each leave-one-source-out fold: its own surrogate against the simulator on the rows it fitted, at
  /// its multipliers (each fold is a fit on the simulator of its own, re-linearised until they agree).
  double max_loso_surrogate_deviation = 0;
  /// How far the in-sample surrogate, extrapolated to each fold's multipliers, misses the simulator on the fold's
  /// held-out rows (max |ln|): a measure of how far the folds move, not of any figure reported (those are simulated).
  double max_heldout_extrapolation = 0;
  int linearisations = 0;                                                   ///< of the in-sample fit
  int simulations = 0;                                                      ///< every simulation, the folds' included
  std::map<std::string, std::vector<std::pair<std::string, double>>> folds; ///< source -> (parameter, multiplier)
};

/// The applicable parameter names of one scenario (structural: what its run uses).
std::vector<std::string> applicable_params(const spec::Scenario& s);

/// Fits. Throws core::InputError (exit 2) when there are fewer usable rows than parameters, when a parameter named in
/// options.params is unknown or informed by no row, or when no observation can be predicted.
CalibrationResult calibrate(const std::vector<Observation>& observations, const CalibrateOptions& options,
                            const BatchPredictor& predict);

/// The fit's weight of each row from the rows' sources (docs/calibration.md "Weights"): every source weighs the same
/// in all, its rows sharing its weight, the weights averaging 1 / DATA_SIGMA^2 (5 %) per row.
std::vector<double> row_weights(const std::vector<std::string>& sources);

/// ln of the figure a case's primary metric compares, from its predicted figures.
double predicted_figure(const validation::ThroughputCase& c, const validation::PredictedFigures& p);

/// The signed error in percent of a prediction (validation::signed_error_pct: + = predicted faster).
double row_error_pct(const RowResult& r, double predicted);

} // namespace zerosim::calibration
