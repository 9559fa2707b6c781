// Internal to sim/validation: the helpers the throughput report's computation (run_validation.cpp) and its
// rendering (throughput_render.cpp) share.
#pragma once

#include "validation/run_validation.hpp"

#include <cstddef>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace zerosim::validation::throughput_parts {

/// A row's error under one set of predictions (priors, in-sample, out of sample); nullopt when it has none.
using ErrorOf = std::function<std::optional<double>(const ThroughputComparison&)>;

/// Four significant digits, in the unit of the metric (MFU and HFU as percent).
std::string figure_text(TimeMetric m, double v);
/// The measured figure's stated uncertainty, as the report prints it.
std::string tolerance_text(const TimeFigure& f);
/// The error on the priors (ErrorOf).
std::optional<double> priors_error(const ThroughputComparison& r);
/// The rows compared on a whole-step figure (not a component's).
std::vector<const ThroughputComparison*> whole_step_rows(const ThroughputReport& r);
int gpus_of(const ThroughputCase& c);
std::string stage_text(const ThroughputCase& c);
/// The rows compared on a component figure.
std::size_t component_count(const ThroughputReport& r);
/// The rows not covered, grouped by category.
std::vector<std::pair<std::string, std::vector<const ThroughputNotCovered*>>> by_category(const ThroughputReport& r);

} // namespace zerosim::validation::throughput_parts
