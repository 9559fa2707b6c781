#pragma once
// The ds_config keys each supported DeepSpeed version accepts, with their defaults: data/deepspeed_config_keys.csv,
// written by tools/deepspeed_config_keys.py from DeepSpeed's source at each minor version's last patch tag
// (docs/recommend.md "Which keys ds_config.json holds").
#include <map>
#include <string>
#include <vector>

namespace zerosim::config {

struct DeepSpeedKey {
  std::string default_text; ///< the literal default when static ("500000000", "true", "none"), else the expression
  std::string note;         ///< "alias of FIELD", "deprecated", or empty
  std::string source;       ///< file:line in DeepSpeed's tree at the tag
};

struct DeepSpeedVersionKeys {
  std::string version;                      ///< "0.16"
  std::string tag;                          ///< "v0.16.9"
  std::string commit;                       ///< the tag's commit
  std::map<std::string, DeepSpeedKey> keys; ///< dotted path ("zero_optimization.offload_optimizer.device") -> key
  bool has(const std::string& path) const { return keys.count(path) != 0; }
  /// Does the table describe the keys below `block` (a top-level key)? Blocks read whole are not described.
  bool describes_children(const std::string& block) const;
};

struct DeepSpeedKeyTable {
  std::string file;
  std::string script_sha256;                            ///< the header's hash of the script that wrote the table
  std::map<std::string, DeepSpeedVersionKeys> versions; ///< "0.14" ... "0.19"
  /// The keys of `version`; an input error naming the table when it has none.
  const DeepSpeedVersionKeys& at(const std::string& version) const;
};

/// The table in `file` (CSV with '#' comment lines, the header "version,tag,commit,key,default,note,source").
/// A malformed table is an input error naming the file and line.
DeepSpeedKeyTable read_deepspeed_key_table(const std::string& file);

/// The shipped table, data/deepspeed_config_keys.csv under the data folder, read once.
const DeepSpeedKeyTable& deepspeed_key_table();

} // namespace zerosim::config
