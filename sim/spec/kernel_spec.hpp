// The software stack that ran (docs/scenario-format.md `software:`) and the kernel efficiency data it selects
// (calibration/kernels.yaml, read by the config layer; docs/compute.md §1.4). Plain data, no behaviour.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace zerosim::spec {

/// The attention kernel of the run (docs/scenario-format.md `software.attention`).
///  EAGER          unfused: QKᵀ and PV as batched GEMMs, the s×s scores materialised (incl. Megatron's fused
///                 softmax); SDPA_MATH: PyTorch SDPA's math backend, the same work
///  MEM_EFFICIENT  xformers' / PyTorch SDPA's memory-efficient CUTLASS kernel
///  FLASH1 / TRITON_FLASH / FLASH2 / FLASH3 / CUDNN  fused kernels (FlashAttention 1-3, the Triton tutorial
///                 kernel as llm-foundry ran it, cuDNN's fused attention)
enum class AttentionKernel { EAGER, SDPA_MATH, MEM_EFFICIENT, FLASH1, TRITON_FLASH, FLASH2, FLASH3, CUDNN };

/// True for the kernels that never materialise the s×s scores (all but EAGER and SDPA_MATH).
inline bool is_fused(AttentionKernel k)
{
  return k != AttentionKernel::EAGER && k != AttentionKernel::SDPA_MATH;
}

/// The model code that ran (docs/scenario-format.md `software.model_code`): it fixes the element-wise kernels each
/// block launches, their dtypes and bytes (docs/workload.md §5.2, docs/research/model-code-kernels.md).
///  AUTO              the framework's usual code (Scenario::model_code): Megatron's for DeepSpeed, Hugging Face's for
///                    PyTorch DDP and FSDP
///  HF                transformers' eager modules (RMSNorm as several fp32 kernels, eager rotary, autocast's casts)
///  MEGATRON          Megatron-LM / Megatron-DeepSpeed from 2020-09 on: apex fused norms, fused scale-mask-softmax,
///                    jit bias-gelu and bias-dropout-add
///  MEGATRON_UNFUSED  Megatron-LM before its fused kernels (2020-09-11): only the norm is fused
///  TORCHTITAN        torchtitan's Llama (Triton fused RMSNorm, complex rotary, bf16 parameters)
///  LLM_FOUNDRY       MosaicML llm-foundry's MPT (low-precision LayerNorm, bias, GELU)
///  MINGPT            minGPT (as PyTorch's FSDP benchmark ran it: eager attention, LayerNorm, GELU, dropout)
///  FMS_FSDP          IBM foundation-model-stack's LLaMA under fms-fsdp (eager fp32 RMSNorm, real-valued rotary)
enum class ModelCode { AUTO, HF, MEGATRON, MEGATRON_UNFUSED, TORCHTITAN, LLM_FOUNDRY, MINGPT, FMS_FSDP };

/// docs/scenario-format.md `software:`.
struct SoftwareSpec {
  AttentionKernel attention = AttentionKernel::FLASH2;
  bool compile = false;
  ModelCode model_code = ModelCode::AUTO;
  std::string torch = "2.6"; ///< major.minor; the data of the nearest earlier generation applies
  bool stated = false;       ///< false: the block was absent and today's stack is assumed
};

/// One figure of calibration/kernels.yaml with where it comes from.
struct KernelFigure {
  double value = 0;
  std::string source;
  std::string status; ///< measured | stated
};

/// A GEMM cap that applies from torch version `torch` on (until the next entry of its kind).
struct GemmGeneration {
  std::string torch; ///< "1.13"
  KernelFigure max;  ///< achieved / dense peak of a large, well-shaped GEMM
};

/// What a 16-bit GEMM with an operand row not a multiple of 16 bytes (n or k not a multiple of 8 elements) runs at,
/// as a share of the same GEMM aligned, from torch version `torch` on (docs/compute.md §1.2 "Alignment"). 1: no
/// figure, priced as aligned.
struct MisalignedGemmGeneration {
  std::string torch; ///< "1.0"
  double fp16 = 1;
  double bf16 = 1;
  KernelFigure figure; ///< status and source (value unused)
};

