// Time of the work a task graph asks of a GPU or a host CPU, without SimGrid: a roofline per
// operation (FLOPs against the dtype's dense peak, bytes against HBM bandwidth) with an achieved-
// efficiency model per GPU kind that depends on the GEMM shape; CPU Adam as work bounded by cores
// and by DRAM bandwidth. Every figure is data with its source (docs/compute.md).
#pragma once

#include "spec/node_spec.hpp"
#include "spec/scenario_spec.hpp"
#include "spec/task_graph.hpp"
#include "workload/transformer.hpp"

#include <cstdint>
#include <string>

namespace zerosim::compute {

/// The achieved-efficiency data of one GPU kind (docs/compute.md gives each figure's source).
struct GpuEfficiency {
  std::string kind;             ///< e.g. "A100", "H100", "V100", "generic"
  double gemm_max = 0;          ///< achieved / dense peak for a large, well-shaped GEMM
  double hbm = 0;               ///< achieved / nominal HBM bandwidth of a streaming kernel
  double hbm_nonvectorized = 1; ///< non-vectorized element-wise kernels' bandwidth / the streaming kernel's
  spec::AttentionKernel attention_kernel = spec::AttentionKernel::FLASH2; ///< the fused kernel priced
  double attention_fwd = 0;               ///< achieved / dense peak of the fused attention kernel, forward (own FLOPs)
  double attention_bwd = 0;               ///< ... backward
  double attention_fwd_softmax_share = 0; ///< spec::AttentionFigure::fwd_softmax_share
  double attention_bwd_softmax_share = 0; ///< ... bwd_softmax_share
  double attention_seq_half = 0;          ///< spec::AttentionFigure::seq_half
  bool causal_skip = true;                ///< the fused kernel computes only the unmasked half of a causal square
  int sms = 0;                            ///< streaming multiprocessors (wave quantisation)
  double kernel_overhead_s = 0;           ///< launch + tail per kernel
  /// Sustained SM clock / the clock the peak and the efficiency figures hold at (1 at the rated power; below 1
  /// under a power cap, docs/compute.md §1.8). Scales every compute roof, not HBM bandwidth.
  double clock = 1.0;
  /// A 16-bit GEMM whose n or k is not a multiple of 8 elements: its share of the aligned rate, per type
  /// (calibration/kernels.yaml `misaligned_gemm` for the priced torch; 1 without a figure). docs/compute.md §1.2.
  double misaligned_fp16 = 1.0;
  double misaligned_bf16 = 1.0;
};

/// The efficiency data of `gpu` under `software` from `table` (calibration/kernels.yaml): the kind matched on
/// the GPU's model name, its GEMM cap for software.torch's generation, the fused attention kernel's figures
/// (the kind's first listed kernel when software.attention does not run there; the config layer warns), and the
/// sustained clock under the GPU's power cap (sustained_clock). An unknown model gets the table's last kind
/// ("generic") and `known` = false (the caller warns). Unfused attention's batched GEMMs are priced with gemm_max
/// (docs/compute.md §1.3).
GpuEfficiency gpu_efficiency(const spec::GpuSpec& gpu, const spec::SoftwareSpec& software,
                             const spec::KernelTable& table, bool* known = nullptr);

/// The efficiency data a scenario's run prices with: its GPU under Scenario::priced_software(), the clock 1 with
/// the `clock` mechanism off.
GpuEfficiency gpu_efficiency(const spec::Scenario& s);

/// What pricing a scenario's tasks needs that depends on the scenario alone, worked out once (the GPU kind's
/// lookup, the torch generations' parsing) and shared by every task: the engine builds one per replay.
struct ScenarioPricing {
  explicit ScenarioPricing(const spec::Scenario& s);
  GpuEfficiency gpu;                          ///< gpu_efficiency(s)
  const spec::HostGeneration* host = nullptr; ///< the priced torch's host figures; nullptr without host data
  bool compiled = false;                      ///< the priced stack runs torch.compile
  double host_factor = 1.0;                   ///< the calibration's `host.<framework>` multiplier
};

/// Dense peak FLOP/s of `gpu` for the compute dtype of `p` (bf16, fp16; fp32 uses tf32 when given,
/// as PyTorch does with allow_tf32 for matmuls, else fp32). bf16 on a GPU without a bf16 peak
/// (V100, Turing) falls back to the fp16 peak (docs/compute.md §2 says why that is optimistic).
/// Throws core::InputError when the GPU gives no peak for the dtype.
double peak_flops(const spec::GpuSpec& gpu, spec::Precision p);

/// Achieved / dense peak of one GEMM C[m×n] = A[m×k]·B[k×n] on GPU kind `e` (docs/compute.md §1.2):
/// gemm_max × wave(m, n) × depth(k), where wave() is the best tile's useful fraction of the
/// SM-slots its waves occupy (tile and wave quantisation) and depth(k) = k / (k + 128) the
/// main-loop share of a tile's time. Never above gemm_max.
double gemm_efficiency(std::int64_t m, std::int64_t n, std::int64_t k, const GpuEfficiency& e);

/// The share of the aligned rate a GEMM or unfused attention product `op` runs at in precision `p`: 1 when its n
/// and k are multiples of 8 elements, else the kind's misaligned_fp16 / misaligned_bf16 (docs/compute.md §1.2
/// "Alignment"); 1 for tf32 / fp32.
double alignment_share(const workload::Op& op, spec::Precision p, const GpuEfficiency& e);

/// Seconds of one operation's forward (backward = false) or backward on one GPU, one micro-batch: the roofline
/// plus op_kernels() launches. An operation with neither FLOPs nor bytes in that direction launches nothing and
/// takes 0.
double op_time(const workload::Op& op, bool backward, const spec::GpuSpec& gpu, spec::Precision p,
               const GpuEfficiency& e);

/// Seconds of a COMPUTE task of the schedule on one GPU: forward, backward or recompute of its layer
/// (sum of its ops' times; recompute re-runs the forward ops the checkpointing mode recomputes), or
/// any other COMPUTE task (GPU optimizer step, gradient accumulation, casts): memory-bound over
/// task.mem_bytes, with task.flops against the fp32 (non-tensor-core) peak as the other roof.
/// Throws core::InternalError for a task that is not COMPUTE or names no valid layer or op range.
double compute_task_time(const spec::Task& t, const workload::Workload& w, const spec::Scenario& s);
/// The same with the scenario's pricing worked out once by the caller (`p` built from `s`).
double compute_task_time(const spec::Task& t, const workload::Workload& w, const spec::Scenario& s,
                         const ScenarioPricing& p);

/// A COMPUTE task's seconds and the part of them the SMs bound (docs/engine.md "Interference").
struct TaskTime {
  double seconds = 0; ///< compute_task_time
  /// Seconds in kernels whose compute roof binds (compute >= memory in the roofline), launch gaps excluded: the part
  /// an NCCL kernel's share of the SMs stretches. A memory-bound kernel keeps HBM saturated on the SMs left to it,
  /// and a host-bound task (the host's dispatch above the GPU's time) waits on the host, so neither counts: 0 then.
  double sm_seconds = 0;
};

/// compute_task_time with its SM-bound part.
TaskTime compute_task_times(const spec::Task& t, const workload::Workload& w, const spec::Scenario& s,
                            const ScenarioPricing& p);

/// Kernels one operation launches in its forward (backward = false) or backward: 0 when it does no work in that
/// direction; a GEMM's backward 2 (dX, dW), a fused attention backward 3, an unfused one 2; else 1.
int op_kernels(const workload::Op& op, bool backward);

/// Sustained SM clock of `gpu` as a fraction of the clock its peak holds at: (power.limit / power.tdp)^exponent
/// under a power cap (calibration/kernels.yaml `power.clock_exponent`), 1 without one (docs/compute.md §1.8).
double sustained_clock(const spec::GpuSpec& gpu, const spec::KernelTable& table);

/// Seconds the host (the rank's Python thread and the framework) spends issuing a FORWARD, BACKWARD or
/// RECOMPUTE task of a layer (docs/compute.md §1.7): its kernels times the per-kernel cost of software.torch's
/// generation (eager forward op, autograd-engine backward kernel, or a torch.compile graph's launch, where runs
/// of elementwise ops fuse into one kernel), plus the framework's hooks per parameter (FSDP unshard / reshard in
/// forward and backward, DeepSpeed ZeRO-1/2 gradient hooks, DDP's reducer hook). 0 for other tasks or without
/// host data. A layer's task takes at least this long when the host bounds it. Throws core::InternalError for a
/// layer task that names no valid layer or op range.
double host_task_time(const spec::Task& t, const workload::Workload& w, const spec::Scenario& s);
/// The same with the scenario's pricing worked out once by the caller (`p` built from `s`).
double host_task_time(const spec::Task& t, const workload::Workload& w, const spec::Scenario& s,
                      const ScenarioPricing& p);

/// The host CPU: what a CPU_COMPUTE task costs, as two resources the engine shares between the
/// node's ranks: core-seconds on the CPU and bytes through the DRAM link.
struct CpuWork {
  double flops = 0;      ///< work in units of cpu_core_flops()
  int threads = 1;       ///< cores the rank's process uses (cores / ranks per node)
  double dram_bytes = 0; ///< DRAM traffic (reads + writes)
};

/// Per-core rate of the host CPU, in the FLOPs a CPU_COMPUTE task counts (calibrated to DeepSpeedCPUAdam,
/// ZeRO-Offload paper Table 4; docs/compute.md §3). The same for every CpuSpec: a node file has no
/// CPU model, clock or vector width to scale it by.
double cpu_core_flops(const spec::CpuSpec& cpu);

/// The CPU work of a CPU_COMPUTE task run by one of `ranks_per_node` ranks of a node:
/// {task.flops, max(1, cores / ranks_per_node), task.mem_bytes}.
CpuWork cpu_task_work(const spec::Task& t, const spec::CpuSpec& cpu, int ranks_per_node);

/// Uncontended seconds of `work` on `cpu` when the rank has the DRAM to itself:
/// max(flops / (threads x core rate), dram_bytes / memory_bandwidth).
double cpu_task_time_alone(const CpuWork& work, const spec::CpuSpec& cpu);

} // namespace zerosim::compute
