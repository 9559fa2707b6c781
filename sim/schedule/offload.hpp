// Internal to the schedule component (docs/deepspeed-schedule.md is cited as §n): the offload paths (ZeRO-Offload
// for stage 1/2, §3.6; stage 3 CPU offload, §6.1-§6.2; NVMe optimizer and parameter swapping, §7-§8).
#pragma once

#include "schedule/schedule_builder.hpp"

#include <cstdint>
#include <string>
#include <vector>

namespace zerosim::schedule::detail {

// ---- stage 1/2 + offload_optimizer (any device != none is CPU offload, §3.6 last bullet) ----

/// Host and GPU buffers of ZeRO-Offload (§3.6, §10.1 row "1/2 + offload cpu"). `part` = P (padded
/// partition), `p_in` = Σ numel of the params touching this rank's partition.
void stage12_offload_residents(Builder& b, std::int64_t part, std::int64_t p_in);

/// The PCIe copies after one bucket's all-reduce, for its in-partition params (§3.6 backward path):
/// `e_in` elements of the params touching the partition, `e_slice` elements inside it; `mb` labels the tasks,
/// `micro_step_id` is DeepSpeedZeroOptimizer's (the backwards the step ran before this one: the micro-step index
/// without a pipeline, 0 at a pipeline stage's ReduceGrads, docs/pipeline-parallel.md §6).
/// Issued on `st` (the stream of the reduction). Returns the last task issued (or -1).
TaskId stage12_offload_bucket_copies(Builder& b, const std::string& name, int mb, int micro_step_id, bool boundary,
                                     std::int64_t e_in, std::int64_t e_slice, Stream st);

/// Whether a stage-1/2 ZeRO-Offload step ever accumulates gradients through the host (async_accumulate_grad_in_cpu_
/// via_gpu, §3.6), which allocates accumulated_grads_in_cpu: with g > 1 micro-steps; on a pipeline stage only at
/// 0.16, whose condition is g > 1 alone (0.19's also needs micro_step_id > 0, which a pipeline's one ReduceGrads never
/// has).
bool stage12_offload_accumulates(const Builder& b);

/// The CPU step (§3.6 `step()` cpu_offload branch): CPU Adam over P, then the lp update back to the
/// GPU (0.19: cast into the pinned lp staging buffer + H2D P·b_lp; 0.16: H2D 4P + cast on the GPU).
/// Returns the last task before the post-step all-gather.
TaskId stage12_offload_step(Builder& b, std::int64_t part, std::vector<TaskId> deps);

// ---- stage 3 ----

/// `io_aligned`: `numel` elements of `elem_bytes` rounded up to AIO_ALIGNED_BYTES·intra_op_parallelism bytes (§7).
std::int64_t io_aligned(std::int64_t numel, int elem_bytes, int intra_op);

/// The pinned NVMe parameter swap pool (§8): offload_param.buffer_count × io_aligned(buffer_size) lp elements.
std::int64_t param_swap_pool_bytes(const Builder& b);

/// DeepSpeed's get_buffer assert (§8): an NVMe-resident partition of `part` elements must fit one swap buffer
/// (offload_param.buffer_size); throws core::InputError naming param `p` otherwise.
void check_swap_buffer_fits(const Builder& b, std::size_t p, std::int64_t part);

/// Where a stage-3 sub-group's fp32 master, grads and optimizer states live (§6.1, §7).
enum class SubGroupHome { GPU, CPU, NVME };

struct SubGroup {
  std::int64_t elements = 0; ///< Σ partition numel of its params
  std::vector<int> params;   ///< indices into Builder::params
  SubGroupHome home = SubGroupHome::GPU;
  std::int64_t nvme_lp_elements = 0; ///< offload_param nvme: partition elements living on NVMe (§8)
};

/// The stage-3 view of the offload settings, shared by stage3.cpp and offload.cpp.
struct Stage3Offload {
  bool opt_offload = false; ///< offload_optimizer.device != none
  bool opt_nvme = false;
  bool param_offload = false; ///< offload_param.device != none
  bool param_nvme = false;
  std::vector<SubGroup> sub_groups;
  std::vector<int> sub_group_of;   ///< per param, its sub-group
  std::vector<char> param_on_nvme; ///< per param: its lp partition lives on NVMe (§8)
  std::int64_t part_total = 0;     ///< P = Σ ⌈n/N⌉ over every param
  std::int64_t largest_sub_group = 0;
};

/// Sub-groups (§5.1 `_create_fp16_sub_groups`), their homes (Twin-Flow ratio §6.1, swappability §7)
/// and the NVMe placement of lp partitions (§8).
Stage3Offload stage3_plan(const Builder& b, const std::vector<std::int64_t>& part, const std::vector<char>& persistent);

/// Resident buffers of the stage-3 model states on GPU, host and NVMe (§10.1 rows 3, 3 + offload).
void stage3_residents(Builder& b, const Stage3Offload& o, const std::vector<std::int64_t>& part,
                      const std::vector<char>& persistent);

/// The copies after one reduce-scatter bucket (§6.1 backward path, §7 boundary grads): `elems`
/// partition elements per sub-group home. Returns the last task issued (or -1).
TaskId stage3_offload_bucket_copies(Builder& b, const Stage3Offload& o, const std::string& name, int mb, bool boundary,
                                    const std::vector<int>& bucket_params, const std::vector<std::int64_t>& part,
                                    Stream st);

/// The per-sub-group optimizer loop of stage 3 (§5.7 step 3, §6.1 step, §7 step, §8 step).
/// Returns the last task of the loop.
TaskId stage3_optimizer_loop(Builder& b, const Stage3Offload& o);

} // namespace zerosim::schedule::detail
