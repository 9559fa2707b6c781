// `zerosim compare` (docs/compare.md): a scenario's predictions beside what real runs measured, read from their logs
// (training_logs.hpp) or from a measured-runs CSV (config/measured_runs.hpp), each figure in its own definition
// (model or hardware TFLOPs, allocated or reserved memory), with the signed error and whether the prediction fits,
// written to compare.csv and drawn as one bar per row (errors.png).
#pragma once

#include <ostream>
#include <string>
#include <vector>

namespace zerosim::compare {

struct CompareOptions {
  std::string scenario;          ///< with logs
  std::vector<std::string> logs; ///< training logs of runs of `scenario`
  std::vector<std::string> runs; ///< --runs CSV (measured-runs format), instead of scenario and logs
  std::vector<std::string> sets; ///< --set, on every scenario
  std::string calibration;
  int skip = 2;        ///< warm-up steps left out of each log (--skip N)
  int jobs = 1;        ///< simulations at once (--runs)
  std::string out_dir; ///< the files' folder ("" : a new folder <stem>.compare[-N], core::output_dir)
};

/// One measured figure beside its prediction.
struct Comparison {
  std::string what;     ///< the log file, or csv:line
  std::string scenario; ///< its scenario's path
  std::string figure;   ///< "samples/s", "TFLOPs per GPU (hardware)", ...
  double measured = 0;  ///< in the figure's unit (bytes for memory)
  double predicted = 0;
  double error_pct = 0; ///< + = predicted faster or larger, as docs/compare.md says per figure
  std::string note;     ///< steps used, warnings
  bool fits = true;     ///< whether the prediction fits in memory (`fits` of zerosim run --json)
  double shortfall_bytes = 0;
};

/// `v` to 4 significant figures in fixed notation, trailing zeros kept: 6300.0 -> "6300", 45.8 -> "45.80",
/// 0.08864 -> "0.08864", 123456 -> "123500", 9.9996 -> "10.00". Every number of the compare table is written so.
std::string four_significant_figures(double v);

/// Runs the comparison: prints which predictions do not fit, then the table (4 significant figures; a fits column; each
/// row's scenario or log) and warnings (a log's batch that differs from the scenario's); writes compare.csv and the
/// error bars (errors.dat, .gp, .svg, .png) into options.out_dir, or a new folder, and prints where. Returns 0, or 1
/// when a scenario could not be simulated. Throws core::InputError (exit 2) for an unreadable log, a log with no step
/// lines, a bad CSV.
int compare(const CompareOptions& options, std::ostream& out, std::ostream& err);

} // namespace zerosim::compare
