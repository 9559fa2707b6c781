// The general rules of the validation row mapping: what no source states and every row needs (the node file of a
// GPU, the layout of a model family, a framework's conventions, the names that sort a row). One file,
// results/validation/rules.yaml (docs/validation.md, "General rules"), read by config::load_general_rules; applied by
// sim/validation/. What one source says lives beside it, in results/validation/sources/ (source_rules.hpp).
#pragma once

#include "spec/model_spec.hpp"
#include "spec/scenario_spec.hpp"

#include <optional>
#include <string>
#include <vector>

namespace zerosim::spec {

/// A node file for the rows whose GPU matches: the first entry of the table whose every condition holds. Texts are
/// case-insensitive substrings of the row's cells.
struct GpuNodeRule {
  std::vector<std::string> gpu_contains; ///< each is in the gpu cell
  std::vector<std::string> gpu_lacks;    ///< none is in the gpu cell
  std::string network_contains;          ///< in the inter_node_network cell ("": any)
  std::optional<double> memory_below_GB; ///< the gpu_mem_GB cell's leading number is below it (a cell without one: no)
  std::optional<double> memory_above_GB; ///< ... above it
  std::string node;                      ///< topologies/<node>.yaml
};

/// The FFN width of a layout when the row states none: times x hidden / over (integer division), rounded up to a
/// multiple of multiple_of.
struct FfnWidthRule {
  int times = 4;
  int over = 1;
  int multiple_of = 1;
  std::string note; ///< printed with the row as "ffn N (note)"; "": nothing printed
};

/// The layout of a model family, chosen by the model cell: the first entry that matches (one with no condition
/// matches every model, the last entry).
struct ModelLayout {
  std::string name;
  std::vector<std::string> model_contains_any;    ///< the model cell contains one (case-insensitive)
  std::vector<std::string> model_starts_with_any; ///< or begins with one (case-insensitive)
  FfnKind ffn = FfnKind::GELU;
  NormKind norm = NormKind::LAYERNORM;
  PositionKind position = PositionKind::LEARNED;
  bool bias = true;
  bool tied_embeddings = true;
  bool max_position_seq_len = true; ///< the learned position table has seq_len rows (false: the model has none)
  int max_position_at_least = 0;    ///< ... and at least this many
  std::optional<double> dropout;    ///< none: the workload's rule
  FfnWidthRule ffn_hidden;
  std::optional<int> vocab; ///< when the row states none; none: the framework's
  std::string vocab_note;
  std::optional<LossKind> loss; ///< none: the framework's
  std::string note;             ///< printed with every row of the family
};

/// What a framework family does that its rows do not say, chosen by the framework cell: the first entry that
/// matches (one with no condition matches every framework, the last entry).
struct FrameworkConvention {
  std::string name;
  std::vector<std::string> framework_contains_any;
  int vocab = 0; ///< the tokenizer's vocabulary as the framework pads it, for a layout that gives none
  std::string vocab_note;
  std::optional<LossKind> loss; ///< the loss's code, unless the layout names one
  std::string loss_note;
  /// An unstated TFLOPs definition counts the recompute (README trap 1); false: the source's data decides.
  bool tflops_recompute_counted = false;
  std::string tflops_note;
};

/// The texts of an FSDP strategy in the fsdp_sharding or zero_stage cell.
struct StrategyNames {
  FsdpSharding strategy = FsdpSharding::FULL_SHARD;
  std::vector<std::string> texts;
};

/// The rows run with FSDP2's fully_shard, and where it does not reshard after the forward.
struct Fsdp2Rule {
  std::vector<std::string> framework_contains_any;
  std::vector<std::string> sharding_contains_any;
  std::vector<FsdpSharding> no_reshard_after_forward; ///< reshard_after_forward False for these strategies
};

/// Everything rules.yaml gives.
struct GeneralRules {
  std::string file; ///< where it was read, for messages
  std::vector<GpuNodeRule> gpu_nodes;
  std::vector<ModelLayout> model_layouts;
  std::vector<FrameworkConvention> frameworks;
  std::vector<StrategyNames> fsdp_strategies; ///< checked in order
  Fsdp2Rule fsdp2;
  std::vector<std::string> encoder_models; ///< model-cell texts of encoder-decoder and encoder-only models
  std::vector<int> head_widths;            ///< head widths tried, in order, for a row that states no heads
};

} // namespace zerosim::spec
