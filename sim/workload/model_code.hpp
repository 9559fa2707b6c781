// The element-wise kernels of one transformer block as a model code launches them (docs/workload.md §5.2): how many
// kernels each element-wise op of the op graph is, at which dtype, and how many HBM bytes they move, for Hugging
// Face's eager modules, Megatron's fused kernels, torchtitan, llm-foundry, minGPT and fms-fsdp, and under
// torch.compile. The op graph (op_graph.hpp) stays the dataflow and the memory; this prices its element-wise ops.
// Internal to the workload component. Every figure comes from docs/research/model-code-kernels.md.
#pragma once

#include "spec/kernel_spec.hpp"
#include "workload/transformer.hpp"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace zerosim::workload::detail {

/// Element counts of one micro-batch's tensors in one block (one tensor-parallel rank's share where split).
struct BlockDims {
  double H = 0;       ///< T·h: the residual stream and the norms
  double Q = 0;       ///< T·h_r: queries, the attention output
  double K = 0;       ///< T·kvd_r: keys (and values)
  double F = 0;       ///< T·f_r: the MLP's inner width
  double A = 0;       ///< b·a_r·s·kv_len: the attention scores
  int q_inputs = 3;   ///< linears reading the attention norm's output: 1 (fused qkv) or 3 (q, k, v)
  int mlp_inputs = 1; ///< linears reading the MLP norm's output: 2 (SwiGLU gate and up) or 1
  bool layernorm = true;
  bool swiglu = false;
  bool gqa = false; ///< fewer key/value heads than query heads
  bool bias = true;
  std::int64_t seq = 0;          ///< s, for Megatron's fused-softmax constraints
  std::int64_t attn_batches = 0; ///< b·a_r, likewise
};

/// How the block's element-wise work is launched.
struct KernelContext {
  spec::ModelCode code = spec::ModelCode::HF; ///< resolved (never AUTO)
  bool autocast_casts = false;                ///< amp_* over fp32 parameters: activation casts, an fp32 residual stream
  bool compiled = false;                      ///< torch.compile (Inductor) fuses the element-wise chains
  bool fused_attention = true;                ///< a fused attention kernel (else the eager matmul-softmax-matmul)
  bool inference = false;                     ///< forward only
  int activation_bytes = 2;                   ///< 2 (16-bit) or 4 (fp32 training: every figure doubles)
};

/// One op's element-wise kernels: how many, and the HBM bytes they move, forward and backward.
struct KernelCost {
  int fwd_kernels = 0;
  double fwd_bytes = 0;
  int bwd_kernels = 0;
  double bwd_bytes = 0;
  /// Of the bytes, those moved by non-vectorized TensorIterator kernels (workload::Op::fwd_nonvec_bytes).
  double fwd_nonvec = 0;
  double bwd_nonvec = 0;
};

/// The element-wise roles an op of the block graph plays (by its name), and the glue kernels the graph has no op
/// for (autocast's input casts, the attention's layout copies).
enum class Role {
  NORM,          ///< attn_norm, mlp_norm, final_norm
  QKV_IN,        ///< glue after attn_norm: casts of its output for q/k/v, the dX sums (and split/cat, dbias)
  ROTARY,        ///< attn.rotary (and GQA's key/value expansion before a fused kernel)
  ATTN_LAYOUT,   ///< glue after the attention core: transpose copies (and a fused kernel's helpers)
  SOFTMAX,       ///< attn.softmax of the eager attention: scale, mask, softmax, casts
  RESID_DROPOUT, ///< attn.resid_dropout, mlp.resid_dropout
  RESIDUAL,      ///< attn.residual, mlp.residual (with the backward's gradient sum at the residual fork)
  MLP_IN,        ///< glue after mlp_norm: casts of its output, the dX sum of gate and up
  ACT,           ///< mlp.act
  MUL,           ///< mlp.mul (SwiGLU's product)
  OTHER          ///< priced by the graph: one kernel over its tensors
};

/// The role of the op named `name`; OTHER for GEMMs, the attention core and the rest.
Role role_of(const std::string& name);

/// The cost of `role` under `ctx`; none where the graph's pricing stands (one kernel over its tensors).
std::optional<KernelCost> role_cost(Role role, const KernelContext& ctx, const BlockDims& d);

/// Prices the element-wise ops of one analysed block (or final-norm) layer as `ctx` launches them and inserts the
/// glue ops (QKV_IN, ATTN_LAYOUT, MLP_IN) where the code has kernels for them. A glue op is recomputed with the op it
/// follows.
void price_block_kernels(std::vector<Op>& ops, const KernelContext& ctx, const BlockDims& d);

} // namespace zerosim::workload::detail
