// DeepSpeed's model-states memory estimators, to the letter (docs/deepspeed-schedule.md §10.2): the same
// arithmetic, the same int() truncations, the same additional_buffer_factor 1.5, the same GiB (/2**30)
// table. Model states only: no activations, no communication buffers, no allocator overhead (see
// docs/memory.md for how this differs from the full replay in memory_model.hpp).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace zerosim::memory {

/// DeepSpeed's default `additional_buffer_factor` of both estimators (stage_1_and_2.py, stage3.py).
inline constexpr double ADDITIONAL_BUFFER_FACTOR = 1.5;
/// The estimators print bytes / 2**30 with the unit written "GB" (docs/deepspeed-schedule.md §10.2).
inline constexpr double BYTES_PER_GIB = 1073741824.0;

/// What one estimator call returns (bytes). `largest_layer_memory` is stage 3 only (4 x largest layer).
struct ModelStatesEstimate {
  std::int64_t cpu_bytes = 0;            ///< per CPU (DeepSpeed's "per CPU": one node's host memory)
  std::int64_t gpu_bytes = 0;            ///< per GPU
  std::int64_t largest_layer_memory = 0; ///< bytes; 0 for the ZeRO-2 estimator
};

/// `stage_1_and_2.py:estimate_zero2_model_states_mem_needs` (docs/deepspeed-schedule.md §10.2), verbatim:
///   cpu_offload: gpu = 2Ψ; cpu = Ψ · max(4·total_gpus, 16) · abf
///   otherwise:   gpu = 2Ψ + int(18Ψ / total_gpus); cpu = Ψ · 4 · gpus_per_node · abf
/// both returned through int().
ModelStatesEstimate estimate_zero2_model_states_mem_needs(std::int64_t total_params, int num_gpus_per_node = 1,
                                                          int num_nodes = 1, bool cpu_offload = true,
                                                          double additional_buffer_factor = ADDITIONAL_BUFFER_FACTOR);

/// The OLDER ZeRO-2 (no offload) GPU formula that DeepSpeed's docs/code-docs/source/memory.rst still
/// prints and describes: gpu = 4Ψ + int(16Ψ / total_gpus) (2 lp params + 2 lp grads replicated, 16 bytes of
/// fp32 states partitioned). It gives the 15.93 GiB of memory.rst's t5-3b example where the current code
/// gives 11.28 GiB (docs/deepspeed-schedule.md §10.2). The CPU term is the current code's no-offload term (memory.rst
/// prints the same 127.48 GiB). Kept only to reproduce that published figure; the code is authoritative.
ModelStatesEstimate
estimate_zero2_model_states_mem_needs_older(std::int64_t total_params, int num_gpus_per_node = 1, int num_nodes = 1,
                                            double additional_buffer_factor = ADDITIONAL_BUFFER_FACTOR);

/// `stage3.py:estimate_zero3_model_states_mem_needs` (docs/deepspeed-schedule.md §10.2), verbatim, including
/// gpus_factor = 1/num_nodes in the CPU terms and the int() truncations.
ModelStatesEstimate estimate_zero3_model_states_mem_needs(std::int64_t total_params, std::int64_t largest_layer_params,
                                                          int num_gpus_per_node = 1, int num_nodes = 1,
                                                          bool cpu_offload = true, bool cpu_offload_params = true,
                                                          bool zero_init = true,
                                                          double additional_buffer_factor = ADDITIONAL_BUFFER_FACTOR);

/// A question to the estimators (what `zerosim memory --estimator` asks).
struct EstimatorQuery {
  std::int64_t total_params = 0;
  std::int64_t largest_layer_params = 0; ///< stage 3 only: max over modules of the module's own params
  int gpus_per_node = 1;
  int nodes = 1;
  int stage = 3;                  ///< 2 or 3 (DeepSpeed has these two estimators)
  bool offload_optimizer = false; ///< DeepSpeed's `cpu_offload`
  bool offload_param = false;     ///< DeepSpeed's `cpu_offload_params` (stage 3, with offload_optimizer)
  double additional_buffer_factor = ADDITIONAL_BUFFER_FACTOR;
};

/// One line of DeepSpeed's `..._all_cold` / `..._all_live` table.
struct EstimatorRow {
  int stage = 3;
  bool offload_optimizer = false;
  bool offload_param = false; ///< always false for stage 2
  bool zero_init = true;      ///< stage 3 only; stage 2 rows carry true and do not print it
  std::int64_t cpu_bytes = 0;
  std::int64_t gpu_bytes = 0;
  double cpu_gib = 0;  ///< cpu_bytes / 2**30 (what DeepSpeed prints, "%7.2f")
  double gpu_gib = 0;  ///< gpu_bytes / 2**30 ("%6.2f")
  std::string options; ///< DeepSpeed's options column, e.g. "offload_param=none, ..."
};

/// Every row of DeepSpeed's table for the query's stage, in DeepSpeed's order, whatever the query's
/// offload flags: stage 2: offload_optimizer cpu, none; stage 3: (param, optimizer) = (cpu, cpu),
/// (none, cpu), (none, none), each with zero_init 1 then 0 (`_all_cold`).
std::vector<EstimatorRow> estimate_all_cold(const EstimatorQuery& q);

/// The rows of that table that match the query's offload flags (one for stage 2; zero_init 1 and 0 for
/// stage 3). Throws core::InputError for a query DeepSpeed's estimators cannot answer (stage other than 2
/// or 3, non-positive counts, offload_param without offload_optimizer or at stage 2).
std::vector<EstimatorRow> estimate_rows(const EstimatorQuery& q);

/// DeepSpeed's printed table: the header lines ("Estimated memory needed for params, optim states and
/// gradients for a:", "HW: ...", "SW: Model with {int(Ψ/1e6)}M total params[, {int(L/1e6)}M largest layer
/// params].", "  per CPU  |  per GPU |   Options") then one line per row " {cpu:7.2f}GB | {gpu:6.2f}GB | {options}".
std::string format_estimator_table(const EstimatorQuery& q, const std::vector<EstimatorRow>& rows);

} // namespace zerosim::memory
