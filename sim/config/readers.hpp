// The readers of each kind of mapping, over FieldReader (internal to sim/config/).
#pragma once

#include "config/yaml_reader.hpp"
#include "spec/scenario_spec.hpp"

#include <optional>

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

/// "16 GPUs", or with tensor parallelism "4 data-parallel ranks (16 GPUs / tensor_parallel 4)": what a batch counts.
std::string dp_ranks_text(const spec::Scenario& s);

/// Accepts the dtype names DeepSpeed's DtypeEnum accepts.
std::optional<spec::Dtype> parse_dtype(const std::string& s);

} // namespace zerosim::config
