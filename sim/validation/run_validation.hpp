// Time and throughput against measurement (`zerosim validate --run`): every row of published.csv that the
// simulator can express is built into a scenario (published_rows.hpp), replayed by the engine in a worker
// process of its own, and its predicted figure put beside the measured one in the same definition; every
// other row is listed with why. Renders results/validation/report.md and report.csv. Method:
// docs/validation.md, "Throughput".
#pragma once

#include "validation/csv.hpp"
#include "validation/memory_validation.hpp"
#include "validation/published_rows.hpp"

#include <cstddef>
#include <functional>
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

/// The engine pipeline for one case: workload, engine::simulate, metrics::compute_metrics, and the component
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
  std::optional<ErrorStats> whole_step; ///< |error| of the whole-step comparisons; none when there is none
};

struct ThroughputReport {
  int rows_total = 0;                            ///< rows in the file
  std::vector<ThroughputComparison> comparisons; ///< in file order
  std::vector<RowFailure> failures;
  std::vector<ThroughputNotCovered> not_covered; ///< in file order
  /// |error| of the primary figure, whole-step figures (time, rates, TFLOPs, MFU): per source, framework, ZeRO
  /// stage or FSDP strategy, offload mode, and overall.
  std::vector<ErrorStats> stats;
  /// The same for component timings (backward pass, CPU-Adam step), kept apart from the whole-step figures.
  std::vector<ErrorStats> component_stats;
  /// Per framework: DeepSpeed, FSDP, DDP always (a framework without a compared row says so), then any other.
  std::vector<FrameworkSummary> frameworks;
};

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

/// `zerosim validate --run`: reads `csv` (published.csv), loads node files from the topologies/ folder nearest
/// to it (node_loader_near), runs every expressible row (`jobs` workers at once, `row_time_limit_s` each), writes
/// report.md and report.csv into `out_dir` and prints the headline to `out`. Returns 0 when every row was
/// predicted or listed as not covered, 1 when some row failed or timed out. Throws core::InputError for an
/// unreadable file.
/// `mechanisms`: the model's switches (all on by default; `--without NAME`).
int validate_run_command(const std::string& csv, const std::string& out_dir, std::ostream& out, int jobs = 2,
                         double row_time_limit_s = 300, const spec::Mechanisms& mechanisms = {});

/// `zerosim validate --ablation`: the throughput validation with the default mechanisms, then with each switched
/// from its default in turn (off, or on for one off by default); writes ablation.md into `out_dir`: per mechanism,
/// on the rows it acts on that both runs compared, the median |error| and the median signed error on and off, and
/// the allocator's line over the memory validation's reserved figures (docs/validation.md "Ablation"). The file,
/// its stacks and the node files are read once. Returns as validate_run_command.
int validate_ablation_command(const std::string& csv, const std::string& out_dir, std::ostream& out, int jobs = 2,
                              double row_time_limit_s = 300);

} // namespace zerosim::validation
