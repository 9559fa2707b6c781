// Time and throughput against measurement (`zerosim validate --run`): every row of published.csv that the
// simulator can express is built into a scenario (published_rows.hpp), replayed by the engine in a worker
// process of its own, and its predicted figure put beside the measured one in the same definition; every
// other row is listed with why. Renders results/validation/report.md and report.csv. Method:
// docs/validation.md, "Throughput".
#pragma once

#include "core/csv.hpp"
#include "core/stats.hpp"
#include "validation/memory_validation.hpp"
#include "validation/published_rows.hpp"

#include <cstddef>
#include <functional>
#include <map>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

namespace zerosim::validation {

/// What one replay predicts, in the units of TimeMetric (published_rows.hpp).
struct PredictedFigures {
  double step_time_s = 0;
  double samples_per_s = 0;
  double tokens_per_s = 0;    ///< all GPUs
  double tflops_model = 0;    ///< per GPU
  double tflops_hardware = 0; ///< per GPU
  double mfu = 0;
  double hfu = 0;
  double backward_s = 0; ///< definition_of(TimeMetric::BACKWARD_TIME)
  double cpu_adam_s = 0; ///< definition_of(TimeMetric::CPU_ADAM_TIME)
  int gpus = 0;
  bool fits = true;   ///< predicted to fit every memory tier (context for the reader, not a verdict)
  std::string replay; ///< "full" | "symmetric"
  std::vector<std::string> warnings;
};

/// The predicted value a figure of metric `m` is compared with.
double predicted_value(TimeMetric m, const PredictedFigures& p);

/// The engine pipeline for one case: workload, run::simulate_step, metrics::compute_metrics, and the component
/// timings read off rank 0's timeline. Runs SimGrid: call it at most once per process.
PredictedFigures predict_case(const ThroughputCase& c);

/// How a row's worker ended.
enum class RowStatus {
  DONE,        ///< predicted
  UNSUPPORTED, ///< core::UnsupportedError: the engine does not model something the row needs (not covered)
  REJECTED,    ///< core::InputError: the scenario built from the row is refused (not covered)
  FAILED,      ///< any other exception, a signal, or an exit without a result (a failure of the run)
  TIMED_OUT    ///< ran past the per-row limit and was killed (a failure of the run)
};

std::string to_string(RowStatus s);

struct RowOutcome {
  RowStatus status = RowStatus::FAILED;
  PredictedFigures predicted; ///< for DONE
  std::string message;        ///< why, for every other status
  double wall_s = 0;
};

struct RunOptions {
  int jobs = 2;                  ///< workers at once
  double row_time_limit_s = 300; ///< wall-clock limit of one row's worker
  /// Called in the parent as each row ends (index into the cases, its outcome), in completion order.
  std::function<void(std::size_t, const RowOutcome&)> on_done;
};

/// The work of one worker (predict_case, or a stand-in in tests).
using Predictor = std::function<PredictedFigures(const ThroughputCase&)>;

/// Runs `predictor` on every case, each in a forked worker process (SimGrid allows one engine per process, and a
/// crash must not take the run down), up to `jobs` at once; results come back over a pipe. The outcomes are in
/// the order of `cases`, whatever the order of completion.
std::vector<RowOutcome> run_cases(const std::vector<ThroughputCase>& cases, const Predictor& predictor,
                                  const RunOptions& options);

/// The signed error of a time or throughput figure in percent, in one direction for every metric: + = predicted
/// faster than measured (optimistic), - = predicted slower. A rate (samples/s, tokens/s, TFLOPs, MFU):
/// (predicted - measured) / measured; a time (is_time: step time, backward pass, CPU-Adam step): the same relative
/// error negated, (measured - predicted) / measured. Its absolute value is |predicted - measured| / measured for
/// every metric (docs/validation.md "Statistics").
double signed_error_pct(TimeMetric m, double predicted, double measured);

/// A figure beside its prediction.
struct FigureComparison {
  TimeFigure figure;
  double predicted = 0;
  double error_pct = 0; ///< signed_error_pct: + = predicted faster than measured
};

/// A row compared: the primary figure first, then the others the row gives.
struct ThroughputComparison {
  ThroughputCase c;
  PredictedFigures predicted;
  std::vector<FigureComparison> figures;
  double wall_s = 0;
};

/// A row whose worker failed or timed out: listed, never hidden.
struct RowFailure {
  ThroughputCase c;
  RowStatus status = RowStatus::FAILED;
  std::string message;
};

/// The rows of one framework (RowInfo::framework): how many ended where, and the statistics of its whole-step
/// comparisons.
struct FrameworkSummary {
  std::string framework; ///< "DeepSpeed", "FSDP", "DDP", or another framework_label
  int rows = 0;          ///< rows of the file with this framework
  int compared = 0;      ///< compared on a whole-step figure
  int component = 0;     ///< compared on a component timing
  int failed = 0;        ///< failed or timed out in the simulator
  int not_covered = 0;
  std::optional<core::ErrorStats> whole_step; ///< |error| of the whole-step comparisons; none when there is none
};

/// A fitted parameter as validate --run's "In-sample" section shows it.
struct FittedParameter {
  std::string name;
  double value = 1;                         ///< the multiplier fitted on every source
  std::optional<double> fold_min, fold_max; ///< its range across the leave-one-source-out folds
  bool at_bound = false;
  int sources = 0;  ///< sources that inform it
  std::string note; ///< flags (one source, at its bound)
};

/// The calibrated predictions of validate --run (filled by the calibration layer: calibration::fit_validation_rows):
/// the signed error of every whole-step row's primary figure predicted with parameters fitted on every source
/// (in-sample) and with parameters fitted without the row's source (leave-one-source-out).
struct CalibratedErrors {
  std::string not_run;                         ///< why there is no fit ("" when it ran)
  std::string loso_not_run;                    ///< why there are no folds ("" when they ran)
  std::map<std::string, double> in_sample_pct; ///< row id -> signed error (signed_error_pct's direction)
  std::map<std::string, double> loso_pct;      ///< row id -> signed error
  std::vector<FittedParameter> params;         ///< the fitted parameters, by name
  std::vector<std::string> unfitted;           ///< parameters left at their priors, with why
  double max_surrogate_deviation_pct = 0;      ///< in-sample: max |fitted / surrogate - 1|
  double max_loso_surrogate_deviation_pct = 0; ///< the same for each fold, on the rows it fitted
  double max_heldout_extrapolation_pct = 0;    ///< the in-sample surrogate extrapolated to the held-out rows
  int linearisations = 0;
  int simulations = 0;
  std::string command; ///< what reproduces it
};

struct ThroughputReport {
  int rows_total = 0;                            ///< rows in the file
  std::vector<ThroughputComparison> comparisons; ///< in file order
  std::vector<RowFailure> failures;
  std::vector<ThroughputNotCovered> not_covered; ///< in file order
  /// |error| of the primary figure, whole-step figures (time, rates, TFLOPs, MFU): per source, framework, ZeRO
  /// stage or FSDP strategy, offload mode, and overall.
  std::vector<core::ErrorStats> stats;
  /// The same for component timings (backward pass, CPU-Adam step), kept apart from the whole-step figures.
  std::vector<core::ErrorStats> component_stats;
  /// Per framework: DeepSpeed, FSDP, DDP always (a framework without a compared row says so), then any other.
  std::vector<FrameworkSummary> frameworks;
  /// validate --run's fit (none: a priors-only report, e.g. the ablation's runs).
  std::optional<CalibratedErrors> calibrated;
  /// Causes of large errors by row id (causes.csv beside the validation CSV; read_row_causes).
  std::map<std::string, RowCause> causes;
};

/// The scale band of a row's statistics: "1 node", "2-64 nodes", "more than 64 nodes".
std::string scale_band(const ThroughputCase& c);

/// Error statistics of the whole-step comparisons of `r` under another prediction: `error_of` gives a row's signed
/// error (none: the row is left out). Grouped as the report's tables (source, framework, stage or strategy, offload,
/// GPU kind, scale band, overall).
std::vector<core::ErrorStats>
whole_step_stats(const ThroughputReport& r,
                 const std::function<std::optional<double>(const ThroughputComparison&)>& error_of);

/// The median over sources of each source's median |error| (whole-step rows, `error_of` as above); none without rows.
std::optional<double>
median_of_source_medians(const ThroughputReport& r,
                         const std::function<std::optional<double>(const ThroughputComparison&)>& error_of);

/// Puts the outcomes (same order as mapping.cases) beside the measured figures. An UNSUPPORTED or REJECTED
/// outcome moves the row to not_covered with the message.
ThroughputReport assemble_report(int rows_total, const ThroughputMapping& mapping,
                                 const std::vector<RowOutcome>& outcomes);

/// results/validation/report.md
std::string render_throughput_markdown(const ThroughputReport& r);
/// results/validation/report.csv: one record per compared figure, failed row and row not covered.
std::string render_throughput_csv(const ThroughputReport& r);
/// The headline printed on the terminal: counts, the per-framework summary, then median and p90 per source,
/// framework, stage or strategy, offload and overall.
std::string render_headline(const ThroughputReport& r);

/// The priors-only throughput validation of `validate --run`: reads `csv` (published.csv), loads node files from the
/// topologies/ folder nearest to it (node_loader_near), runs every expressible row (`jobs` workers at once,
/// `row_time_limit_s` each; progress to `out`) with `mechanisms` (`--without NAME`), and returns the report with the
/// causes of causes.csv beside `csv`. validate_run_command adds the fit and writes it. Throws core::InputError for an
/// unreadable file.
ThroughputReport run_throughput_report(const std::string& csv, std::ostream& out, int jobs = 2,
                                       double row_time_limit_s = 300, const spec::Mechanisms& mechanisms = {});

/// The priors' error of the whole-step rows per GPU kind x framework (spec::accuracy_group) and overall
/// (spec::ACCURACY_OVERALL): what `zerosim run` prints without a calibration profile.
std::map<std::string, spec::AccuracyBand> priors_accuracy_bands(const ThroughputReport& r);

/// Writes report.md, report.csv and priors-accuracy.yaml (priors_accuracy_bands) of `r` into `out_dir` (created) and
/// prints the headline to `out`.
void write_throughput_report(const ThroughputReport& r, const std::string& out_dir, std::ostream& out);

struct ValidateRunOptions {
  int jobs = 2;
  bool fit = true;  ///< false: priors only (the report says the two calibrated sections were not run)
  bool loso = true; ///< false: the in-sample fit without its folds
  spec::Mechanisms mechanisms;
};

/// The calibrated errors of the whole-step rows of `csv` under `o` (progress to `progress`); a fit the data cannot
/// support is a CalibratedErrors with not_run saying why, not an exception.
using RowsFit =
    std::function<CalibratedErrors(const std::string& csv, const ValidateRunOptions& o, std::ostream& progress)>;

/// `zerosim validate --run` (docs/validation.md "Calibrated report"): the priors-only throughput validation
/// (run_throughput_report), then `fit` on the same rows unless o.fit is false, written as report.md, report.csv and
/// priors-accuracy.yaml into `out_dir` (write_throughput_report), the headline to `out`. The fit is the calibration
/// layer's (calibration::fit_validation_rows), which sits above validation because it fits on validation's cases
/// (ThroughputCase, predict_case); the command line passes it in, so that the command lives here and validation
/// includes nothing of calibration. Returns 0 when every row was predicted or listed as not covered, 1 when some row
/// failed or timed out. Throws core::InputError for an unreadable file.
int validate_run_command(const std::string& csv, const std::string& out_dir, std::ostream& out,
                         const ValidateRunOptions& o, const RowsFit& fit);

/// `zerosim validate --scenarios DIR`: maps every row of `csv` as `validate --run` does and writes each compared
/// row's scenario, resolved, to DIR/row-<id>.yaml (a comment header names the row, its source and the mapping's
/// assumptions), without simulating; `zerosim run DIR/row-<id>.yaml` then replays the row with its breakdown and
/// trace. Prints how many were written. Throws core::InputError for an unreadable file.
int write_row_scenarios(const std::string& csv, const std::string& out_dir, std::ostream& out);

/// `zerosim validate --ablation`: the throughput validation with the default mechanisms, then with each switched
/// from its default in turn (off, or on for one off by default); writes ablation.md into `out_dir`: per mechanism,
/// on the rows it acts on that both runs compared, the median |error| and the median signed error on and off, and
/// the allocator's line over the memory validation's reserved figures (docs/validation.md "Ablation"). The file,
/// its stacks and the node files are read once. Returns 0 when every row was predicted or not covered, 1 when one
/// failed.
int validate_ablation_command(const std::string& csv, const std::string& out_dir, std::ostream& out, int jobs = 2,
                              double row_time_limit_s = 300);

} // namespace zerosim::validation