/// A fused attention kernel's achieved fraction of the dense peak, in the kernel's own FLOP count.
struct AttentionFigure {
  KernelFigure fwd;
  KernelFigure bwd;
  bool causal_skip = true; ///< the kernel skips fully masked tiles of a causal mask (half the square)
  /// The share of the kernel's time at head dim 128 that does not scale with the head dim (the softmax's
  /// exponentials and rescaling, per score element; the matmuls are per score element x d). At head dim d the
  /// kernel's time per FLOP is (1 - share) + share x 128 / d of its figure's (docs/compute.md §1.3). 0: none known.
  double fwd_softmax_share = 0;
  double bwd_softmax_share = 0;
  /// The rate's rise with the key length s: every published fused kernel's rate follows r∞ / (1 + s0 / s) (faster
  /// with s, level by 8k-16k; docs/research/attention-rate-by-sequence.md §2). The figures are at s = 4096, so at s
  /// the rate is the figure x (1 + s0 / 4096) / (1 + s0 / s). 0: flat.
  double seq_half = 0;
};

/// A GPU name as kinds match it: upper-cased, without '-', '_' and blanks ("A100-SXM4 80GB" -> "A100SXM480GB").
/// Both gpu.model and the data's `match` / `match_also` names go through it.
inline std::string gpu_match_name(std::string_view model)
{
  std::string name;
  for (char c : model)
    if (c != '-' && c != '_' && c != ' ')
      name += (c >= 'a' && c <= 'z') ? static_cast<char>(c - 'a' + 'A') : c;
  return name;
}

/// The data of one GPU kind.
struct GpuKindData {
  std::string kind;                    ///< "A100"
  std::vector<std::string> match;      ///< names matched in gpu.model (gpu_match_name form)
  std::vector<std::string> match_also; ///< every one of these must be present too ("PCIE")
  int sms = 0;
  KernelFigure hbm; ///< achieved / nominal HBM bandwidth of a streaming kernel
  /// Achieved bandwidth of PyTorch's non-vectorized element-wise kernels (TensorIterator's broadcast, strided,
  /// mixed-dtype and casting paths) / that of the streaming kernel; value 0: not given, priced as streaming.
  KernelFigure hbm_nonvectorized;
  std::vector<GemmGeneration> gemm;                      ///< ascending torch versions
  std::vector<MisalignedGemmGeneration> misaligned_gemm; ///< ascending torch versions; empty: priced as aligned
  /// Fused kernels that run on this kind, in file order (the first is the fallback of attention_figure).
  std::vector<std::pair<AttentionKernel, AttentionFigure>> attention;
  /// CTAs of an NCCL collective kernel inside one node of this kind (interference); value 0: the table's nccl_ctas.
  KernelFigure nccl_ctas;
};

/// The host (CPU) cost of issuing GPU work from PyTorch, from torch version `torch` on (until the next entry):
/// calibration/kernels.yaml `host:`, docs/compute.md §1.7. Values in seconds.
struct HostGeneration {
  std::string torch;        ///< "2.0"
  KernelFigure eager_op;    ///< per forward op from eager Python: Python, dispatcher, autograd record, launch
  KernelFigure backward_op; ///< per kernel the C++ autograd engine launches in backward (no Python)
  KernelFigure compiled_op; ///< per kernel launched by a torch.compile (Inductor) graph's wrapper
  KernelFigure hook_param;  ///< per parameter per framework hook (FSDP unshard / reshard, ZeRO-1/2 gradient hook)
};

