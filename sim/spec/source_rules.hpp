// What a published row (results/validation/published.csv) does not say and its source does: the tables, configs and
// code of each source that the row-to-scenario mapping applies, with the citation of each entry. One file per source,
// results/validation/sources/SNN.yaml (docs/validation.md, "Per-source data"), read by config::load_source_rules;
// applied by sim/validation/. A source without a file has no such knowledge: its rows map by the general rules
// (general_rules.hpp).
#pragma once

#include "spec/general_rules.hpp"
#include "spec/scenario_spec.hpp"

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace zerosim::spec {

/// A model size that a max-model row names without its shape ("ZeRO-Offload 13B"), as the source's table gives it.
struct SourceModelSize {
  std::string size; ///< as the max_model_fit column writes it: "13B"
  int layers = 0;
  int hidden = 0;
  int heads = 0;
  int micro_batch = 0;     ///< 0: the row's
  int tensor_parallel = 1; ///< the source's model-parallel degree for this size (Megatron tensor parallelism)
  std::string citation;
};

/// Attention heads the source gives a hidden size, for its rows that do not state them.
struct SourceHeads {
  int hidden = 0;
  int heads = 0;
  std::string citation;
};

/// Which of the source's rows an entry applies to: every condition given holds (none given: every row).
struct RowMatch {
  std::string locator_contains;       ///< the locator cell contains it (case-insensitive)
  std::string framework_contains;     ///< the framework cell contains it
  std::string model_contains;         ///< the model cell contains it
  std::string precision_contains;     ///< the precision cell contains it
  std::string checkpointing_contains; ///< the activation_checkpointing cell contains it
  std::optional<int> stage;           ///< the row's DeepSpeed stage
  std::optional<bool> pipeline;       ///< the row's pp cell is above 1 (true), or not (false)
  /// At least one holds: "optimizer nvme", "param cpu", "param nvme", ... (the row's offload columns).
  std::vector<std::string> offload_any;
};

/// The zero_optimization keys a source's published ds_config sets (DeepSpeed's names; absent: the default).
struct SourceZeroKeys {
  /// The stage the run's ds_config set, where the row's zero_stage cell names what the run was equivalent to (BLOOM:
  /// "1 (BF16_Optimizer ...)" ran ZERO_STAGE=0, DeepSpeed's BF16_Optimizer sharding the optimizer itself).
  std::optional<int> stage;
  std::optional<std::int64_t> reduce_bucket_size;
  std::optional<std::int64_t> allgather_bucket_size;
  std::optional<bool> contiguous_gradients;
  std::optional<bool> overlap_comm;
  std::optional<bool> reduce_scatter;
  std::optional<std::int64_t> sub_group_size;
  std::optional<std::int64_t> stage3_max_reuse_distance;
  std::optional<OffloadDevice> offload_optimizer_device;
  std::optional<std::int64_t> offload_param_buffer_size;
  std::optional<std::int64_t> offload_param_max_in_cpu;
};

/// The DeepSpeed aio keys of a source's config.
struct SourceAio {
  std::int64_t block_size = 1'048'576;
  int queue_depth = 8;
  int thread_count = 1; ///< intra_op_parallelism's former name
};

/// When the run put its activation checkpoints on the CPU (partition_activations and cpu_checkpointing).
enum class CpuCheckpoints {
  NEVER,
  ALWAYS,      ///< every matching run
  WHERE_NEEDED ///< where the row asks for it and the 16-bit checkpoints of a micro-batch exceed the GPU, or a known run
};

/// A run of the source's shape known to have put its checkpoints on the CPU (its launch script says so).
struct KnownCheckpointRun {
  int layers = 0;
  int hidden = 0;
  std::string citation;
};

/// The DeepSpeed settings of a source's published code and config, for the rows `when` selects.
struct SourceDeepSpeed {
  RowMatch when;
  std::optional<SourceZeroKeys> zero;
  std::string zero_note; ///< the assumption text printed with the row
  std::optional<SourceAio> aio;
  std::string aio_note;
  CpuCheckpoints cpu_checkpoints = CpuCheckpoints::NEVER;
  std::string checkpoint_note;
  std::string where_needed_text; ///< WHERE_NEEDED: the activation_checkpointing text that asks for it
  std::vector<KnownCheckpointRun> known_runs;
  std::string citation;
};

/// FSDP MixedPrecision dtypes of the source's code, for the rows `when` selects (first match).
struct SourceMixedPrecision {
  RowMatch when;
  bool autocast = false; ///< an amp_* precision (autocast over fp32 parameters)
  std::optional<Dtype> param_dtype;
  std::optional<Dtype> reduce_dtype;
  std::string note;
  std::string citation;
};

/// The source's FSDP defaults for every row.
struct SourceFsdp {
  std::optional<BackwardPrefetch> backward_prefetch;
  std::optional<bool> limit_all_gathers;
  std::string note;
  std::string citation;
};

/// The FSDP sharding strategy of the source's launch scripts by model size (the model cell's "NB").
struct SourceSharding {
  std::string size; ///< "7" for "Llama 2 7B arch"
  FsdpSharding strategy = FsdpSharding::FULL_SHARD;
  std::string note;
};

/// What the source's selective activation checkpointing is (first match).
struct SourceSelectiveAc {
  RowMatch when;
  std::string text;
  std::string citation;
};

/// A group of the source's rows not compared, with why.
struct SourceNotCompared {
  RowMatch when;
  std::string category;
  std::string reason;
};

/// Rows of this source that rerun another source's configuration: their batch and heads are the other's.
struct SourceRerun {
  RowMatch when;
  std::string source_id; ///< the source whose rows are rerun
  std::string note;      ///< after "micro-batch M, global batch G of ... (published.csv row N, "
  std::string citation;
};

/// Rows that time one part of the step, the CPU-Adam optimizer step of a model named by its size.
struct SourceCpuAdam {
  RowMatch when;
  std::map<std::string, std::string> cells; ///< column -> value the row is read with
  std::string note;
  std::string figure_note;
  std::string citation;
};

/// Which TFLOPs the source's figures are where its rows do not say (README trap 1), for the rows `when` selects.
struct SourceTflops {
  RowMatch when;
  bool recompute_counted = false;
  std::string note;
};

/// The figure columns of published.csv, in the priority order of a row's primary figure (docs/validation.md): figures
/// of time first (they do not depend on a FLOP-counting convention), then rates, then TFLOPs and utilisation (README
/// trap 1), and the file's derived step time only when no measured figure can be compared.
inline const char* const FIGURE_COLUMNS[] = {
    "step_time_s", "samples_per_s", "tokens_per_s_total", "tokens_per_s_per_gpu", "tflops_per_gpu",
    "mfu",         "hfu",           "derived_step_time_s"};

/// The columns a cell reading may give (the counts the scenario is built with).
inline const char* const READABLE_COLUMNS[] = {"total_gpus", "global_batch", "vocab"};

/// A cell of the source's rows that the scenario is built with another value than its leading number: the source
/// says which count the figure was measured at (a screenshot's busy GPUs, a section heading's batch).
struct SourceCellReading {
  RowMatch when;
  std::string column; ///< one of READABLE_COLUMNS
  int value = 0;
  std::string note; ///< printed with the row; "{cell}" stands for the cell as written
};

/// A figure of the source's rows that is not compared, with why (the row's own notes say what it is).
struct SourceFigureNotCompared {
  RowMatch when;
  std::string column; ///< one of FIGURE_COLUMNS
  std::string reason;
};

/// Estimator rows the source prints with DeepSpeed's older ZeRO-2 formula (4P + 16P/N, without offload).
struct SourceOlderFormula {
  RowMatch when;
  std::string note;
  std::string citation;
};

/// How the source's pipeline-parallel runs were scheduled and split (docs/pipeline-parallel.md), for the rows `when`
/// selects (first match). A pipeline row no entry selects runs DeepSpeed's TrainSchedule (1F1B) with Megatron-DeepSpeed's
/// default partition (PipelineSpec's defaults).
struct SourcePipeline {
  RowMatch when;
  PipelineSchedule schedule = PipelineSchedule::ONE_F_ONE_B;
  std::string partition; ///< DeepSpeed's partition_method ("type:transformer|embedding"); "": PipelineSpec's default
  std::string note;      ///< printed with the row
  std::string citation;
};

/// Everything one source's file gives.
struct SourceRule {
  std::string source_id;
  std::string file; ///< where it was read, for messages
  std::vector<SourceModelSize> model_sizes;
  std::string heads_missing_from; ///< "Table 1": where the rows' heads are missing
  std::vector<SourceHeads> heads_by_hidden;
  std::vector<SourceDeepSpeed> deepspeed;
  std::vector<SourcePipeline> pipeline;
  std::vector<SourceMixedPrecision> mixed_precision;
  std::optional<SourceFsdp> fsdp;
  std::vector<SourceSharding> sharding_by_size;
  std::vector<SourceSelectiveAc> selective_checkpointing;
  bool sdpa_flash = false; ///< the source's attention is SDPA, which runs FlashAttention-2 (rows not in stacks.csv)
  std::string sdpa_flash_citation;
  std::vector<SourceNotCompared> not_compared;
  std::optional<SourceRerun> rerun;
  std::optional<SourceCpuAdam> cpu_adam;
  std::vector<SourceTflops> tflops;
  std::vector<SourceCellReading> cell_readings;
  std::vector<SourceFigureNotCompared> figures_not_compared;
  std::optional<SourceOlderFormula> estimator_older_formula;
};

/// What the row mapping knows: the general rules (results/validation/rules.yaml) and each source's file.
struct MappingRules {
  GeneralRules general;
  std::map<std::string, SourceRule> by_source;

  /// The rule of `source_id`, nullptr when the source has no file.
  const SourceRule* find(const std::string& source_id) const
  {
    auto it = by_source.find(source_id);
    return it == by_source.end() ? nullptr : &it->second;
  }
};

} // namespace zerosim::spec
