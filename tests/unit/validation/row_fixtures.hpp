// Published rows both validation test files use, with the columns the mappings read as written in
// results/validation/published.csv.
#pragma once

#include "validation/published_rows.hpp"

namespace zerosim::validation::test {

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
