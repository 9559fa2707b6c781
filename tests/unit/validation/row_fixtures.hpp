// Published rows both validation test files use, with the columns the mappings read as written in
// results/validation/published.csv.
#pragma once

#include "spec/node_spec.hpp"
#include "validation/published_rows.hpp"

#include <string>

namespace zerosim::validation::test {

/// Stand-ins for the node files, so that the mappings are tested alone: topologies/dgx-2.yaml (16 x V100 32 GiB,
/// 1.5 TiB host, 8 x 100 Gb/s: NVIDIA DGX-2 datasheet), topologies/azure-ndm-a100-v4.yaml (8 x A100 80 GiB,
/// 1900 GiB host of which 340 GB reserved, 8 x 200 Gb/s: Microsoft Learn NDm A100 v4-series), dgx-h100.yaml
/// (8 x H100 80 GiB, 2 TiB host, 8 x 400 Gb/s ConnectX-7: NVIDIA DGX H100 datasheet), dgx-a100-80gb.yaml (8 x
/// A100 80 GiB, 2 TiB host, 8 x 200 Gb/s HDR: NVIDIA DGX A100 datasheet), aws-p4de-24xlarge.yaml (8 x A100 80 GiB,
/// 1152 GiB host, 4 x 100 Gb/s EFA: AWS EC2 P4 instance page) and workstation-2x-titan-rtx.yaml (2 x TITAN RTX
/// 24 GiB, one 10 Gb/s NIC).
inline spec::NodeSpec fake_node(const std::string& name)
{
  spec::NodeSpec n;
  n.name = name;
  if (name == "dgx-h100" || name == "dgx-a100-80gb" || name == "aws-p4de-24xlarge") {
    n.gpu.model = name == "dgx-h100" ? "H100-SXM5-80GB" : "A100-SXM4-80GB";
    n.gpu.memory_bytes = 80LL << 30;
    n.gpus = 8;
    n.cpu.memory_bytes = name == "aws-p4de-24xlarge" ? 1152LL << 30 : 2048LL << 30;
    n.nics.count = name == "aws-p4de-24xlarge" ? 4 : 8;
    n.nics.bandwidth_Bps = name == "dgx-h100" ? 50e9 : name == "dgx-a100-80gb" ? 25e9 : 12.5e9;
  } else if (name == "workstation-2x-titan-rtx") {
    n.gpu.model = "TITAN-RTX-24GB";
    n.gpu.memory_bytes = 24LL << 30;
    n.gpus = 2;
    n.cpu.memory_bytes = 128LL << 30;
    n.nics.count = 1;
    n.nics.bandwidth_Bps = 1.25e9;
  } else if (name == "azure-ndm-a100-v4") {
    n.gpu.model = "A100-SXM4-80GB";
    n.gpu.memory_bytes = 80LL << 30;
    n.gpus = 8;
    n.cpu.memory_bytes = 1900LL << 30;
    n.cpu.reserved_bytes = 340'000'000'000LL;
    n.nics.count = 8;
    n.nics.bandwidth_Bps = 25e9;
  } else {
    n.gpu.model = "V100-SXM3-32GB";
    n.gpu.memory_bytes = 32LL << 30;
    n.gpus = 16;
    n.cpu.memory_bytes = 1536LL << 30;
    n.nics.count = 8;
    n.nics.bandwidth_Bps = 12.5e9;
  }
  return n;
}

/// published.csv row 318 (the PyTorch FSDP paper, Figs 7(b) and 8(b): minGPT 175B on 128 A100 80 GB, micro-batch 1):
/// the columns the mappings read, as written there.
inline PublishedRow row_318()
{
  return {{"row_id", "318"},
          {"source_id", "S13"},
          {"locator", "Figs 7(b) TFLOPS and 8(b) memory; Sec 5.4 text"},
          {"evidence_type", "chart-read (+/-2)"},
          {"provenance", "measured"},
          {"framework", "PyTorch FSDP"},
          {"model", "minGPT 175B (GPT-3 dims assumed)"},
          {"params_B", "175"},
          {"layers", "96 (assumed)"},
          {"hidden", "12288 (assumed)"},
          {"heads", "96 (assumed)"},
          {"seq_len", "2048"},
          {"vocab", "50000"},
          {"gpu", "A100"},
          {"gpu_mem_GB", "80"},
          {"gpus_per_node", "8"},
          {"nodes", "16"},
          {"total_gpus", "128"},
          {"inter_node_network", "2 Tb/s RoCE"},
          {"zero_stage", "3-equivalent"},
          {"fsdp_sharding", "FULL_SHARD + backward prefetch + rate limiter"},
          {"dp", "128"},
          {"global_batch", "128"},
          {"micro_batch", "1"},
          {"precision", "bf16 mixed"},
          {"activation_checkpointing", "yes (Sec 5.4: AC + BF16 + Adam)"},
          {"tflops_per_gpu", "173.5"},
          {"tflops_includes_recompute", "not stated"},
          {"peak_mem_GB", "47"},
          {"mem_metric", "peak allocated 47 / active 63 / reserved 78 GB"},
          {"completeness", "A"}};
}

} // namespace zerosim::validation::test
