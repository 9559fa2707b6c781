// The schema of model, node and scenario files, and of the DeepSpeed, FSDP and DDP blocks: one table per
// mapping, each key with its type (and unit), default and a one-line description. The readers accept
// exactly these keys (their unknown-key errors list them), `--set` and `sweep` paths are checked against
// them, `zerosim describe` prints them (docs/config.md holds that print), and a default that is a value is
// applied from here: the readers' get_* reads (yaml_reader.hpp) read default_text as if it were written in the
// file. One source of truth (docs/style.md §7.3.8); tests/unit/config/schema_test.cpp checks the readers, the
// resolved writer and docs/config.md against it.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace zerosim::config {

/// What a key does to the simulation (DeepSpeed blocks; every other key is MODELLED).
enum class KeyUse {
  MODELLED,     ///< read into the spec
  IGNORED,      ///< cannot change time or memory (logging, learning rate, ...): accepted silently
  NOT_MODELLED, ///< changes time or memory but is not modelled yet: accepted, named in Scenario::warnings
  /// In the user's contract but not built yet (pipeline parallelism, MoE, ...): refused with exit 2 when given
  /// with anything but `default_text` (the one value that means the feature is off, or "none" for a block that is
  /// refused whenever given); `description` names the feature (docs/config.md "Not yet").
  NOT_YET,
};

struct Schema;

struct KeyDoc {
  std::string key;
  std::string type;              ///< "integer >= 1", "bytes", "bandwidth", "bool", "one of a | b", ...
  std::string default_text;      ///< a value as written in a file ("0.6 us", "5e8", "\"\""), "required", or how
                                 ///< the default is derived ("heads", "the node's gpus")
  std::string description;       ///< one line, with the source of the default where it has one
  const Schema* child = nullptr; ///< a nested mapping with a schema of its own
  KeyUse use = KeyUse::MODELLED;
  bool opaque = false; ///< any content accepted below this key (not checked key by key)
};

struct Schema {
  std::string name; ///< "model", "node", "scenario", "deepspeed.zero_optimization", ...
  std::vector<KeyDoc> keys;

  const KeyDoc* find(std::string_view key) const;
  std::vector<std::string> names() const; ///< in table order (the order of "accepted keys: ...")
};

/// A MODELLED key's entry (for schemas built outside schema.cpp, e.g. calibration/kernels.yaml's).
KeyDoc modelled_key(std::string k, std::string type, std::string def, std::string desc, const Schema* child = nullptr);

const Schema& model_schema();
const Schema& node_schema();
const Schema& scenario_schema();
const Schema& deepspeed_schema();
const Schema& fsdp_schema();
const Schema& ddp_schema();

/// Where else a key named `key` belongs, for an unknown-key message at `path` (the dotted path of the mapping it was
/// found in, whose schema is `schema`; nullptr: a scenario path); "" when `schema` is not the scenario's or below it:
/// "; 'zero_stage' belongs at deepspeed.zero_optimization.stage" when the scenario's schema has the name at another
/// place (every place, up to three, cluster.overrides' copy of the node's keys left out), or a known misplacement under
/// another name (DeepSpeed's stage, the node's GPU); "" otherwise.
std::string elsewhere_hint(const Schema* schema, const std::string& path, const std::string& key);

/// The schema of the mapping at `schema_name` ("node.gpu", "deepspeed.zero_optimization", ...): a child
/// of one of the tables above. Throws core::InternalError for a name that does not exist.
const Schema& sub_schema(const Schema& parent, std::string_view key);

} // namespace zerosim::config
