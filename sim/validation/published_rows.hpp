// From a row of results/validation/published.csv to what the simulator can be asked about it: a
// memory comparison (a spec::Scenario and the measured figure in the same metric), a fit verdict
// (the configuration that ran, and the same model at twice the layers), a DeepSpeed-estimator
// conformance check, or a reason why the row cannot be expressed yet. The column meanings and the
// traps are those of shared/validation/README.md; docs/validation.md states every mapping rule.
#pragma once

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
  ALLOCATED,    ///< torch.cuda.max_memory_allocated -> MemoryReport::gpu
  RESERVED,     ///< torch max reserved / "max cached" -> MemoryReport::gpu_reserved
  DEVICE_USED,  ///< nvidia-smi "used": an upper bound -> MemoryReport::gpu_device must not exceed it
  ESTIMATOR     ///< DeepSpeed's estimate_zero*_model_states_mem_needs per-GPU figure -> memory/estimator.hpp
};

std::string to_string(MemMetric m);

/// The common description of a row, for the report.
struct RowInfo {
  std::string row_id;
  std::string source_id;
  std::string source;
  std::string locator;
  std::string model;
  std::string config;        ///< short: "ZeRO-2, offload opt cpu, 1 x V100-32GB, mb 10, seq 1024, ckpt full"
  std::string assumptions;   ///< inputs the row does not state and this mapping assumed, "; "-separated
  int stage = 0;             ///< ZeRO stage (for the per-stage statistics)
  std::string offload;       ///< "none" | "opt cpu" | "opt cpu + param cpu" | "opt nvme + param nvme" ...
};

/// A published memory figure and how to predict it.
struct MemoryCase {
  RowInfo info;
  MemMetric metric = MemMetric::ALLOCATED;
  std::string metric_text;             ///< the row's mem_metric as written
  double measured_bytes = 0;           ///< the figure in bytes (unit per source: see figure_unit_bytes)
  std::string unit;                    ///< "GiB" | "GB": how the source's figure was read
  std::optional<spec::Scenario> scenario;           ///< for ALLOCATED, RESERVED, DEVICE_USED
  std::optional<memory::EstimatorQuery> estimator;  ///< for ESTIMATOR
  bool estimator_zero_init = true;     ///< ESTIMATOR stage 3: which of DeepSpeed's two rows (zero_init 1 or 0)
  /// ESTIMATOR stage 2 without offload as printed by DeepSpeed's memory.rst: that page was generated with the older
  /// formula 4Ψ + 16Ψ/N (zero-schedule.md §10.2), so it is reproduced with that formula and the report says so.
  bool estimator_older_formula = false;
};

/// A published "largest model (or batch) that trained" statement and the configurations that test it.
struct FitCase {
  RowInfo info;
  std::string claim;                   ///< the row's max_model_fit as written
  spec::Scenario ran;                  ///< the configuration that ran (must be predicted to fit)
  std::optional<spec::Scenario> doubled;  ///< the same model at twice the layers (must be predicted not to fit);
                                          ///< absent when the claim is not a maximum
};

/// A memory or max-model row the simulator cannot express yet, and why.
struct NotCovered {
  std::string row_id;
  std::string source_id;
  std::string model;
  std::string kind;                    ///< "memory" | "max-model" | "fit"
  std::string reason;
};

/// Every row of the file sorted into the four outcomes.
struct RowMapping {
  std::vector<MemoryCase> memory;
  std::vector<FitCase> fits;
  std::vector<NotCovered> not_covered;
  int other_rows = 0;                  ///< rows with neither a memory figure nor a fit statement (time only)
};

/// The topology file for a row's `gpu` and `gpu_mem_GB` columns (a name under topologies/), or "" when
/// none is shipped for it.
std::string node_name_for(const std::string& gpu, const std::string& gpu_mem_GB);

/// The leading number of a field such as "1024 (example default, not restated)" or "32 (8 KV)";
/// nullopt when the field does not start with a number.
std::optional<double> leading_number(const std::string& field);

/// Bytes per unit of the row's peak_mem_GB (README trap 7): 2^30 for figures printed by PyTorch or
/// DeepSpeed logs, nvidia-smi MiB read-outs and the estimator rows; 1e9 for figures printed as GB otherwise.
double figure_unit_bytes(const PublishedRow& row);

/// Sorts one row into `into` (a memory case, a fit case, not covered, or other). `load_node` gives
/// the node file of a topology name.
void map_row(const PublishedRow& row, const NodeLoader& load_node, RowMapping& into);

/// map_row over every row.
RowMapping map_rows(const std::vector<PublishedRow>& rows, const NodeLoader& load_node);

} // namespace zerosim::validation
