// `zerosim memory --estimator` output: DeepSpeed's table for people, its rows as JSON for programs.
#pragma once

#include "core/json.hpp"
#include "memory/estimator.hpp"

#include <string>
#include <vector>

namespace zerosim::report {

core::Json estimator_json(const memory::EstimatorQuery& q, const std::vector<memory::EstimatorRow>& rows);
std::string estimator_table(const memory::EstimatorQuery& q, const std::vector<memory::EstimatorRow>& rows);

} // namespace zerosim::report
