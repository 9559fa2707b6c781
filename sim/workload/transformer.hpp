// The transformer as a list of layers: parameters, FLOPs per operation, bytes moved by the
// memory-bound operations, and activation bytes kept for backward. Pure arithmetic: no YAML,
// no SimGrid. See docs/workload.md for every formula and its source.
#pragma once

#include "core/error.hpp"
#include "spec/model_spec.hpp"
#include "spec/scenario_spec.hpp"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace zerosim::workload {

enum class LayerKind { EMBEDDING, BLOCK, FINAL_NORM, LM_HEAD };

/// One parameter tensor (a torch.nn.Parameter): the unit DeepSpeed stage 3 partitions,
/// pads to a multiple of N, and tests against stage3_param_persistence_threshold.
struct ParamTensor {
  std::string name; ///< e.g. "attn.qkv.weight"
  std::int64_t numel = 0;
  std::string module; ///< the torch module owning it (e.g. "attn.qkv"); stage 3 fetches per module
};

enum class OpKind { GEMM, ATTENTION, ELEMENTWISE };

/// One operation of a layer's forward pass, for one micro-batch on one GPU.
struct Op {
  std::string name;
  OpKind kind = OpKind::ELEMENTWISE;
  std::int64_t m = 0, n = 0, k = 0; ///< GEMM shape (tokens x out x in); batched GEMMs multiply m by the batch
  double fwd_flops = 0;
  double bwd_flops = 0; ///< 2 x forward for GEMMs (input and weight gradients)
  double fwd_bytes = 0; ///< HBM traffic of the forward (reads + writes)
  double bwd_bytes = 0;
  bool selective_recompute = false; ///< recomputed under selective checkpointing (the attention core)
  /// Re-run by the backward's recomputation under the chosen checkpointing: every op under full, the flagged
  /// ones under selective, the ops whose outputs the policy does not save under per_op (docs/workload.md).
  bool recomputed = false;
  /// Kernels the op launches as the model code runs it (docs/workload.md §5.2); -1: the op is one kernel forward and
  /// its family's count backward (compute::op_kernels).
  int fwd_kernels = -1;
  int bwd_kernels = -1;
  /// Of fwd_bytes / bwd_bytes, the bytes PyTorch's non-vectorized element-wise kernels move (broadcast, strided,
  /// mixed-dtype and casting TensorIterator paths; docs/workload.md §5.2), priced at the GPU kind's
  /// `hbm_nonvectorized` share of the streaming bandwidth.
  double fwd_nonvec_bytes = 0;
  double bwd_nonvec_bytes = 0;
  /// A fused attention kernel under grouped-query attention as the model code runs it: its backward writes dK and dV
  /// per query head and reduces them over each group (compute::op_kernels adds those kernels).
  bool gqa_reductions = false;
};

/// An ATTENTION op whose FLOPs cover both products (4·m·n·k: QKᵀ and PV in one kernel) is a fused (flash/SDPA)
/// kernel; one covering a single product (2·m·n·k) is a batched GEMM of the unfused path.
inline bool is_fused_attention(const Op& op)
{
  return op.kind == OpKind::ATTENTION && op.fwd_flops > 3.0 * double(op.m) * double(op.n) * double(op.k);
}

struct Layer {
  std::string name; ///< "embed", "block.17", "final_norm", "lm_head"
  LayerKind kind = LayerKind::BLOCK;
  int block = -1; ///< block index for BLOCK layers, -1 otherwise
  std::vector<ParamTensor> params;
  std::vector<Op> ops;
  double fwd_flops = 0; ///< sum over ops
  double bwd_flops = 0;
  double recompute_flops = 0; ///< forward FLOPs re-run in backward under the chosen checkpointing
  /// Bytes saved by the forward and held until this layer's backward, under the chosen checkpointing.
  std::int64_t activation_bytes_kept = 0;
  /// Bytes this layer's backward materialises at once beyond the kept ones (recomputed activations
  /// under checkpointing, gradient temporaries). Transient: allocated and freed inside its backward.
  std::int64_t activation_bytes_backward_working = 0;
  /// Transient bytes alive during this layer's forward beyond what it keeps.
  std::int64_t activation_bytes_forward_working = 0;
  /// The tensors each of the three sums above stands for (bytes each; they sum to it): the caching allocator's
  /// requests (docs/memory.md §2.1). Empty: the sum is one tensor.
  std::vector<std::int64_t> kept_tensors, forward_working_tensors, backward_working_tensors;
  /// The forward's allocations in op order (GraphResult::forward_trace_bytes / forward_trace).
  std::vector<std::int64_t> forward_trace_bytes;
  std::vector<int> forward_trace;

  std::int64_t param_count() const;
};

