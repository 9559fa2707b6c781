// From a row of results/validation/published.csv to what the simulator can be asked about it: a
// memory comparison (a spec::Scenario and the measured figure in the same metric), a fit verdict
// (the configuration that ran, and the same model at twice the layers), a DeepSpeed-estimator
// conformance check, or a reason why the row cannot be expressed yet. The column meanings and the
// traps are those of results/validation/README.md; docs/validation.md states every mapping rule.
#pragma once

#include "config/mapping_rules_loader.hpp"
#include "memory/estimator.hpp"
#include "spec/node_spec.hpp"
#include "spec/scenario_spec.hpp"

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace zerosim::validation {

/// One row of published.csv, column name -> text as written.
using PublishedRow = std::map<std::string, std::string>;

/// Loads topologies/NAME.yaml (or a stand-in in tests).
using NodeLoader = std::function<spec::NodeSpec(const std::string& name)>;

/// Which predicted quantity a published memory figure is compared with (README trap 2).
enum class MemMetric {
  ALLOCATED,   ///< torch.cuda.max_memory_allocated -> MemoryReport::gpu
  RESERVED,    ///< torch max reserved / "max cached" -> MemoryReport::gpu_reserved
  DEVICE_USED, ///< nvidia-smi "used": an upper bound -> MemoryReport::gpu_device must not exceed it
  ESTIMATOR    ///< DeepSpeed's estimate_zero*_model_states_mem_needs per-GPU figure -> memory/estimator.hpp
};

std::string to_string(MemMetric m);

/// The common description of a row, for the report.
struct RowInfo {
  std::string row_id;
  std::string source_id;
  std::string source;
  std::string locator;
  std::string model;
  std::string config;      ///< short: "ZeRO-2, offload opt cpu, 1 x V100-32GB, mb 10, seq 1024, ckpt full"
  std::string assumptions; ///< inputs the row does not state and this mapping assumed, "; "-separated
  int stage = 0;           ///< ZeRO stage, or the ZeRO stage an FSDP strategy is equivalent to (3: FULL_SHARD)
  std::string offload;     ///< "none" | "opt cpu" | "opt cpu + param cpu" | "opt nvme + param nvme" ...
  /// The framework the run used (framework_label): "DeepSpeed", "FSDP", "DDP" or "FairScale".
  std::string framework = "DeepSpeed";
  /// The sharding group of the statistics: "stage N" for DeepSpeed, "FSDP FULL_SHARD" (SHARD_GRAD_OP,
  /// HYBRID_SHARD, NO_SHARD) for FSDP, "DDP" for DDP.
  std::string strategy;
  /// Pipeline rows: the schedule and degree of the report's group ("1f1b pp 12"); "" without a pipeline.
  std::string pipeline;
};

/// A published memory figure and how to predict it.
struct MemoryCase {
  RowInfo info;
  MemMetric metric = MemMetric::ALLOCATED;
  std::string metric_text;                         ///< the row's mem_metric as written
  double measured_bytes = 0;                       ///< the figure in bytes (unit per source: see figure_unit_bytes)
  std::string unit;                                ///< "GiB" | "GB": how the source's figure was read
  std::optional<spec::Scenario> scenario;          ///< for ALLOCATED, RESERVED, DEVICE_USED
  std::optional<memory::EstimatorQuery> estimator; ///< for ESTIMATOR
  bool estimator_zero_init = true; ///< ESTIMATOR stage 3: which of DeepSpeed's two rows (zero_init 1 or 0)
  /// ESTIMATOR stage 2 without offload as printed by DeepSpeed's memory.rst: that page was generated with the older
  /// formula 4Ψ + 16Ψ/N (docs/deepspeed-schedule.md §10.2), so it is reproduced with that formula and the report says
  /// so.
  bool estimator_older_formula = false;
};

/// A published "largest model (or batch) that trained" statement, or an out-of-memory statement, and the
/// configurations that test it.
struct FitCase {
  RowInfo info;
  std::string claim;                     ///< the row's max_model_fit as written
  spec::Scenario ran;                    ///< the configuration that ran (must be predicted to fit)
  std::optional<spec::Scenario> doubled; ///< the same model at twice the layers (must be predicted not to fit);
                                         ///< absent when the claim is not a maximum
  /// The verdict the source reports for `ran`: true (it trained), false for an out-of-memory statement ("OOM at
  /// BS 1": the configuration as written must be predicted not to fit, and there is no `doubled`).
  bool expect_fit = true;
  /// A maximum that names a model size ("ZeRO-Offload 13B"): that size in parameters (13e9), for the search of the
  /// largest model predicted to fit (memory_validation.hpp, LargestFit); 0 when the claim names no size.
  double claimed_params = 0;
  /// How that search grows the model, with why: "layers at hidden 4096 ...".
  std::string family;
};

/// A memory or max-model row the simulator cannot express yet, and why.
struct NotCovered {
  std::string row_id;
  std::string source_id;
  std::string model;
  std::string kind; ///< "memory" | "max-model" | "fit"
  std::string reason;
  std::string framework; ///< framework_label of the row
};

/// Every row of the file sorted into the four outcomes.
struct RowMapping {
  std::vector<MemoryCase> memory;
  std::vector<FitCase> fits;
  std::vector<NotCovered> not_covered;
  int other_rows = 0; ///< rows with neither a memory figure nor a fit statement (time only)
};

/// The topology file for a row's `gpu` and `gpu_mem_GB` columns (a name under topologies/), or "" when
/// none is given for it: the first entry of `rules.gpu_nodes` (results/validation/rules.yaml) that matches.
/// `inter_node_network` names the machine where the GPU alone does not: an A100 row on AWS Elastic Fabric
/// Adapter is a p4d (40 GB) or p4de (80 GB) instance.
std::string node_name_for(const std::string& gpu, const std::string& gpu_mem_GB,
                          const std::string& inter_node_network = "",
                          const spec::GeneralRules& rules = config::shipped_mapping_rules().general);

/// The framework a row ran on, for the per-framework statistics: "FSDP" (PyTorch FullyShardedDataParallel,
/// FSDP1 or FSDP2: an `fsdp_sharding` other than "none", an `N-equivalent` stage, or an FSDP framework),
/// "DDP" (PyTorch DistributedDataParallel, or an FSDP framework run with sharding "none"), "FairScale"
/// (sharded DDP), else "DeepSpeed".
std::string framework_label(const PublishedRow& row);

/// The leading number of a field such as "1024 (example default, not restated)" or "32 (8 KV)";
/// nullopt when the field does not start with a number.
std::optional<double> leading_number(const std::string& field);

/// Bytes per unit of the row's peak_mem_GB (README trap 7): 2^30 for figures printed by PyTorch or
/// DeepSpeed logs, nvidia-smi MiB read-outs and the estimator rows; 1e9 for figures printed as GB otherwise.
double figure_unit_bytes(const PublishedRow& row);

/// Sorts one row into `into` (a memory case, a fit case, not covered, or other). `load_node` gives
/// the node file of a topology name; `rules` the general rules and what each source says that its rows do not
/// (mapping_rules_near).
void map_row(const PublishedRow& row, const NodeLoader& load_node, RowMapping& into,
             const spec::MappingRules& rules = config::shipped_mapping_rules());

/// map_row over every row.
RowMapping map_rows(const std::vector<PublishedRow>& rows, const NodeLoader& load_node,
                    const spec::MappingRules& rules = config::shipped_mapping_rules());

// ---------------------------------------------------------------------------------------------------
// Time and throughput rows (`zerosim validate --run`, sim/validation/run_validation.hpp). Every row of
// the file becomes either a ThroughputCase (a scenario and the measured figures to predict) or a
// ThroughputNotCovered (with its reason). The rules are in docs/validation.md, "Throughput".

/// A measured time or throughput figure, and the predicted quantity it is compared with.
enum class TimeMetric {
  STEP_TIME,            ///< step_time_s: seconds per optimizer step -> RunMetrics::step_time_s
  SAMPLES_PER_S,        ///< samples_per_s (all GPUs) -> RunMetrics::samples_per_s
  TOKENS_PER_S_TOTAL,   ///< tokens_per_s_total -> RunMetrics::tokens_per_s
  TOKENS_PER_S_PER_GPU, ///< tokens_per_s_per_gpu -> RunMetrics::tokens_per_s / GPUs
  TFLOPS_MODEL,         ///< tflops_per_gpu without recompute (README trap 1) -> RunMetrics::tflops_model
  TFLOPS_HARDWARE,      ///< tflops_per_gpu with the recomputed forward -> RunMetrics::tflops_hardware
  MFU,                  ///< mfu (fraction) -> RunMetrics::mfu
  HFU,                  ///< hfu (fraction) -> RunMetrics::hfu
  DERIVED_STEP_TIME,    ///< derived_step_time_s: NOT measured (computed by the file from throughput) -> step time
  BACKWARD_TIME,        ///< a backward-pass time ("backward only: 5.9") -> the backward span of rank 0
  CPU_ADAM_TIME         ///< the CPU-Adam step latency (ZeRO-Offload Table 4) -> rank 0's CPU-Adam tasks
};

std::string to_string(TimeMetric m);
/// The unit a figure of this metric is written in ("s", "samples/s", "tokens/s", "TFLOPs/GPU", "").
std::string unit_of(TimeMetric m);
/// The definition the comparison uses, for the report ("model FLOPs per step over step time, per GPU", ...).
std::string definition_of(TimeMetric m);
/// A timing of one part of the step (backward pass, CPU Adam), not of the whole step.
bool is_component(TimeMetric m);
/// A time (step time, derived step time, backward pass, CPU-Adam step): lower is faster. Every other metric is a
/// rate (samples/s, tokens/s, TFLOPs, MFU, HFU): higher is faster.
bool is_time(TimeMetric m);

/// One published figure of a row, read for comparison.
struct TimeFigure {
  TimeMetric metric = TimeMetric::STEP_TIME;
  std::string column;              ///< the CSV column it comes from
  std::string written;             ///< the cell as written
  double value = 0;                ///< in unit_of(metric); MFU/HFU as a fraction
  std::optional<double> tolerance; ///< +/- in the same unit: the chart-read tolerance, or half a printed range
  std::string note;                ///< how the value was read ("midpoint of 25.7-26.8", "approximate (~)", ...)
};

/// A row the simulator can be asked about: the scenario built from it and its figures (primary first).
struct ThroughputCase {
  RowInfo info;
  spec::Scenario scenario;
  std::vector<TimeFigure> figures; ///< [0] is the primary figure (priority: docs/validation.md); never empty
  std::string evidence;            ///< the row's evidence_type as written
  std::string completeness;        ///< A or B
  std::string not_compared;        ///< figures of the row that are not compared, and why ("; "-separated)
};

/// A row not compared, with the group it is counted in and the reason.
struct ThroughputNotCovered {
  std::string row_id;
  std::string source_id;
  std::string model;
  std::string category;  ///< the group of the report ("tensor / pipeline parallelism (README trap 6)", ...)
  std::string reason;    ///< every reason that applies, "; "-separated
  std::string framework; ///< framework_label of the row
};

struct ThroughputMapping {
  std::vector<ThroughputCase> cases;
  std::vector<ThroughputNotCovered> not_covered;
};

/// A figure cell read: a value (with a tolerance and a note) or why it cannot be compared.
struct ParsedFigure {
  std::optional<double> value;
  std::optional<double> half_range; ///< for a printed range "25.7-26.8"
  std::string note;
  std::string part;    ///< "backward" for "backward only: 5.9"; empty for the whole step
  std::string why_not; ///< set when value is empty and the cell is not
};

/// Reads one figure cell: "9.956", "~63", "25.7-26.8", "backward only: 5.9", "113.02 (as printed; ...)".
/// Cells holding several values, upper bounds, per-epoch times or a failed run ("0 (failed)") give why_not.
ParsedFigure parse_figure(const std::string& text);

/// The tolerance an evidence_type states: "chart-read (+/-5)" -> 5, "chart-read (+/-0.2 s)" -> 0.2; else none.
std::optional<double> chart_tolerance(const std::string& evidence_type);

/// Sorts one row into a case or a not-covered entry. `all` is the whole file (a size-only row borrows the
/// shape its source gives that size in another row). Throws core::InputError only for a malformed GPU count.
void map_throughput_row(const PublishedRow& row, const std::vector<PublishedRow>& all, const NodeLoader& load_node,
                        ThroughputMapping& into, const spec::MappingRules& rules = config::shipped_mapping_rules());

/// map_throughput_row over every row, in file order; a row whose mapping throws is listed as not covered.
ThroughputMapping map_throughput_rows(const std::vector<PublishedRow>& rows, const NodeLoader& load_node,
                                      const spec::MappingRules& rules = config::shipped_mapping_rules());

/// A NodeLoader reading topologies/NAME.yaml from the folder that holds topologies/ nearest to `csv`: the CSV's
/// folder, its parent, its grandparent, the current directory, then the source tree (ZEROSIM_DATA_DIR).
NodeLoader node_loader_near(const std::string& csv);

/// The mapping's data for the rows of `csv` (docs/validation.md, "General rules" and "Per-source data"): rules.yaml
/// beside it, else the one shipped with zerosim (results/validation/rules.yaml of the source tree); the files of the
/// sources/ folder beside it, else those shipped. Throws core::InputError naming the file, line and key of a
/// malformed file.
spec::MappingRules mapping_rules_near(const std::string& csv);

/// The rows of published.csv at `csv`, each with the software stack that stacks.csv beside it gives for the row
/// (results/validation/stacks.csv; docs/validation.md "Software stacks"), as the fields stack.attention,
/// stack.torch, stack.compile, stack.status (quoted | inferred), stack.model_code and stack.model_code_status;
/// stacks.csv's locator, quote and reason are for the reader and are not merged. A row stacks.csv does not list has
/// none of them (its stack is today's, unstated). Throws core::InputError for an unreadable file, a malformed range, a
/// row listed twice or a value outside the contract's. The `stack` mechanism does not change what is read: a scenario's
/// priced_software() applies it.
std::vector<PublishedRow> read_published_rows(const std::string& csv);

/// One row's cause of a large error (results/validation/causes.csv, docs/research/validation-causes.md).
struct RowCause {
  std::string kind;     ///< "mechanism" (not modelled), "data" (a doubt about the figure or the inputs) or "unknown"
  std::string cause;    ///< one line
  std::string evidence; ///< the quote or the source that documents it
};

/// The causes that causes.csv beside `csv` gives (columns rows, source_id, kind, cause, evidence), by row id; empty
/// when there is no such file. Throws core::InputError naming the file and line for a malformed range, a row listed
/// twice or not in `csv`'s rows `row_ids`, a source that is not the row's, or a kind other than the three.
std::map<std::string, RowCause> read_row_causes(const std::string& csv, const std::vector<PublishedRow>& rows);

/// The software stack of a row read by read_published_rows (unstated: today's stack, with
/// flash attention where the row's text names it, or its source's attention is SDPA: sdpa_flash).
spec::SoftwareSpec software_of(const PublishedRow& row,
                               const spec::MappingRules& rules = config::shipped_mapping_rules());

} // namespace zerosim::validation
