// `zerosim validate --run` with the calibration's judgement (docs/validation.md "Calibrated report"): the priors-only
// throughput validation, then `zerosim calibrate`'s fit and leave-one-source-out folds on the same whole-step rows,
// written into one report (results/validation/report.md). Lives here, not in validation/, because the fit is the
// calibration layer's and that layer already depends on the validation's rows and worker pool.
#pragma once

#include "spec/scenario_spec.hpp"

#include <ostream>
#include <string>

namespace zerosim::calibration {

struct ValidateFitOptions {
  int jobs = 2;
  bool fit = true;  ///< false: priors only (the report says the two calibrated sections were not run)
  bool loso = true; ///< false: the in-sample fit without its folds
  spec::Mechanisms mechanisms;
};

/// Writes report.md and report.csv of `csv` into `out_dir`, progress and the headline to `out`. Returns 0 when every
/// row was predicted or listed as not covered, 1 when some row failed or timed out. A fit the data cannot support
/// (the guards of calibrate()) is reported in the sections it would fill, not raised. Throws core::InputError for an
/// unreadable file.
int validate_run_with_fit(const std::string& csv, const std::string& out_dir, std::ostream& out,
                          const ValidateFitOptions& o);

} // namespace zerosim::calibration