struct WorkloadOptions {
  int micro_batch = 1;
  int seq_len = 0;
  spec::Checkpointing checkpointing = spec::Checkpointing::NONE;
  bool flash_attention = true;
  int activation_dtype_bytes = 2; ///< 2 for 16-bit compute (bf16/fp16/AMP), 4 for fp32
  bool inference = false;         ///< forward only: nothing is kept for backward
  /// Inference: tokens generated per sequence (Hugging Face generate's max_new_tokens). With 1 or more the
  /// forward builds a KV cache; the first token comes from the prompt's pass (micro_batch x seq_len tokens,
  /// "prefill") and each of the generate_tokens - 1 decode passes takes one new token per sequence
  /// (docs/inference.md). 0: the prompt's pass alone, without a cache.
  int generate_tokens = 0;
  /// Megatron tensor parallelism (docs/tensor-parallel.md): the layers are one rank's shard of a group of t.
  /// Column-parallel GEMMs (QKV, MLP up/gate) and the attention core split their heads/columns t ways, row-parallel
  /// ones (attention output, MLP down) their inputs; norms, dropout and residuals stay replicated; the embedding and
  /// LM head are vocab-parallel (ceil(vocab / t) rows).
  int tensor_parallel = 1;
  /// The model code whose element-wise kernels the blocks launch (docs/workload.md §5.2), resolved (never AUTO);
  /// unset: one fused kernel per element-wise op over its 16-bit tensors (the `model_code` mechanism off).
  std::optional<spec::ModelCode> model_code;
  /// amp_* over fp32 parameters (DDP, FSDP without a 16-bit param_dtype): autocast casts every linear's input and
  /// the residual stream is fp32.
  bool autocast_casts = false;
  /// torch.compile: Inductor fuses each chain of element-wise ops into one kernel.
  bool compiled = false;
};

struct Workload {
  std::vector<Layer> layers; ///< in forward order
  /// Σ numel of all parameter tensors of the whole model (tied embeddings counted once). With tensor parallelism
  /// the layers hold one rank's shards: their sum is rank_params.
  std::int64_t params = 0;
  std::int64_t rank_params = 0; ///< Σ numel of the layers' parameter tensors (one tensor-parallel rank's shard)
  /// Model FLOPs of one micro-batch on one GPU, forward + backward, as docs/scenario-format.md defines them
  /// (6 per token per matmul weight incl. LM head, + 12·l·s·h per token for attention); with tensor parallelism
  /// this rank's share (1/t of the micro-batch's).
  double model_flops = 0;
  /// Model FLOPs + the recomputed forward under activation checkpointing (hardware FLOPs).
  double hardware_flops = 0;
  std::int64_t largest_layer_params =
      0; ///< max over torch modules of the module's own params (DeepSpeed's estimator input)
  std::int64_t largest_param_numel = 0; ///< largest single parameter tensor

  // ---- inference with generation (WorkloadOptions::generate_tokens >= 2; docs/inference.md) ----
  /// The model's layers, layers[0, model_layers): they own the parameters and are the prompt's pass (prefill).
  /// The decode passes' layers follow them; they own no parameters. Equal to layers.size() without decode.
  int model_layers = 0;
  /// Decode passes: generate_tokens - 1 (0 without generation). Pass t = 1 .. decode_passes feeds one new token per
  /// sequence and attends over prompt + t cached positions.
  int decode_passes = 0;
  /// Indices into `layers` of the decode passes' layers: the embedding, final norm and LM head (the same in every
  /// decode pass) and, per decode pass t (index t - 1), the block every transformer block of that pass runs.
  int decode_embed = -1;
  int decode_final_norm = -1;
  int decode_lm_head = -1;
  std::vector<int> decode_block;
  /// Forward FLOPs of every decode pass together, per GPU (model_flops is the prompt's pass).
  double decode_flops = 0;
  /// The KV cache of one GPU's sequences, a static cache of prompt + generate_tokens positions:
  /// 2 (k and v) · layers · kv_heads · head_dim · (prompt + generate_tokens) · micro_batch · b_a. 0 without generation.
  std::int64_t kv_cache_bytes = 0;

  /// The layer of `layers` that pass `pass` (0: the prompt's, 1 .. decode_passes: decode) runs for the model's
  /// layer `model_layer`. Throws core::InternalError for a pass or layer out of range. (Inline: the schedule's
  /// tests link no workload code.)
  int pass_layer(int pass, int model_layer) const
  {
    const int n = model_layers > 0 ? model_layers : static_cast<int>(layers.size());
    if (model_layer < 0 || model_layer >= n || pass < 0 || pass > decode_passes)
      throw core::InternalError("workload: no layer for pass " + std::to_string(pass) + ", model layer " +
                                std::to_string(model_layer) + " (" + std::to_string(decode_passes) +
                                " decode passes, " + std::to_string(n) + " model layers)");
    if (pass == 0)
      return model_layer;
    switch (layers[static_cast<std::size_t>(model_layer)].kind) {
    case LayerKind::EMBEDDING:
      return decode_embed;
    case LayerKind::BLOCK:
      return decode_block[static_cast<std::size_t>(pass - 1)];
    case LayerKind::FINAL_NORM:
      return decode_final_norm;
    case LayerKind::LM_HEAD:
      return decode_lm_head;
    }
    return model_layer;
  }
};

/// Parameter count of `m`, derived from its shape (never typed in).
std::int64_t count_params(const spec::ModelSpec& m);

/// Per-layer work of one micro-batch on one GPU.
Workload build_workload(const spec::ModelSpec& m, const WorkloadOptions& o);

/// The options the scenario implies (micro-batch, sequence, checkpointing, flash, precision, mode). Flash: fused
/// attention as the kernel of Scenario::priced_software() is (the run's stack, or today's with the `stack` mechanism
/// off).
WorkloadOptions workload_options(const spec::Scenario& s);

} // namespace zerosim::workload
