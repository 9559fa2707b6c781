// The spelling of each spec enum value, as scenario files and reports write it (scenario-format.md).
// One place for every layer: config writes resolved YAML with it, reports print it.
#pragma once

#include "spec/scenario_spec.hpp"

namespace zerosim::spec {

inline const char* to_string(Precision p)
{
  switch (p) {
    case Precision::BF16: return "bf16";
    case Precision::FP16: return "fp16";
    case Precision::AMP_BF16: return "amp_bf16";
    case Precision::AMP_FP16: return "amp_fp16";
    case Precision::FP32: break;
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

} // namespace zerosim::spec
