// The data of the validation row mapping (docs/validation.md, "General rules" and "Per-source data"): the general
// rules, results/validation/rules.yaml, and one file per source, results/validation/sources/SNN.yaml. Read with the
// config layer's FieldReader: a typo or a value of the wrong kind is an input error naming the file, line, key, what
// was expected and what was found.
#pragma once

#include "spec/source_rules.hpp"

#include <map>
#include <string>

namespace zerosim::config {

/// The general rules file (rules.yaml).
spec::GeneralRules load_general_rules(const std::string& file);

/// The general rules from their text (`file` names it in messages).
spec::GeneralRules load_general_rules_text(const std::string& text, const std::string& file);

/// Every *.yaml file of `dir` (in name order), each one source's, by source id; a file's name must be its source_id
/// ("S04.yaml": source_id S04). A folder that does not exist gives none.
std::map<std::string, spec::SourceRule> load_source_rules(const std::string& dir);

/// One source's file from its text (`file` names it in messages).
spec::SourceRule load_source_rule_text(const std::string& text, const std::string& file);

/// The files shipped with zerosim (results/validation/rules.yaml and sources/ of the source tree), read once.
const spec::MappingRules& shipped_mapping_rules();

} // namespace zerosim::config
