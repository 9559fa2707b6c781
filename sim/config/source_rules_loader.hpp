// The per-source files of the validation mapping (results/validation/sources/SNN.yaml; docs/validation.md,
// "Per-source data"), read with the config layer's FieldReader: a typo or a value of the wrong kind is an input
// error naming the file, line, key, what was expected and what was found.
#pragma once

#include "spec/source_rules.hpp"

#include <string>

namespace zerosim::config {

/// Every *.yaml file of `dir` (in name order), each one source's; a file's name must be its source_id
/// ("S04.yaml": source_id S04). A folder that does not exist gives no rules.
spec::SourceRules load_source_rules(const std::string& dir);

/// One source's file from its text (`file` names it in messages).
spec::SourceRule load_source_rule_text(const std::string& text, const std::string& file);

/// The files shipped with zerosim (results/validation/sources/ of the source tree), read once.
const spec::SourceRules& shipped_source_rules();

} // namespace zerosim::config
