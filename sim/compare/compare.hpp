// `zerosim compare` (docs/compare.md): a scenario's predictions beside what real runs measured, read from their logs
// (training_logs.hpp) or from a measured-runs CSV (calibration/measured_runs.hpp), each figure in its own definition
// (model or hardware TFLOPs, allocated or reserved memory), with the signed error, and a predicted-against-measured
// scatter plot when there are several.
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
  std::string out_dir; ///< the scatter plot's folder ("" : compare.out in the current folder)
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
};

/// Runs the comparison: prints the table (4 significant figures) and warnings (a log's batch that differs from the
/// scenario's); draws the scatter plot for two or more comparisons. Returns 0, or 1 when a scenario could not be
/// simulated. Throws core::InputError (exit 2) for an unreadable log, a log with no step lines, a bad CSV.
int compare(const CompareOptions& options, std::ostream& out, std::ostream& err);

} // namespace zerosim::compare
