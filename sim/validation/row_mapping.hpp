// The parts of the row-to-scenario mapping that its files share (internal to sim/validation/): the cell readers
// (row_cells.cpp), the rules that sort a row (row_rules.cpp) and the construction of its scenario
// (row_scenario.cpp). The knowledge they apply is data: the general rules, results/validation/rules.yaml, and each
// source's, results/validation/sources/ (docs/validation.md, "General rules" and "Per-source data").
#pragma once

#include "core/bytes.hpp"
#include "spec/source_rules.hpp"
#include "validation/published_rows.hpp"

#include <optional>
#include <string>
#include <vector>

namespace zerosim::validation::detail {

std::string lower(std::string s);
/// Case-insensitive.
bool contains(const std::string& haystack, const std::string& needle);
/// Case-insensitive: one of `needles` is in `haystack` (none given: false).
bool contains_any(const std::string& haystack, const std::vector<std::string>& needles);
/// Case-insensitive: every one of `needles` is in `haystack` (none given: true).
bool contains_all(const std::string& haystack, const std::vector<std::string>& needles);
std::string trim(const std::string& s);
/// The cell of `key`, "" when the row has none.
const std::string& field(const PublishedRow& row, const std::string& key);
/// The whole field as a number ("13.1", "1e9"), or nullopt when anything else is written there.
std::optional<double> plain_number(const std::string& text);
std::optional<int> plain_int(const std::string& text);
/// The first "<number>B" model size in a max_model_fit text ("ZeRO-Offload 13B" -> "13B").
std::optional<std::string> claimed_size(const std::string& claim);
spec::OffloadDevice parse_offload(const std::string& text);
/// Appends `note` to the "; "-separated `notes`.
void add_note(std::string& notes, const std::string& note);
/// The ZeRO stage of a zero_stage cell: "2", or a stage with a remark in parentheses ("2 (single GPU)").
std::optional<int> stage_of(const std::string& text);
std::string number_text(double v);
/// A model dimension: a whole number, or one followed by a remark in parentheses ("96 (assumed)": the FSDP
/// paper's minGPT 175B, whose GPT-3 shape the data file assumes); nullopt otherwise.
std::optional<int> dimension_of(const std::string& text);
/// Whether `row` is one that a per-source entry's `when` selects (every condition given holds); `stage` is the
/// row's DeepSpeed stage where the entry may name one.
bool matches(const spec::RowMatch& when, const PublishedRow& row, std::optional<int> stage = std::nullopt);
/// The first of a source's entries by column (cell_readings, figures_not_compared) that names `column` and selects
/// the row; nullptr when none does.
template <class Entry>
const Entry* column_entry(const std::vector<Entry>& entries, const PublishedRow& row, const std::string& column)
{
  for (const Entry& e : entries)
    if (e.column == column && matches(e.when, row))
      return &e;
  return nullptr;
}
/// The per-source data of the row's source (results/validation/sources/), nullptr when it has none.
const spec::SourceRule* rule_of(const PublishedRow& row, const spec::MappingRules& rules);

// The groups rows not covered are counted in (the throughput report groups by them; the memory report lists
// the reason texts alone).
inline constexpr const char* CAT_NO_FIGURE = "no time or throughput figure";
inline constexpr const char* CAT_FAIRSCALE = "FairScale sharded DDP";
inline constexpr const char* CAT_AC = "activation checkpointing variant not modelled";
inline constexpr const char* CAT_TP_PP = "tensor / pipeline parallelism (README trap 6)";
inline constexpr const char* CAT_PP_SCHEDULE = "pipeline schedule not modelled";
inline constexpr const char* CAT_FP8 = "FP8 / context parallelism / ZeRO++ (README trap 4)";
inline constexpr const char* CAT_ENCODER = "encoder-decoder or encoder-only model (README trap 8)";
inline constexpr const char* CAT_TILING = "memory-centric tiling";
inline constexpr const char* CAT_STAGE = "not one ZeRO stage";
inline constexpr const char* CAT_C = "completeness C: inputs missing";
inline constexpr const char* CAT_INPUTS = "inputs missing";
inline constexpr const char* CAT_FIGURE = "figure not comparable";
inline constexpr const char* CAT_NODE = "no node file for the GPU";

struct Exclusion {
  std::string category;
  std::string text;
};

bool is_fairscale(const PublishedRow& row);
/// The PyTorch framework of a row (FSDP or DDP), or DEEPSPEED for every other row (FairScale rows too: they are
/// not covered). Rules: framework_label in published_rows.hpp.
spec::Framework framework_of(const PublishedRow& row);

/// An FSDP strategy and how it was read from the row.
struct ShardingRead {
  spec::FsdpSharding strategy = spec::FsdpSharding::FULL_SHARD;
  std::string note; ///< set when the strategy is not written in the row's fsdp_sharding column
};
std::optional<ShardingRead> fsdp_sharding_of(const PublishedRow& row, const spec::MappingRules& rules);
const char* sharding_name(spec::FsdpSharding s);
/// Reasons why a row cannot be expressed yet (empty: it can). Trap numbers refer to results/validation/README.md.
std::vector<Exclusion> exclusions(const PublishedRow& row, const spec::MappingRules& rules);
std::string joined(const std::vector<Exclusion>& why);
/// The layout of the model family `model` names: the first of the general rules' model_layouts that matches.
const spec::ModelLayout& model_layout(const std::string& model, const spec::GeneralRules& rules);
/// The conventions of the row's framework: the first of the general rules' frameworks that matches.
const spec::FrameworkConvention& framework_convention(const PublishedRow& row, const spec::GeneralRules& rules);
/// node_name_for of the row's gpu, gpu_mem_GB and inter_node_network cells.
std::string node_name_of(const PublishedRow& row, const spec::GeneralRules& rules);
/// The ZeRO stage a row's run is equivalent to in what every GPU holds: the DeepSpeed stage; for FSDP, 3 for
/// FULL_SHARD and HYBRID_SHARD (parameters sharded), 2 for SHARD_GRAD_OP, 0 for NO_SHARD; 0 for DDP.
std::optional<int> equivalent_stage(const PublishedRow& row, const spec::MappingRules& rules);

struct Shape {
  int layers = 0;
  int hidden = 0;
  int heads = 0;
  int micro_batch = 0;
  int tensor_parallel = 0; ///< 0: the row's tp column (tensor_parallel_of)
};

/// The Megatron tensor-parallel degree of a row: its tp column's leading number ("8 (inferred)" -> 8), 1 when the
/// column is empty or not a number ("not stated (likely 1)"). exclusions() keeps out the rows whose degree is not
/// given ("<=16 (MP within node ...)").
int tensor_parallel_of(const PublishedRow& row);
/// The pipeline degree of a row: its pp column's leading number ("12 (inferred)" -> 12), 1 when the column is empty or
/// not a number.
int pipeline_parallel_of(const PublishedRow& row);
/// How the row's source scheduled and split its pipeline runs (the first of its `pipeline` entries that selects the
/// row), nullptr when none does: DeepSpeed's TrainSchedule with Megatron-DeepSpeed's default partition.
const spec::SourcePipeline* pipeline_of(const PublishedRow& row, const spec::MappingRules& rules);
/// FlashAttention in the run's code, for a row stacks.csv does not list.
bool flash_attention_of(const PublishedRow& row, const spec::SourceRule* src);
RowInfo info_of(const PublishedRow& row);
/// The model shape and micro-batch a row states, or nullopt when one of them is missing: layers and hidden as whole
/// numbers or with a remark ("96 (assumed)"), heads and micro-batch by their leading number ("32 (8 KV)"). Every
/// cell read from more than a plain number is noted in `notes`.
std::optional<Shape> shape_of(const PublishedRow& row, std::string& notes);
/// The scenario of a row, for every mapping (memory figures, fit statements, time and throughput figures).
spec::Scenario row_scenario(const PublishedRow& row, const NodeLoader& load_node, const Shape& shape, RowInfo& info,
                            const spec::MappingRules& rules);

} // namespace zerosim::validation::detail
