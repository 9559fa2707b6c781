// Memory against measurement (`zerosim validate --memory`): every row of published.csv that the
// memory model can express, predicted beside measured in the same metric; the fit verdict of every
// max-model-size row (as ran: fits; twice the layers: does not); the rows not covered, with why.
// Renders results/validation/memory.md and memory.csv. Method: docs/validation.md.
#pragma once

#include "core/stats.hpp"
#include "validation/published_rows.hpp"

#include <cstdint>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

namespace zerosim::validation {

/// The tolerance of the acceptance check on allocated-memory rows (median absolute error), percent.
inline constexpr double ACCEPTED_MEDIAN_ABS_ERROR_PCT = 15.0;

/// One published memory figure beside its prediction.
struct MemoryComparison {
  MemoryCase c;
  std::int64_t predicted_bytes = 0;
  double error_pct = 0; ///< (predicted - measured) / measured x 100
  bool ok = false;      ///< bound rows: predicted <= measured; others: |error| <= 15 %
  std::string verdict;
  std::string detail; ///< where the GPU peak falls (task), or the estimator's formula
};

/// The tolerance of the largest-model search against a published maximum model size, percent (the acceptance of
/// the offload work: "within +/-20 % of the published size").
inline constexpr double ACCEPTED_LARGEST_MODEL_ERROR_PCT = 20.0;

/// The largest model of a max-model row's family (FitCase::family: the layer count grown at the published hidden
/// size, everything else as ran) that is predicted to fit every tier, found by bisection over the layer count, beside
/// the size the source publishes; and the fewest layers with twice the published size, which must not fit.
struct LargestFit {
  std::string family;
  double published_params = 0;         ///< the size the source names (13e9 for "13B")
  int ran_layers = 0;                  ///< the layers of the shape that ran
  std::int64_t ran_params = 0;         ///< its parameter count (workload::count_params)
  int largest_layers = 0;              ///< 0: not even one layer fits
  std::int64_t largest_params = 0;     ///< parameters at largest_layers (0 when none fits)
  std::int64_t largest_peak_bytes = 0; ///< predicted GPU peak (allocated) at largest_layers
  std::string limit;                   ///< what stops one more layer: the tier, the shortfall, where the GPU peak is
  double error_pct = 0;                ///< (largest_params - published_params) / published_params x 100
  bool within = false;                 ///< |error_pct| <= ACCEPTED_LARGEST_MODEL_ERROR_PCT
  int twice_layers = 0;                ///< the fewest layers with at least 2 x published_params parameters
  std::int64_t twice_params = 0;
  std::int64_t twice_peak_bytes = 0; ///< predicted GPU peak (allocated) there
  bool twice_fits = false;
  bool ok = false;     ///< within, and twice the size does not fit
  int evaluations = 0; ///< memory analyses the search ran
};

/// The largest-model search of a max-model fit case (f.claimed_params > 0): run::analyze_memory of f.ran with the
/// layer count changed, doubled from the shape that ran until it does not fit, then bisected.
LargestFit largest_fit(const FitCase& f);

/// A fit statement beside the predicted verdicts.
struct FitResult {
  FitCase c;
  std::int64_t ran_peak_bytes = 0; ///< predicted GPU peak (allocated) of the configuration that ran
  std::int64_t capacity_bytes = 0; ///< GPU memory of the node
  bool ran_fits = false;           ///< predicted fit of every tier (GPU, host, NVMe)
  std::string ran_detail;
  std::optional<std::int64_t> doubled_peak_bytes;
  std::optional<bool> doubled_fits;
  bool ok = false; ///< ran's verdict is the source's (c.expect_fit), and the doubled one (if any) does not fit
  std::optional<LargestFit> largest; ///< for a max-model statement naming a size (c.claimed_params > 0)
};

/// The memory and fit rows of one framework (framework_label: "DeepSpeed", "FSDP", "DDP", ...).
struct MemoryFrameworkSummary {
  std::string framework;
  int rows = 0;        ///< rows of the file with a memory figure or a fit statement (estimator rows included)
  int comparisons = 0; ///< memory comparisons (a row with an allocated and a reserved figure gives two)
  int fits = 0;        ///< fit verdicts
  int fits_ok = 0;     ///< ... reproduced
  int not_covered = 0; ///< rows not covered
  int failed = 0;      ///< rows the pipeline failed on
  /// |error| over its measured allocated and reserved comparisons; none when there is none.
  std::optional<core::ErrorStats> measured;
  /// The same over its allocated comparisons alone, and over its reserved ones alone (reported apart: they are
  /// different figures).
  std::optional<core::ErrorStats> allocated;
  std::optional<core::ErrorStats> reserved;
};

struct ValidationReport {
  std::vector<MemoryComparison> comparisons;
  std::vector<FitResult> fits;
  std::vector<NotCovered> not_covered;
  int other_rows = 0;
  std::vector<std::string> failures; ///< "row N: message" for a row the pipeline failed on (a bug, not a verdict)
  /// Over measured comparisons (allocated and reserved) grouped per metric, source, framework, ZeRO stage (DeepSpeed)
  /// or FSDP strategy / DDP, offload, overall.
  std::vector<core::ErrorStats> measured_stats;
  /// Over the estimator rows (a conformance test of the arithmetic, not of reality).
  std::vector<core::ErrorStats> estimator_stats;
  int bound_rows = 0;                             ///< nvidia-smi rows
  int bound_violations = 0;                       ///< ... whose prediction exceeds the bound
  std::optional<double> allocated_median_abs_pct; ///< the acceptance figure (none when no such row)
  std::optional<double> reserved_median_abs_pct;  ///< the same over the caching allocator's reserved peaks
  bool fits_ok = false;                           ///< every fit case passed
  int largest_offload_rows = 0;                   ///< max-model rows with offload given a largest-model search
  int largest_offload_ok = 0;                     ///< ... within 20 % of the published size, twice the size not fitting
  /// allocated median <= 15 %, every fit case passed, and every largest-model search of a row with offload passed
  bool accepted = false;
  /// DeepSpeed, FSDP and DDP always (in that order), then any other framework of the file.
  std::vector<MemoryFrameworkSummary> frameworks;
};

/// One memory case beside its prediction, with the case's own scenario (its mechanisms included): what
/// run_memory_validation does per case. Throws as the pipeline does: core::UnsupportedError or core::InputError for
/// a scenario it refuses.
MemoryComparison compare_memory_case(const MemoryCase& c);

/// Maps the rows and runs the pipeline (run::analyze_memory; memory/estimator.hpp for estimator rows).
/// A row whose scenario the pipeline refuses (core::UnsupportedError, or core::InputError for the DeepSpeed keys
/// assumed where the row states none) goes to not_covered with the message.
/// `mechanisms` applies to every scenario (the ablation switches spec::Mechanisms::allocator); `rules` is the
/// mapping's general and per-source data (mapping_rules_near).
ValidationReport run_memory_validation(const std::vector<PublishedRow>& rows, const NodeLoader& load_node,
                                       const spec::Mechanisms& mechanisms = {},
                                       const spec::MappingRules& rules = config::shipped_mapping_rules());

/// results/validation/memory.md
std::string render_markdown(const ValidationReport& r);
/// results/validation/memory.csv: one record per comparison, fit case and row not covered.
std::string render_csv(const ValidationReport& r);

/// `zerosim validate --memory`: reads `csv` (published.csv), loads node files from the topologies/ folder
/// beside the folder holding results/ (else the current directory, else the source tree), writes memory.md and
/// memory.csv into `out_dir`, prints the headline to `out`. Returns 0 when the work was done (the verdict is
/// in the report), 1 when a row failed inside the pipeline. Throws core::InputError for an unreadable file.
int validate_memory_command(const std::string& csv, const std::string& out_dir, std::ostream& out,
                            const spec::Mechanisms& mechanisms = {});

} // namespace zerosim::validation