/// calibration/kernels.yaml, in file order (the first kind whose names match wins; the last kind is the
/// fallback for unknown GPUs).
struct KernelTable {
  std::string file;
  std::vector<GpuKindData> kinds;
  std::vector<HostGeneration> host; ///< ascending torch versions; empty: no host cost is known (none priced)
  /// CTAs (one SM each) an NCCL collective kernel inside one node occupies while it runs, for a kind that gives no
  /// figure of its own (interference, docs/engine.md). 0: no interference.
  KernelFigure nccl_ctas;
  /// The one-node CTA count of GPU kind `kind` (its own figure, else the table's).
  double one_node_ctas(const GpuKindData& kind) const
  {
    return kind.nccl_ctas.value > 0 ? kind.nccl_ctas.value : nccl_ctas.value;
  }
  /// Sustained tensor-core clock under a power cap: (power_limit / tdp)^exponent (docs/compute.md §1.8). 0: none.
  KernelFigure clock_power_exponent;
  bool empty() const { return kinds.empty(); }

  /// The kind of a GPU named `model` (gpu.model): the first kind with one of `match` and every one of
  /// `match_also` in gpu_match_name(model); else the last kind, `known` = false. Requires a non-empty table.
  const GpuKindData& kind_of(const std::string& model, bool* known = nullptr) const
  {
    const std::string name = gpu_match_name(model);
    const auto has = [&](const std::string& part) { return name.find(part) != std::string::npos; };
    for (const GpuKindData& k : kinds) {
      bool any = false;
      for (const std::string& m : k.match)
        any = any || has(m);
      bool all = true;
      for (const std::string& m : k.match_also)
        all = all && has(m);
      if (any && all) {
        if (known)
          *known = true;
        return k;
      }
    }
    if (known)
      *known = false;
    return kinds.back();
  }
};

/// A torch generation "major.minor" as one ordered number (major x 1000 + minor): "1.13" -> 1013, "2.10" -> 2010;
/// nullopt for anything else (each part 1 to 3 digits). The one parser of software.torch and the data's `torch`.
inline std::optional<int> torch_generation(const std::string& v)
{
  const std::size_t dot = v.find('.');
  const auto digits = [](const std::string& x) {
    return !x.empty() && x.size() <= 3 && x.find_first_not_of("0123456789") == std::string::npos;
  };
  if (dot == std::string::npos || !digits(v.substr(0, dot)) || !digits(v.substr(dot + 1)))
    return std::nullopt;
  return std::stoi(v.substr(0, dot)) * 1000 + std::stoi(v.substr(dot + 1));
}

/// The entry of `entries` (each with a `torch` field, ascending, validated by the loader) for torch generation
/// `torch`: the nearest earlier one, or the first when `torch` is older than all. Requires a non-empty list.
template <class Entry> const Entry& nearest_generation(const std::vector<Entry>& entries, const std::string& torch)
{
  const int want = torch_generation(torch).value_or(0);
  const Entry* best = &entries.front();
  for (const Entry& e : entries)
    if (torch_generation(e.torch).value_or(0) <= want)
      best = &e;
  return *best;
}

/// The GEMM cap of `kind` for torch generation `torch`.
inline const GemmGeneration& gemm_generation(const GpuKindData& kind, const std::string& torch)
{
  return nearest_generation(kind.gemm, torch);
}

/// The host cost entry for torch generation `torch`.
inline const HostGeneration& host_generation(const std::vector<HostGeneration>& host, const std::string& torch)
{
  return nearest_generation(host, torch);
}

/// The figures a fused attention kernel runs at on `kind`: its own entry; when it does not run there (no
/// entry), the kind's first listed fused kernel (file order), named in `used` (the config layer warns).
/// nullptr when the kind lists no fused kernel at all: the loader refuses such a kind, and compute's
/// gpu_efficiency reports it as an internal error.
inline const AttentionFigure* attention_figure(const GpuKindData& kind, AttentionKernel kernel,
                                               AttentionKernel* used = nullptr)
{
  if (kind.attention.empty())
    return nullptr;
  const std::pair<AttentionKernel, AttentionFigure>* found = &kind.attention.front();
  for (const auto& entry : kind.attention)
    if (entry.first == kernel) {
      found = &entry;
      break;
    }
  if (used)
    *used = found->first;
  return &found->second;
}

} // namespace zerosim::spec
