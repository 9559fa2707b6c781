// The readers of each kind of mapping, over FieldReader (internal to sim/config/).
#pragma once

#include "config/yaml_reader.hpp"
#include "spec/scenario_spec.hpp"

#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace zerosim::config {

/// A model file's mapping (model_schema()), checked: kv_heads divides heads, heads divides hidden, ...
spec::ModelSpec read_model(FieldReader& r);

/// A node file's mapping (node_schema()). `precision`, when given, names the training precision whose
/// peak must be present in gpu.peak.
spec::NodeSpec read_node(FieldReader& r, std::optional<spec::Precision> precision);

/// The DeepSpeed block. Reads into s.deepspeed with the defaults of s.deepspeed_version, resolves "auto"
/// from s.training and s.model, checks the batch keys against s.training and s.dp() and the precision keys
/// against s.training.precision, and appends "not modelled" warnings to s.warnings. `given` tells which batch
/// keys the training block gave (the others may be taken from here; see docs/config.md). An empty block gives
/// every key its default (an absent sub-block reads as an empty one).
struct TrainingBatchGiven {
  bool micro_batch = false;
  bool grad_accum = false;
  bool global_batch = false;
};
void read_deepspeed(FieldReader& r, spec::Scenario& s, TrainingBatchGiven given);

spec::FsdpSpec read_fsdp(FieldReader& r);
spec::DdpSpec read_ddp(FieldReader& r);

/// "16 GPUs", or with tensor or pipeline parallelism "4 data-parallel ranks (16 GPUs / tensor_parallel 4)", "8
/// data-parallel ranks (384 GPUs / (tensor_parallel 4 x pipeline_parallel 12))": what a batch counts.
std::string dp_ranks_text(const spec::Scenario& s);

/// training.pipeline.schedule's names, in the schema's order: auto, gpipe, 1f1b, interleaved_1f1b, zero_bubble.
const std::vector<std::pair<std::string, spec::PipelineSchedule>>& pipeline_schedule_names();

/// What a partition method may be, for "expected ..." (docs/pipeline-parallel.md §2).
inline constexpr const char* PARTITION_WHAT = "parameters, uniform or type:REGEX (a non-empty regular expression "
                                              "matched against the layers' class names, as DeepSpeed's PipelineModule "
                                              "partition_method)";

/// A PipelineModule partition_method as DeepSpeed reads it (pipe/module.py _partition_layers lowercases it):
/// "parameters", "uniform" or "type:REGEX" with a non-empty REGEX, lowercased; nullopt for anything else.
std::optional<std::string> partition_method(const std::string& text);

/// deepspeed.pipeline, read before the batch keys, as its stage count fixes the data-parallel degree. `reader` is
/// the block's (nullopt when the block is absent, null or not a mapping: read_deepspeed reports the last).
struct DeepSpeedPipelineRead {
  std::optional<FieldReader> reader;
  std::optional<int> stages;            ///< a count above 1; 1 and auto read as none
  std::optional<std::string> partition; ///< a method (partition_method); best, DeepSpeed's config default, as none
  int activation_checkpoint_interval = 0;
};
DeepSpeedPipelineRead read_deepspeed_pipeline(const YAML::Node& deepspeed, const std::string& file,
                                              const Origins* origins);

/// Accepts the dtype names DeepSpeed's DtypeEnum accepts.
std::optional<spec::Dtype> parse_dtype(const std::string& s);

} // namespace zerosim::config
