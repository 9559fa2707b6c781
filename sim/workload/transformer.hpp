// The transformer as a list of layers: parameters, FLOPs per operation, bytes moved by the
// memory-bound operations, and activation bytes kept for backward. Pure arithmetic: no YAML,
// no SimGrid. See docs/workload.md for every formula and its source.
#pragma once

#include "spec/model_spec.hpp"
#include "spec/scenario_spec.hpp"

#include <cstdint>
#include <string>
#include <vector>

namespace zerosim::workload {

enum class LayerKind { EMBEDDING, BLOCK, FINAL_NORM, LM_HEAD };

/// One parameter tensor (a torch.nn.Parameter): the unit DeepSpeed stage 3 partitions,
/// pads to a multiple of N, and tests against stage3_param_persistence_threshold.
struct ParamTensor {
  std::string name;          ///< e.g. "attn.qkv.weight"
  std::int64_t numel = 0;
  std::string module;        ///< the torch module owning it (e.g. "attn.qkv"); stage 3 fetches per module
};

enum class OpKind { GEMM, ATTENTION, ELEMENTWISE };

/// One operation of a layer's forward pass, for one micro-batch on one GPU.
struct Op {
  std::string name;
  OpKind kind = OpKind::ELEMENTWISE;
  std::int64_t m = 0, n = 0, k = 0;   ///< GEMM shape (tokens x out x in); batched GEMMs multiply m by the batch
  double fwd_flops = 0;
  double bwd_flops = 0;               ///< 2 x forward for GEMMs (input and weight gradients)
  double fwd_bytes = 0;               ///< HBM traffic of the forward (reads + writes)
  double bwd_bytes = 0;
  bool selective_recompute = false;   ///< recomputed under selective checkpointing (the attention core)
};

struct Layer {
  std::string name;                   ///< "embed", "block.17", "final_norm", "lm_head"
  LayerKind kind = LayerKind::BLOCK;
  int block = -1;                     ///< block index for BLOCK layers, -1 otherwise
  std::vector<ParamTensor> params;
  std::vector<Op> ops;
  double fwd_flops = 0;               ///< sum over ops
  double bwd_flops = 0;
  double recompute_flops = 0;         ///< forward FLOPs re-run in backward under the chosen checkpointing
  /// Bytes saved by the forward and held until this layer's backward, under the chosen checkpointing.
  std::int64_t activation_bytes_kept = 0;
  /// Bytes this layer's backward materialises at once beyond the kept ones (recomputed activations
  /// under checkpointing, gradient temporaries). Transient: allocated and freed inside its backward.
  std::int64_t activation_bytes_backward_working = 0;
  /// Transient bytes alive during this layer's forward beyond what it keeps.
  std::int64_t activation_bytes_forward_working = 0;

  std::int64_t param_count() const;
};

struct WorkloadOptions {
  int micro_batch = 1;
  int seq_len = 0;
  spec::Checkpointing checkpointing = spec::Checkpointing::NONE;
  bool flash_attention = true;
  int activation_dtype_bytes = 2;     ///< 2 for 16-bit compute (bf16/fp16/AMP), 4 for fp32
  bool inference = false;             ///< forward only: nothing is kept for backward
};

struct Workload {
  std::vector<Layer> layers;          ///< in forward order
  std::int64_t params = 0;            ///< Σ numel of all parameter tensors (tied embeddings counted once)
  /// Model FLOPs of one micro-batch, forward + backward, as scenario-format.md defines them
  /// (6 per token per matmul weight incl. LM head, + 12·l·s·h per token for attention).
  double model_flops = 0;
  /// Model FLOPs + the recomputed forward under activation checkpointing (hardware FLOPs).
  double hardware_flops = 0;
  std::int64_t largest_layer_params = 0;   ///< max over torch modules of the module's own params (DeepSpeed's estimator input)
  std::int64_t largest_param_numel = 0;    ///< largest single parameter tensor
};

/// Parameter count of `m`, derived from its shape (never typed in).
std::int64_t count_params(const spec::ModelSpec& m);

/// Per-layer work of one micro-batch on one GPU.
Workload build_workload(const spec::ModelSpec& m, const WorkloadOptions& o);

/// The options the scenario implies (micro-batch, sequence, checkpointing, flash, precision, mode).
WorkloadOptions workload_options(const spec::Scenario& s);

} // namespace zerosim::workload
