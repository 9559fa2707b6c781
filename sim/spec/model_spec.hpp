// Plain description of a decoder-only transformer, as read from models/NAME.yaml.
// No YAML and no SimGrid here: the config layer fills it, the workload layer reads it.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace zerosim::spec {

enum class FfnKind { GELU, SWIGLU };              ///< gelu: 2 matrices (up, down); swiglu: 3 (gate, up, down)
enum class NormKind { LAYERNORM, RMSNORM };       ///< layernorm has weight and bias; rmsnorm only a weight
enum class PositionKind { LEARNED, ROPE, ALIBI }; ///< learned adds a max_position x hidden table
/// The training loss's implementation (docs/workload.md §4.4): HF returns the 16-bit logits to the caller and
/// log_softmax saves an fp32 copy; Megatron-LM's vocab-parallel cross entropy works in place on one fp32 copy.
enum class LossKind { HF, MEGATRON };

struct ModelSpec {
  std::string name;
  int layers = 0;
  int hidden = 0;
  int heads = 0;
  int kv_heads = 0;   ///< = heads unless grouped-query attention
  int ffn_hidden = 0; ///< = 4 * hidden unless given
  FfnKind ffn = FfnKind::GELU;
  int vocab = 0;
  bool tied_embeddings = false;
  NormKind norm = NormKind::LAYERNORM;
  PositionKind position = PositionKind::LEARNED;
  bool bias = true;     ///< biases on every linear layer (GPT-2, BLOOM) or none (Llama, MPT)
  int max_position = 0; ///< rows of the learned position table (position: learned only)
  /// Dropout probability in training; unset: 0.1 with biases, none without (docs/workload.md §1.3).
  std::optional<double> dropout;
  LossKind loss = LossKind::HF;
  std::string source; ///< where the shape comes from (for people; not used in arithmetic)

  int head_dim() const { return heads > 0 ? hidden / heads : 0; }
};

} // namespace zerosim::spec
