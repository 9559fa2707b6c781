// The spelling of each spec enum value, as scenario files and reports write it (docs/scenario-format.md).
// One place for every layer: config writes resolved YAML with it, reports print it.
#pragma once

#include "spec/scenario_spec.hpp"

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

namespace zerosim::spec {

inline const char* to_string(Precision p)
{
  switch (p) {
  case Precision::BF16:
    return "bf16";
  case Precision::FP16:
    return "fp16";
  case Precision::AMP_BF16:
    return "amp_bf16";
  case Precision::AMP_FP16:
    return "amp_fp16";
  case Precision::FP32:
    break;
  }
  return "fp32";
}

inline const char* to_string(Dtype d)
{
  return d == Dtype::FP32 ? "fp32" : d == Dtype::FP16 ? "fp16" : "bf16";
}

inline const char* to_string(OffloadDevice d)
{
  return d == OffloadDevice::CPU ? "cpu" : d == OffloadDevice::NVME ? "nvme" : "none";
}

inline const char* to_string(Framework f)
{
  return f == Framework::FSDP ? "fsdp" : f == Framework::DDP ? "ddp" : "deepspeed";
}

/// The group a scenario's calibration accuracy band is kept under: "<GPU kind> / <framework>".
inline std::string accuracy_group(const Scenario& s)
{
  return accuracy_group(s.gpu_kind(), to_string(s.framework));
}

/// PyTorch's ShardingStrategy member name.
inline const char* to_string(FsdpSharding f)
{
  switch (f) {
  case FsdpSharding::SHARD_GRAD_OP:
    return "SHARD_GRAD_OP";
  case FsdpSharding::HYBRID_SHARD:
    return "HYBRID_SHARD";
  case FsdpSharding::NO_SHARD:
    return "NO_SHARD";
  case FsdpSharding::FULL_SHARD:
    break;
  }
  return "FULL_SHARD";
}

inline const char* to_string(Checkpointing c)
{
  switch (c) {
  case Checkpointing::FULL:
    return "full";
  case Checkpointing::SELECTIVE:
    return "selective";
  case Checkpointing::PER_OP:
    return "per_op";
  case Checkpointing::NONE:
    break;
  }
  return "none";
}

/// Every attention kernel with its name as scenario files write it (docs/scenario-format.md `software.attention`).
inline constexpr std::pair<const char*, AttentionKernel> ATTENTION_KERNELS[] = {
    {"eager", AttentionKernel::EAGER},
    {"sdpa_math", AttentionKernel::SDPA_MATH},
    {"mem_efficient", AttentionKernel::MEM_EFFICIENT},
    {"flash1", AttentionKernel::FLASH1},
    {"triton_flash", AttentionKernel::TRITON_FLASH},
    {"flash2", AttentionKernel::FLASH2},
    {"flash3", AttentionKernel::FLASH3},
    {"cudnn", AttentionKernel::CUDNN},
};

/// Every model code with its name as scenario files write it (docs/scenario-format.md `software.model_code`).
inline constexpr std::pair<const char*, ModelCode> MODEL_CODES[] = {
    {"auto", ModelCode::AUTO},
    {"hf", ModelCode::HF},
    {"megatron", ModelCode::MEGATRON},
    {"megatron_unfused", ModelCode::MEGATRON_UNFUSED},
    {"torchtitan", ModelCode::TORCHTITAN},
    {"llm_foundry", ModelCode::LLM_FOUNDRY},
    {"mingpt", ModelCode::MINGPT},
    {"fms_fsdp", ModelCode::FMS_FSDP},
};

/// A name table's helpers (ATTENTION_KERNELS, MODEL_CODES): the name of a value, the value of a name, the names.
template <typename E, std::size_t N> const char* name_in(const std::pair<const char*, E> (&table)[N], E value)
{
  for (const auto& [name, v] : table)
    if (v == value)
      return name;
  return table[0].first;
}

template <typename E, std::size_t N>
std::optional<E> value_in(const std::pair<const char*, E> (&table)[N], std::string_view name)
{
  for (const auto& [n, v] : table)
    if (name == n)
      return v;
  return std::nullopt;
}

template <typename E, std::size_t N>
std::string names_in(const std::pair<const char*, E> (&table)[N], std::string_view separator)
{
  std::string out;
  for (const auto& [n, v] : table) {
    if (!out.empty())
      out += separator;
    out += n;
  }
  return out;
}

inline const char* to_string(ModelCode c)
{
  return name_in(MODEL_CODES, c);
}

/// The model code a scenario file names `name` (MODEL_CODES); none for an unknown name.
inline std::optional<ModelCode> model_code(std::string_view name)
{
  return value_in(MODEL_CODES, name);
}

/// The names of MODEL_CODES joined by `separator`, for schemas and messages.
inline std::string model_code_names(std::string_view separator = "|")
{
  return names_in(MODEL_CODES, separator);
}

/// Every switchable mechanism with its name (`--without NAME`) and the flag it sets.
inline constexpr std::pair<const char*, bool Mechanisms::*> MECHANISMS[] = {
    {"stack", &Mechanisms::stack},
    {"protocols", &Mechanisms::nccl_protocols},
    {"busbw", &Mechanisms::achieved_busbw},
    {"leaf_fetch", &Mechanisms::per_module_fetch},
    {"host", &Mechanisms::host_dispatch},
    {"clock", &Mechanisms::sustained_clock},
    {"interference", &Mechanisms::interference},
    {"communicator", &Mechanisms::communicator},
    {"copies", &Mechanisms::copies},
    {"allocator", &Mechanisms::allocator},
    {"alloc_order", &Mechanisms::allocation_order},
    {"model_code", &Mechanisms::model_code},
    {"alignment", &Mechanisms::alignment},
};

inline const char* to_string(AttentionKernel k)
{
  return name_in(ATTENTION_KERNELS, k);
}

/// The kernel a scenario file names `name` (ATTENTION_KERNELS); none for an unknown name.
inline std::optional<AttentionKernel> attention_kernel(std::string_view name)
{
  return value_in(ATTENTION_KERNELS, name);
}

/// The names of ATTENTION_KERNELS joined by `separator` ("eager|sdpa_math|..."), for schemas and messages.
inline std::string attention_kernel_names(std::string_view separator = "|")
{
  return names_in(ATTENTION_KERNELS, separator);
}

} // namespace zerosim::spec
