// Element-wise kernels per model code (docs/workload.md §5.2). Each table below is one code's block, op by op, from
// docs/research/model-code-kernels.md (cited as §n), which cites the source lines (and, for `hf` under autocast, the
// H100 profile the list was checked against kernel by kernel). Bytes are for 16-bit activations; fp32 training doubles
// them.
#include "workload/model_code.hpp"

#include "core/error.hpp"

#include <map>
#include <utility>

namespace zerosim::workload::detail {

namespace {

KernelCost cost(int fk, double fb, int bk, double bb)
{
  return KernelCost{fk, fb, bk, bb, 0, 0};
}

/// `c` with `fnv` forward and `bnv` backward of its bytes moved by non-vectorized TensorIterator kernels: a broadcast
/// or strided operand (`elementwise_kernel` with an offset calculator), mixed dtypes or a dtype cast
/// (`unrolled_elementwise_kernel`), `cat` (model-code-kernels.md §2, the profile's kernel names).
KernelCost nonvec(KernelCost c, double fnv, double bnv)
{
  c.fwd_nonvec = fnv;
  c.bwd_nonvec = bnv;
  return c;
}

/// Casts of a norm's output for `n` linears under autocast (one `_to_copy` each, fp32 read, bf16 written: 6 B per
/// element) and, backward, each linear's bf16 dX cast back to fp32 plus the n - 1 fp32 sums of those dX (12 B).
KernelCost autocast_inputs(int n, double H)
{
  // The backward's bf16 -> fp32 casts are `unrolled_elementwise_kernel`s.
  return nonvec(cost(n, 6.0 * n * H, n + (n - 1), 6.0 * n * H + 12.0 * (n - 1) * H), 0, 6.0 * n * H);
}

/// Backward only: the n - 1 16-bit sums of the dX of n linears that read one tensor (6 B per element).
KernelCost grad_sums(int n, double H)
{
  return cost(0, 0, n - 1, 6.0 * (n - 1) * H);
}

/// SwiGLU's SiLU and product, eager and 16-bit: silu 4F / silu_backward 6F; the product 6F, its backward two
/// products 12F (model-code-kernels.md §1.1-§1.2, the profile's bf16 kernels).
KernelCost eager_silu(const BlockDims& d)
{
  return cost(1, 4 * d.F, 1, 6 * d.F);
}
KernelCost eager_swiglu_mul(const BlockDims& d)
{
  return cost(1, 6 * d.F, 2, 12 * d.F);
}

/// Megatron's fused scale-mask-softmax runs where its kernel's constraints hold (Megatron-DeepSpeed@222d8992
/// megatron/model/fused_softmax.py `is_kernel_available`: 16 < sk <= 2048, sq % 4 == 0 and (b·heads) % 4 == 0 for
/// key lengths above 128); else the eager path (`input.float()`, scale, mask, softmax, cast back: 5 kernels, 36A
/// forward, 5 and 40A backward; model-code-kernels.md §3 "Softmax fallback").
KernelCost megatron_softmax(const BlockDims& d)
{
  const bool fused = d.seq > 16 && d.seq <= 2048 && d.seq % 4 == 0 && d.attn_batches % 4 == 0;
  // The fallback's `masked_fill` broadcasts the mask over batch and heads.
  return fused ? cost(1, 4 * d.A, 1, 6 * d.A) : nonvec(cost(5, 36 * d.A, 5, 40 * d.A), 4 * d.A, 4 * d.A);
}

/// Hugging Face transformers' eager modules (model-code-kernels.md §1). Under autocast over fp32 parameters (the
/// measured H100 configuration): the residual stream is fp32, LlamaRMSNorm is 6 fp32 kernels forward and 13 (+1 sum)
/// backward, every linear's input is cast once per linear, the rotary embedding promotes q and k to fp32 and SDPA
/// casts them back. With 16-bit parameters (model.half(), FSDP's param_dtype, DeepSpeed): no casts, a 16-bit stream,
/// RMSNorm with its own upcast and downcast (8 and 15 kernels).
std::optional<KernelCost> hf(Role role, const KernelContext& c, const BlockDims& d)
{
  const bool casts = c.autocast_casts;
  switch (role) {
  case Role::NORM:
    if (d.layernorm) // nn.LayerNorm: one kernel each way (+ its gamma/beta reduction and the fork's sum backward)
      return casts ? cost(1, 8 * d.H, 3, 28 * d.H) : cost(1, 4 * d.H, 3, 16 * d.H);
    // LlamaRMSNorm's `x * rsqrt(var)` and `weight * x` broadcast (8H each under autocast); backward grad·w, grad·r
    // and the mean's expand.
    return casts ? nonvec(cost(6, 28 * d.H, 14, 92 * d.H), 16 * d.H, 20 * d.H)
                 : nonvec(cost(8, 36 * d.H, 15, 88 * d.H), 12 * d.H, 16 * d.H);
  case Role::QKV_IN:
    return casts ? autocast_inputs(d.q_inputs, d.H) : grad_sums(d.q_inputs, d.H);
  case Role::ROTARY: // q·cos + rotate_half(q)·sin per q and k (mul, neg, cat, mul, add), SDPA's casts under autocast
    // Every rotary kernel but SDPA's fp32 -> bf16 casts and the backward's bf16 sums reads a broadcast cos/sin, a
    // strided half, mixed dtypes or is the cat.
    return casts ? nonvec(cost(12, 36 * (d.Q + d.K), 24, 56 * (d.Q + d.K)), 30 * (d.Q + d.K), 40 * (d.Q + d.K))
                 : nonvec(cost(10, 22 * (d.Q + d.K), 18, 30 * (d.Q + d.K)), 22 * (d.Q + d.K), 24 * (d.Q + d.K));
  case Role::ATTN_LAYOUT:
    // SDPA: `attn_output.transpose(1, 2).contiguous()`. Eager (GPT-2 `_attn`): matmul on permuted views copies q,
    // k and v, and the heads are merged by a copy.
    // Strided copies, all of them.
    return c.fused_attention ? nonvec(cost(1, 4 * d.Q, 1, 4 * d.Q), 4 * d.Q, 4 * d.Q)
                             : nonvec(cost(4, 8 * (d.Q + d.K), 4, 8 * (d.Q + d.K)), 8 * (d.Q + d.K), 8 * (d.Q + d.K));
  case Role::SOFTMAX: // `/ scale`, `torch.where(causal_mask, ...)`, softmax (fp32 under autocast), `.type(v.dtype)`
    // The `where` broadcasts the mask; backward under autocast the cast back to fp32 too.
    return casts ? nonvec(cost(4, 20 * d.A, 4, 26 * d.A), 4 * d.A, 10 * d.A)
                 : nonvec(cost(3, 12 * d.A, 3, 14 * d.A), 4 * d.A, 4 * d.A);
  case Role::RESIDUAL: // fp32 + bf16 -> fp32 under autocast; backward the branch's cast and the fork's sum
    return casts ? nonvec(cost(1, 10 * d.H, 2, 18 * d.H), 10 * d.H, 0) : cost(1, 6 * d.H, 1, 6 * d.H);
  case Role::MLP_IN:
    return casts ? autocast_inputs(d.mlp_inputs, d.H) : grad_sums(d.mlp_inputs, d.H);
  case Role::ACT:
    if (d.swiglu)
      return eager_silu(d);
    // GPT-2's gelu_new, 0.5·x·(1 + tanh(√(2/π)·(x + 0.044715·x³))): 8 kernels over F (pow runs in fp32 under
    // autocast, so the chain is fp32 and the next linear casts it back), about 12 backward (inferred, §1 "HF GPT-2").
    // Under autocast two of its ops mix the bf16 input with the fp32 chain (10F each way, inferred).
    return casts ? nonvec(cost(10, 80 * d.F, 14, 100 * d.F), 20 * d.F, 20 * d.F) : cost(8, 36 * d.F, 12, 60 * d.F);
  case Role::MUL:
    return eager_swiglu_mul(d);
  default:
    return std::nullopt;
  }
}

/// Megatron-LM / Megatron-DeepSpeed with its fused kernels (model-code-kernels.md §3): apex fused norms (1 forward,
/// 3 backward), fused scale-mask-softmax, jit bias-GeLU, bias-dropout-add as one kernel, 16-bit everywhere.
std::optional<KernelCost> megatron(Role role, const BlockDims& d)
{
  switch (role) {
  case Role::NORM:
    return cost(1, 4 * d.H, 3, 10 * d.H);
  case Role::QKV_IN: // backward: the cat of dq, dk, dv out of the fused QKV's split, and its dbias
    return nonvec(cost(0, 0, d.bias ? 2 : 1, (d.bias ? 6.0 : 4.0) * (d.Q + 2 * d.K)), 0, 4 * (d.Q + 2 * d.K));
  case Role::ROTARY: // Megatron-DeepSpeed's Llama: eager 16-bit `t*cos + rotate_half(t)*sin`
    return nonvec(cost(10, 22 * (d.Q + d.K), 18, 30 * (d.Q + d.K)), 22 * (d.Q + d.K), 24 * (d.Q + d.K));
  case Role::ATTN_LAYOUT: // the context's permute `.contiguous()`; the backward bmm reads strided views
    return nonvec(cost(1, 4 * d.Q, 0, 0), 4 * d.Q, 0);
  case Role::SOFTMAX:
    return megatron_softmax(d);
  case Role::RESID_DROPOUT: // fused into bias-dropout-add
    return cost(0, 0, 0, 0);
  case Role::RESIDUAL: // bias-dropout-add; backward its mask-scale and dbias, and the fork's sum
    return cost(1, 7 * d.H, 3, 13 * d.H);
  case Role::MLP_IN:
    return cost(0, 0, 0, 0);
  case Role::ACT: // jit bias_gelu / bias_gelu_back + dbias; Llama: F.silu
    return d.swiglu ? eager_silu(d) : cost(1, 4 * d.F, 2, 8 * d.F);
  case Role::MUL: // SwiGLU's product, and the backward's cat of the chunked halves
    return nonvec(cost(1, 6 * d.F, 3, 16 * d.F), 0, 4 * d.F);
  default:
    return std::nullopt;
  }
}

/// Megatron-LM before 2020-09-11 (model-code-kernels.md §3 "before 2020-09-11", Megatron-LM@9edfdaec): only the
/// LayerNorm is fused; each parallel linear's bias is its own add, q and k are each scaled, the 16-bit softmax is
/// `masked_fill_` + Softmax, GeLU, dropout and the residual add are separate kernels.
std::optional<KernelCost> megatron_unfused(Role role, const BlockDims& d)
{
  switch (role) {
  case Role::NORM:
    return cost(1, 4 * d.H, 3, 10 * d.H);
  case Role::QKV_IN: // the QKV bias add (a broadcast) and the two scalings forward; the dbias, cat and scalings
                     // backward
    return nonvec(cost(3, 8 * d.Q + 12 * d.K, 3, 8 * d.Q + 12 * d.K), 4 * (d.Q + 2 * d.K), 4 * (d.Q + 2 * d.K));
  case Role::ATTN_LAYOUT:
    return nonvec(cost(1, 4 * d.Q, 0, 0), 4 * d.Q, 0);
  case Role::SOFTMAX: // `masked_fill_` broadcasts the mask
    return nonvec(cost(2, 8 * d.A, 2, 10 * d.A), 4 * d.A, 4 * d.A);
  case Role::RESIDUAL: // the row-parallel linear's bias add (a broadcast), then the residual add; dbias, fork's sum
    return nonvec(cost(2, 10 * d.H, 3, 14 * d.H), 4 * d.H, 0);
  case Role::MLP_IN:
    return cost(0, 0, 0, 0);
  case Role::ACT: // the bias add (a broadcast), then gelu
    return d.swiglu ? eager_silu(d) : nonvec(cost(2, 8 * d.F, 3, 12 * d.F), 4 * d.F, 0);
  case Role::MUL:
    return eager_swiglu_mul(d);
  default:
    return std::nullopt;
  }
}

/// torchtitan's Llama at 1ea476e9f (model-code-kernels.md §4): Triton FusedRMSNorm, the complex-valued rotary
/// (`.float()`, complex mul, `type_as`), repeat_kv copies under GQA, bf16 parameters, no casts.
std::optional<KernelCost> torchtitan(Role role, const BlockDims& d)
{
  switch (role) {
  case Role::NORM:
    return cost(1, 4 * d.H, 3, 6 * d.H);
  case Role::QKV_IN:
    return grad_sums(d.q_inputs, d.H);
  case Role::ROTARY: // the complex mul broadcasts freqs_cis; repeat_kv's copies are strided
    return d.gqa ? nonvec(cost(8, 24 * (d.Q + d.K), 8, 24 * (d.Q + d.K)), 12 * (d.Q + d.K), 12 * (d.Q + d.K))
                 : nonvec(cost(6, 20 * (d.Q + d.K), 6, 20 * (d.Q + d.K)), 8 * (d.Q + d.K), 8 * (d.Q + d.K));
  case Role::ATTN_LAYOUT:
    return nonvec(cost(1, 4 * d.Q, 1, 4 * d.Q), 4 * d.Q, 4 * d.Q);
  case Role::RESIDUAL:
    return cost(1, 6 * d.H, 1, 6 * d.H);
  case Role::MLP_IN:
    return grad_sums(d.mlp_inputs, d.H);
  case Role::ACT:
    return eager_silu(d);
  case Role::MUL:
    return eager_swiglu_mul(d);
  default:
    return std::nullopt;
  }
}

/// llm-foundry's MPT at b2a43a147 (model-code-kernels.md §5): low-precision LayerNorm, fused Wqkv with bias and its
/// split, a Triton or flash-attn kernel whose backward zeroes and copies an fp32 dq accumulator, GELU, no dropout.
std::optional<KernelCost> llm_foundry(Role role, const KernelContext& c, const BlockDims& d)
{
  const int dbias = d.bias ? 1 : 0;
  switch (role) {
  case Role::NORM:
    return cost(1, 4 * d.H, 2, 8 * d.H);
  case Role::QKV_IN: // backward: the cat of dq, dk, dv out of Wqkv's split, and its dbias
    return nonvec(cost(0, 0, 1 + dbias, (4.0 + 2 * dbias) * (d.Q + 2 * d.K)), 0, 4 * (d.Q + 2 * d.K));
  case Role::ROTARY:
    return torchtitan(role, d);
  case Role::ATTN_LAYOUT:
    return c.fused_attention ? cost(0, 0, 2, 10 * d.Q) : nonvec(cost(1, 4 * d.Q, 1, 4 * d.Q), 4 * d.Q, 4 * d.Q);
  case Role::SOFTMAX: // attn_impl torch: scale, masked_fill (a broadcast mask), softmax
    return nonvec(cost(3, 12 * d.A, 3, 14 * d.A), 4 * d.A, 4 * d.A);
  case Role::RESIDUAL: // backward: the fork's sum and the out_proj/down dbias
    return cost(1, 6 * d.H, 1 + dbias, 6 * d.H + 2 * dbias * d.H);
  case Role::MLP_IN:
    return cost(0, 0, 0, 0);
  case Role::ACT: // GELU (erf); backward with the up projection's dbias
    return cost(1, 4 * d.F, 1 + dbias, 6 * d.F + 2 * dbias * d.F);
  case Role::MUL:
    return eager_swiglu_mul(d);
  default:
    return std::nullopt;
  }
}

/// minGPT as mrshenli/ptd_benchmark@2df9b00a ran it (model-code-kernels.md §6): LayerNorm, separate biased q/k/v,
/// `(q @ kᵀ) * scale`, `masked_fill`, softmax and dropout eagerly (matmul copies the permuted q, k, v), GELU.
std::optional<KernelCost> mingpt(Role role, const BlockDims& d)
{
  switch (role) {
  case Role::NORM:
    return cost(1, 4 * d.H, 2, 8 * d.H);
  case Role::QKV_IN: // backward: the dX sums of q, k, v and their three dbias
    return cost(0, 0, 5, 12 * d.H + 2 * d.Q + 4 * d.K);
  case Role::ATTN_LAYOUT: // strided copies of the permuted q, k, v and the merged heads
    return nonvec(cost(4, 8 * (d.Q + d.K), 4, 8 * (d.Q + d.K)), 8 * (d.Q + d.K), 8 * (d.Q + d.K));
  case Role::SOFTMAX: // masked_fill broadcasts the causal mask
    return nonvec(cost(3, 12 * d.A, 3, 14 * d.A), 4 * d.A, 4 * d.A);
  case Role::RESIDUAL:
    return cost(1, 6 * d.H, 2, 8 * d.H);
  case Role::MLP_IN:
    return cost(0, 0, 0, 0);
  case Role::ACT:
    return d.swiglu ? eager_silu(d) : cost(1, 4 * d.F, 2, 8 * d.F);
  case Role::MUL:
    return eager_swiglu_mul(d);
  default:
    return std::nullopt;
  }
}

/// IBM foundation-model-stack's LLaMA under fms-fsdp (model-code-kernels.md §7): LayerNormParameterized with
/// `use_high_precision_pow` (8 kernels, fp32 inside), the real-valued rotary (cast, 2×2 mul, sum, cast), GQA's
/// expand copies, bf16 parameters.
std::optional<KernelCost> fms_fsdp(Role role, const BlockDims& d)
{
  switch (role) {
  case Role::NORM: // the normalisation and the weight broadcast, as hf's RMSNorm in 16-bit
    return nonvec(cost(8, 36 * d.H, 15, 85 * d.H), 12 * d.H, 16 * d.H);
  case Role::QKV_IN:
    return grad_sums(d.q_inputs, d.H);
  case Role::ROTARY: // the 2×2 mul broadcasts the frequencies; GQA's expand copies are strided
    return d.gqa ? nonvec(cost(10, 40 * (d.Q + d.K), 10, 40 * (d.Q + d.K)), 20 * (d.Q + d.K), 20 * (d.Q + d.K))
                 : nonvec(cost(8, 36 * (d.Q + d.K), 8, 36 * (d.Q + d.K)), 16 * (d.Q + d.K), 16 * (d.Q + d.K));
  case Role::ATTN_LAYOUT:
    return nonvec(cost(1, 4 * d.Q, 1, 4 * d.Q), 4 * d.Q, 4 * d.Q);
  case Role::RESIDUAL:
    return cost(1, 6 * d.H, 1, 6 * d.H);
  case Role::MLP_IN:
    return grad_sums(d.mlp_inputs, d.H);
  case Role::ACT:
    return eager_silu(d);
  case Role::MUL:
    return eager_swiglu_mul(d);
  default:
    return std::nullopt;
  }
}

/// torch.compile (Inductor) on top of any code (model-code-kernels.md §4 "compile=true"): every chain of
/// element-wise ops between two library calls (GEMM, attention) becomes one Triton kernel reading the chain's inputs
/// and writing its outputs once. A block is then: residual add + norm (forward one kernel reading x and the branch,
/// writing x' and y; backward dx and the weight-gradient reduction), rotary of q and k with SDPA's casts, the layout
/// copy, SiLU·mul, and the casts and gradient sums folded into their neighbours.
std::optional<KernelCost> compiled(Role role, const BlockDims& d)
{
  switch (role) {
  case Role::NORM:
    return cost(1, 8 * d.H, 2, 10 * d.H);
  case Role::ROTARY:
    return cost(1, 4 * (d.Q + d.K), 2, 4 * (d.Q + d.K));
  case Role::ATTN_LAYOUT:
    return cost(1, 4 * d.Q, 1, 4 * d.Q);
  case Role::SOFTMAX:
    return cost(1, 4 * d.A, 1, 6 * d.A);
  case Role::ACT: // SiLU·mul in one kernel (gate, up in; out); GELU alone
    return d.swiglu ? cost(1, 6 * d.F, 1, 10 * d.F) : cost(1, 4 * d.F, 1, 6 * d.F);
  case Role::QKV_IN:
  case Role::RESIDUAL:
  case Role::MLP_IN:
  case Role::MUL:
    return cost(0, 0, 0, 0);
  default:
    return std::nullopt;
  }
}

/// The op a glue role follows in the block graph (its anchor), by name.
bool anchors(Role glue, const std::string& name)
{
  switch (glue) {
  case Role::QKV_IN:
    return name == "attn_norm";
  case Role::ATTN_LAYOUT:
    return name == "attn.flash" || name == "attn.context";
  case Role::MLP_IN:
    return name == "mlp_norm";
  default:
    return false;
  }
}

const char* glue_name(Role glue)
{
  switch (glue) {
  case Role::QKV_IN:
    return "attn.qkv_in";
  case Role::ATTN_LAYOUT:
    return "attn.layout";
  default:
    return "mlp.in";
  }
}

void apply(Op& op, const KernelCost& c, const KernelContext& ctx)
{
  const double scale = ctx.activation_bytes / 2.0;
  op.fwd_kernels = c.fwd_kernels;
  op.fwd_bytes = c.fwd_bytes * scale;
  op.fwd_nonvec_bytes = c.fwd_nonvec * scale;
  op.bwd_kernels = ctx.inference ? 0 : c.bwd_kernels;
  op.bwd_bytes = ctx.inference ? 0 : c.bwd_bytes * scale;
  op.bwd_nonvec_bytes = ctx.inference ? 0 : c.bwd_nonvec * scale;
}

} // namespace

Role role_of(const std::string& name)
{
  static const std::map<std::string, Role> roles{{"attn_norm", Role::NORM},
                                                 {"mlp_norm", Role::NORM},
                                                 {"final_norm", Role::NORM},
                                                 {"attn.rotary", Role::ROTARY},
                                                 {"attn.softmax", Role::SOFTMAX},
                                                 {"attn.resid_dropout", Role::RESID_DROPOUT},
                                                 {"mlp.resid_dropout", Role::RESID_DROPOUT},
                                                 {"attn.residual", Role::RESIDUAL},
                                                 {"mlp.residual", Role::RESIDUAL},
                                                 {"mlp.act", Role::ACT},
                                                 {"mlp.mul", Role::MUL},
                                                 {"attn.qkv_in", Role::QKV_IN},
                                                 {"attn.layout", Role::ATTN_LAYOUT},
                                                 {"mlp.in", Role::MLP_IN}};
  const auto it = roles.find(name);
  return it == roles.end() ? Role::OTHER : it->second;
}

std::optional<KernelCost> role_cost(Role role, const KernelContext& ctx, const BlockDims& d)
{
  if (role == Role::OTHER)
    return std::nullopt;
  if (ctx.compiled)
    return compiled(role, d);
  switch (ctx.code) {
  case spec::ModelCode::AUTO:
    throw core::InternalError("workload: model code not resolved (auto)");
  case spec::ModelCode::HF:
    return hf(role, ctx, d);
  case spec::ModelCode::MEGATRON:
    return megatron(role, d);
  case spec::ModelCode::MEGATRON_UNFUSED:
    return megatron_unfused(role, d);
  case spec::ModelCode::TORCHTITAN:
    return torchtitan(role, d);
  case spec::ModelCode::LLM_FOUNDRY:
    return llm_foundry(role, ctx, d);
  case spec::ModelCode::MINGPT:
    return mingpt(role, d);
  case spec::ModelCode::FMS_FSDP:
    return fms_fsdp(role, d);
  }
  return std::nullopt;
}

void price_block_kernels(std::vector<Op>& ops, const KernelContext& ctx, const BlockDims& d)
{
  std::vector<Op> out;
  out.reserve(ops.size() + 3);
  for (Op& op : ops) {
    // Under GQA a fused kernel's backward reduces dK and dV over each group (compute::op_kernels counts them).
    if (op.kind == OpKind::ATTENTION && is_fused_attention(op) && d.gqa && !ctx.inference)
      op.gqa_reductions = true;
    if (op.kind == OpKind::ELEMENTWISE)
      if (const std::optional<KernelCost> c = role_cost(role_of(op.name), ctx, d))
        apply(op, *c, ctx);
    out.push_back(std::move(op));
    for (const Role glue : {Role::QKV_IN, Role::ATTN_LAYOUT, Role::MLP_IN}) {
      if (!anchors(glue, out.back().name))
        continue;
      const std::optional<KernelCost> c = role_cost(glue, ctx, d);
      if (!c || (c->fwd_kernels == 0 && (ctx.inference || c->bwd_kernels == 0)))
        continue;
      Op g;
      g.name = glue_name(glue);
      g.kind = OpKind::ELEMENTWISE;
      g.recomputed = out.back().recomputed;
      g.selective_recompute = out.back().selective_recompute;
      apply(g, *c, ctx);
      out.push_back(std::move(g));
    }
  }
  ops = std::move(out);
}

} // namespace zerosim::workload::detail
