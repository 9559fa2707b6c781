// The only layer that knows YAML. Reads scenario, model and node files exactly as
// docs/scenario-format.md specifies and returns plain, fully resolved structs.
// Every error is a core::InputError: "file:line:col: key.path: expected X, found Y".
#pragma once

#include "spec/model_spec.hpp"
#include "spec/node_spec.hpp"
#include "spec/scenario_spec.hpp"

#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace zerosim::config {

struct LoadOptions {
  std::vector<std::string> sets; ///< "--set K=V" overrides, dotted paths, applied in order
  /// Folder holding models/ and topologies/ for names (not paths). Empty: the folder above the
  /// scenario file's folder, then the current directory, then ZEROSIM_DATA_DIR (the source tree).
  std::string data_dir;
  /// `--calibration FILE|none`: the profile, above the scenario's and the node file's `calibration:` keys
  /// (docs/calibration.md "Precedence"); empty: not given.
  std::string calibration;
};

spec::Scenario load_scenario(const std::string& path, const LoadOptions& options = {});
spec::ModelSpec load_model(const std::string& path);
spec::NodeSpec load_node(const std::string& path);

/// The same from text in memory (tests, tools). `file` names the text in messages and is the base for
/// relative references (its folder, and the folder above it for names under models/ and topologies/).
spec::Scenario load_scenario_text(const std::string& text, const std::string& file, const LoadOptions& options = {});
spec::ModelSpec load_model_text(const std::string& text, const std::string& file);
spec::NodeSpec load_node_text(const std::string& text, const std::string& file);
/// The DeepSpeed reader's text entry (tests, fuzzing): the scenario `scenario_text` (named `scenario_file`, as
/// load_scenario_text) with its `deepspeed:` key replaced by the ds_config.json text `ds_text`, read as a
/// `deepspeed: FILE` reference reads the file it names; messages about it name `ds_file`.
spec::Scenario load_deepspeed_text(const std::string& ds_text, const std::string& ds_file,
                                   const std::string& scenario_text, const std::string& scenario_file,
                                   const LoadOptions& options = {});

/// calibration/kernels.yaml (docs/compute.md §1.4): the kernel efficiency data per GPU kind.
spec::KernelTable load_kernel_table(const std::string& path);
/// The same from text in memory (tests); `file` names the text in messages.
spec::KernelTable load_kernel_table_text(const std::string& text, const std::string& file);
/// Where a scenario's kernel data are read from: calibration/kernels.yaml looked up as model and node names are
/// (`data_dir` when given, else the folder above `scenario_dir`; then the current directory; then
/// ZEROSIM_DATA_DIR, the source tree).
std::string kernel_table_path(const std::string& data_dir, const std::string& scenario_dir);
/// The shipped table (ZEROSIM_DATA_DIR/calibration/kernels.yaml), read once: for scenarios built in code.
const spec::KernelTable& shipped_kernel_table();

/// The shipped calibration profile, relative to the data folder: fitted on the validation data, used when neither
/// `--calibration`, the scenario nor its node file names one.
inline constexpr const char* SHIPPED_CALIBRATION = "calibration/default.yaml";

/// A calibration profile (docs/calibration.md "Profile"): the multipliers, its path and its hash. Throws
/// core::InputError naming file, line and key for anything else than the format's keys and values.
spec::Calibration load_calibration(const std::string& path);
/// The same from text in memory (tests); `file` names the text in messages.
spec::Calibration load_calibration_text(const std::string& text, const std::string& file);
/// The shipped profile's path as data files are looked up (`data_dir`, the folder above `scenario_dir`, the current
/// directory, ZEROSIM_DATA_DIR); empty when there is none.
std::string shipped_calibration_path(const std::string& data_dir, const std::string& scenario_dir);

/// The priors' accuracy bands, relative to the data folder: written by `zerosim validate --run` beside report.md
/// (priors-accuracy.yaml), shipped in results/validation/. Without a calibration profile, a scenario's
/// spec::Calibration::accuracy holds them (kind PRIORS), so `zerosim run` prints the priors' error of its group.
inline constexpr const char* SHIPPED_PRIORS_ACCURACY = "results/validation/priors-accuracy.yaml";

/// A priors-accuracy file: group ("A100 / deepspeed", or spec::ACCURACY_OVERALL) -> band of kind PRIORS. Throws
/// core::InputError naming file, line and key for anything else than the format's keys and values.
std::map<std::string, spec::AccuracyBand> load_priors_accuracy(const std::string& path);
/// The same from text in memory (tests); `file` names the text in messages.
std::map<std::string, spec::AccuracyBand> load_priors_accuracy_text(const std::string& text, const std::string& file);
/// The priors-accuracy file's text for `bands` (median, p90 and median signed |error| in percent, rows), with the
/// command that wrote it; loadable by load_priors_accuracy.
std::string priors_accuracy_yaml(const std::map<std::string, spec::AccuracyBand>& bands, const std::string& command);

/// What `zerosim calibrate` writes: the fitted parameters with what the fit knows of them.
struct CalibrationProfile {
  struct Parameter {
    std::string name;
    double value = 1;       ///< the multiplier on the prior
    double uncertainty = 0; ///< one standard deviation of ln(value)
    double lower = 0, upper = 0;
    int rows = 0;
    std::vector<std::string> sources;
    std::optional<double> loso_min, loso_max; ///< over the leave-one-source-out folds
    std::string note;
  };
  std::string command;   ///< the command that reproduces it
  std::string fitted_on; ///< what the fit saw
  std::vector<Parameter> parameters;
  std::vector<std::pair<std::string, std::string>> fit; ///< summary lines (key, text), in order
  std::map<std::string, spec::AccuracyBand> accuracy;   ///< group -> leave-one-source-out band
};
/// The profile as YAML text, loadable by load_calibration.
std::string calibration_profile_yaml(const CalibrationProfile& p);

/// The resolved scenario as YAML (every default and "auto" written out), for --out.
std::string resolved_yaml(const spec::Scenario& s);

/// The same with `deepspeed: FILE` in place of the inline block (a DeepSpeed scenario; otherwise as above), for a
/// scenario that names the ds_config.json written beside it (zerosim recommend).
std::string resolved_yaml(const spec::Scenario& s, const std::string& deepspeed_file);

/// The resolved DeepSpeed block as a ds_config.json DeepSpeed reads (train_batch_size, zero_optimization, bf16, ...:
/// every key the resolved YAML has, numbers and booleans as JSON's).
std::string deepspeed_json(const spec::Scenario& s);

/// `zerosim describe [model|node|scenario]`: the schema with units and defaults.
std::string describe(const std::string& what);

} // namespace zerosim::config
