// How a pipeline's stages split the model (docs/pipeline-parallel.md §2): DeepSpeed's PipelineModule partition methods
// over Megatron-DeepSpeed's layer list, or an explicit split (training.pipeline.layers).
#pragma once

#include "spec/scenario_spec.hpp"
#include "workload/transformer.hpp"

#include <string>
#include <vector>

namespace zerosim::schedule {

/// DeepSpeed's partition_uniform (runtime/utils.py at 0.7.0): P + 1 boundaries over `items` entries, floor(items / P)
/// a part and the remainder on the last; with items <= P, one entry a part and the rest empty.
std::vector<int> partition_uniform(int items, int parts);

/// DeepSpeed's partition_balanced (runtime/utils.py at 0.7.0): P + 1 boundaries over `weights` that make the heaviest
/// part as light as a binary search (eps 1e-3) on its weight finds, each candidate probed greedily (every boundary
/// placed where the prefix sum first reaches the running target). With at most P entries, partition_uniform.
std::vector<int> partition_balanced(const std::vector<double>& weights, int parts);

/// The workload layers [first, end) of one pipeline stage.
struct StageLayers {
  int first = 0;
  int end = 0;
  bool operator==(const StageLayers&) const = default;
};

/// Each stage's layers (the embedding with the first stage, the final norm and the LM head with the last):
/// training.pipeline.layers when given (blocks per stage), else training.pipeline.partition applied to
/// Megatron-DeepSpeed's GPTModelPipe list (gpt_model.py: a 16-bit cast, EmbeddingPipe, a transpose, the blocks, a
/// transpose, the final LayerNorm, the tied EmbeddingPipe as LM head, an fp32 cast; docs/pipeline-parallel.md §2):
/// "uniform" over its entries, "parameters" by each entry's parameters, "type:REGEX" by whether the entry's class name
/// matches. One stage (no pipeline): every layer. A stage may hold no transformer block (the head alone, as
/// Megatron-DeepSpeed allows with a warning). Throws core::InputError when a stage would hold no layer at all or the
/// regex matches nothing.
std::vector<StageLayers> stage_layers(const spec::Scenario& s, const workload::Workload& w);

} // namespace zerosim::schedule
