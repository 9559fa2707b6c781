// validate_fit.hpp: the fit's in-sample and leave-one-source-out errors on the validation's whole-step rows.
#include "calibration/validate_fit.hpp"

#include "calibration/calibrate.hpp"
#include "calibration/calibrate_command.hpp"
#include "core/error.hpp"
#include "validation/run_validation.hpp"

#include <cmath>
#include <map>

namespace zerosim::calibration {

namespace {

/// The fit's figures as the report shows them, by row id.
validation::CalibratedErrors calibrated_errors(const CalibrationResult& fit, const std::vector<Observation>& obs)
{
  std::map<std::string, std::string> row_of; // observation label -> row id
  for (const Observation& o : obs)
    row_of[o.label] = o.c.info.row_id;
  validation::CalibratedErrors k;
  for (const RowResult& r : fit.rows) {
    const std::string& id = row_of.at(r.label);
    k.in_sample_pct[id] = row_error_pct(r, r.fitted);
    if (r.loso)
      k.loso_pct[id] = row_error_pct(r, *r.loso);
  }
  for (const ParameterResult& p : fit.params) {
    validation::FittedParameter f;
    f.name = p.name;
    f.value = p.value;
    f.fold_min = p.loso_min;
    f.fold_max = p.loso_max;
    f.at_bound = p.at_bound;
    f.sources = static_cast<int>(p.sources.size());
    if (p.sources.size() == 1)
      f.note = "one source informs it (" + p.sources.front() + "): at its prior in that source's fold";
    if (p.at_bound)
      f.note += std::string(f.note.empty() ? "" : "; ") + "AT ITS BOUND";
    k.params.push_back(f);
  }
  k.unfitted = fit.uninformed;
  k.max_surrogate_deviation_pct = 100.0 * (std::exp(fit.max_surrogate_deviation) - 1.0);
  k.max_loso_surrogate_deviation_pct = 100.0 * (std::exp(fit.max_loso_surrogate_deviation) - 1.0);
  k.max_heldout_extrapolation_pct = 100.0 * (std::exp(fit.max_heldout_extrapolation) - 1.0);
  k.linearisations = fit.linearisations;
  k.simulations = fit.simulations;
  return k;
}

} // namespace

validation::CalibratedErrors fit_validation_rows(const std::string& csv, const validation::ValidateRunOptions& o,
                                                 std::ostream& progress)
{
  std::vector<std::string> skipped;
  std::vector<Observation> obs = observations_from_validation(csv, skipped);
  for (Observation& ob : obs)
    ob.c.scenario.mechanisms = o.mechanisms;
  CalibrateOptions co;
  co.loso = o.loso;
  co.held = SHIPPED_HELD; // the validation judges the fit that ships (calibration/default.yaml)
  co.progress = &progress;
  validation::CalibratedErrors k;
  try {
    const CalibrationResult fit = calibrate(obs, co, pool_predictor(o.jobs, 300));
    k = calibrated_errors(fit, obs);
    if (!o.loso)
      k.loso_not_run = "validate was asked for the fit without its folds (--no-loso)";
  } catch (const core::InputError& e) {
    k = {};
    k.not_run = std::string("the fit's guards refused these rows: ") + e.what();
  }
  k.command = "zerosim calibrate --runs " + csv + " --hold " + held_list(SHIPPED_HELD) + (o.loso ? "" : " --no-loso") +
              " --jobs " + std::to_string(o.jobs);
  return k;
}

} // namespace zerosim::calibration
