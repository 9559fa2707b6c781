// `zerosim calibrate` as a command: its inputs turned into observations, the fit, the profile and the report
// (docs/calibration.md).
#pragma once

#include "calibration/calibrate.hpp"

#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

namespace zerosim::calibration {

/// The observations of a validation CSV (results/validation/published.csv): every row whose primary figure is a
/// whole-step one and that the validation maps to a scenario; the source is its source_id. `skipped` gets a line per
/// row left out and why (not covered, a component timing).
std::vector<Observation> observations_from_validation(const std::string& csv, std::vector<std::string>& skipped);

/// The observations of a measured runs CSV (docs/calibration-inputs.md); peak-memory rows are skipped (no calibrated
/// parameter acts on memory) with a line in `skipped`. `calibration`: the --calibration option, passed to the
/// scenario loader (the fit overrides its parameters, it matters only for those it does not fit).
std::vector<Observation> observations_from_runs(const std::string& csv, const std::string& calibration,
                                                std::vector<std::string>& skipped);

/// The observations of a scenario's `measured:` block (step_time; tflops_per_gpu with its definition); its
/// source is measured.source, or the file. Throws core::InputError for a scenario without a measured time figure.
std::vector<Observation> observations_from_scenario(const std::string& path, const std::string& calibration);

/// Whether `csv` is a validation file (published.csv: its header has row_id and source_id) rather than a measured
/// runs CSV.
bool is_validation_csv(const std::string& csv);

struct CalibrateArgs {
  std::vector<std::string> runs;      ///< --runs CSV (measured runs or a validation CSV)
  std::vector<std::string> scenarios; ///< --scenario FILE
  std::vector<std::string> params;    ///< --fit-params A,B (empty: the default set)
  std::vector<std::string> held;      ///< --hold A,B: families or parameters left out of the default set
  std::vector<std::string> nccl;      ///< --nccl FILE[:COLLECTIVE]: nccl-tests tables
  std::string node;                   ///< --node NAME|PATH: the node the nccl-tests tables and the GEMMs ran on
  std::string gemm;                   ///< --gemm CSV: timed GEMMs (m, n, k, dtype, seconds)
  std::string out;                    ///< --out PROFILE ("" : no profile written)
  std::string calibration;            ///< --calibration FILE|none for the scenarios it loads
  std::string command;                ///< the command line, for the profile
  bool json = false;
  bool loso = true;
  int jobs = 2;
  /// --synthetic TRUE_PROFILE: the measured values of the runs and scenarios are replaced by the simulator's
  /// prediction at that profile's multipliers times exp(noise z) (synthetic.hpp); the report sets the fit beside
  /// the truth. Empty: the measured values as given.
  std::string synthetic;
  double noise = 0.03;    ///< --noise: the sd of the synthetic noise in ln, in [0, 1)
  std::uint64_t seed = 1; ///< --seed: the synthetic noise's seed
};

/// Runs the command: prints the report (or JSON) to `out`, writes the profile when asked. Returns 0, or throws
/// core::InputError (exit 2) for bad input and the fit's guards.
int calibrate_command(const CalibrateArgs& a, std::ostream& out, std::ostream& progress);

/// The markdown report of a result (parameters, in-sample and leave-one-source-out errors).
std::string render_calibration_markdown(const CalibrationResult& r);

} // namespace zerosim::calibration
