// Loading YAML documents with file:line:col errors, resolving model/node/DeepSpeed references, and applying
// `--set` and `cluster.overrides` to the tree before it is read (internal to sim/config/).
#pragma once

#include "config/scenario_loader.hpp"
#include "config/yaml_reader.hpp"

#include <functional>
#include <map>
#include <string>
#include <vector>

namespace zerosim::config {

/// Parses `text` as YAML; errors name `file` ("FILE:LINE:COL: not valid YAML: ...").
YAML::Node parse_yaml(const std::string& text, const std::string& file);
/// True when `path` is a character or block device (/dev/zero, a terminal).
bool is_device(const std::string& path);
/// The bytes of the file at `path`; `ok` false (and "") when it cannot be read, is a folder or is a device.
std::string read_text(const std::string& path, bool& ok);
/// The fields of one CSV line into `out` (RFC 4180 quoting: "a, b" and "" for a quote); false when a quote is left
/// open. The reader of the tables under data/ (deepspeed_config_keys.csv, torch_fsdp_arguments.csv).
bool split_csv_line(const std::string& line, std::vector<std::string>& out);
/// Reads one of the generated tables under data/: "# ..." comment lines (one may hold "sha256 HEX", the hash of the
/// script that wrote it, returned), then exactly `header`, then rows of as many fields as the header, each handed to
/// `row(where, fields)` ("FILE:LINE: " and the fields). Every malformed line is an input error naming FILE:LINE;
/// `what` names the table in "FILE: cannot open the WHAT".
std::string read_data_table(const std::string& file, const std::string& what, const std::string& header,
                            const std::function<void(const std::string&, const std::vector<std::string>&)>& row);
/// Reads and parses a file ("FILE: cannot open file").
YAML::Node load_yaml_file(const std::string& path);

/// A file named *.json is strict JSON (RFC 8259): otherwise an input error "FILE:LINE:COL: not strict JSON ...".
void check_strict_json(const std::string& text, const std::string& file);
/// Throws unless `root` is a mapping.
void require_mapping(const YAML::Node& root, const std::string& file);

/// A scenario document with the files its parts came from.
struct ScenarioDocument {
  YAML::Node root;
  std::string file;                              ///< the scenario file as given
  std::string dir;                               ///< its folder, for relative references
  std::map<std::string, std::string> part_files; ///< "model", "cluster.node", "deepspeed" -> file read there
  Origins origins;
  LoadOptions options;

  /// The file a reader at `path` reads from (a referenced file, or the scenario file).
  std::string file_of(const std::string& path) const;
};

/// A data file found by name: `file` is "" when none of the folders has it; `looked` names the folders tried
/// ("A, B, C"), for the message.
struct DataFile {
  std::string file;
  std::string looked;
};

/// `relative` ("models/NAME.yaml", "topologies/NAME.yaml", "calibration/kernels.yaml") in the first folder that
/// has it as a regular file, in order: `data_dir` when given, else the folder above the scenario's folder
/// `scenario_dir` (".." for a scenario in the current directory); then the current directory; then
/// ZEROSIM_DATA_DIR (the source tree). The one search of every data file a scenario names.
DataFile find_data_file(const std::string& relative, const std::string& data_dir, const std::string& scenario_dir);

/// Replaces the scalar reference at `key_path` ("model", "cluster.node", "deepspeed") by the mapping of the
/// file it names, recording that file in part_files. Does nothing when the value is not a string.
void resolve_reference(ScenarioDocument& doc, const std::string& key_path);

/// Applies one "--set KEY=VALUE": checks KEY against the scenario schema, then sets the value (parsed as
/// YAML) in the tree, loading referenced files on the way. Errors name "--set KEY=VALUE".
void apply_set(ScenarioDocument& doc, const std::string& assignment);

/// Checks a dotted key against the scenario schema; returns "" or the problem ("unknown key (did you mean
/// 'x'?); accepted keys: ..." prefixed by the offending path and ": ").
std::string check_scenario_path(const std::string& dotted);

/// Checks a dotted node-file key ("gpu.memory") against the node schema; "" or the problem.
std::string check_node_path(const std::string& dotted);

/// Applies cluster.overrides to the node mapping (after the node reference is resolved).
void apply_overrides(ScenarioDocument& doc);

} // namespace zerosim::config
