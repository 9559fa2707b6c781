// The calibration's judgement in `zerosim validate --run` (docs/validation.md "Calibrated report"): `zerosim
// calibrate`'s fit and leave-one-source-out folds on the whole-step rows of the validation file, as the errors the
// report shows. The command itself is validation's (validation::validate_run_command); the command line hands it this
// fit. The fit lives here, above validation, because it fits on validation's cases (validation::ThroughputCase,
// validation::predict_case) through the validation's worker pool (docs/architecture.md "The layer order").
#pragma once

#include "validation/run_validation.hpp"

#include <ostream>
#include <string>

namespace zerosim::calibration {

/// The in-sample and leave-one-source-out errors of every whole-step row of `csv` (observations_from_validation,
/// with o.mechanisms), the fitted parameters and the fit's figures; progress to `progress`. A fit the data cannot
/// support (the guards of calibrate()) gives not_run with the reason, not an exception. A validation::RowsFit.
validation::CalibratedErrors fit_validation_rows(const std::string& csv, const validation::ValidateRunOptions& o,
                                                 std::ostream& progress);

} // namespace zerosim::calibration
