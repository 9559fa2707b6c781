// The fully resolved scenario: every default applied, every cross-field rule checked.
// Produced by config::load_scenario, consumed by workload, schedule, memory and report.
#pragma once

#include "spec/calibration_spec.hpp"
#include "spec/kernel_spec.hpp"
#include "spec/model_spec.hpp"
#include "spec/node_spec.hpp"

#include <algorithm>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace zerosim::spec {

enum class Precision { BF16, FP16, AMP_BF16, AMP_FP16, FP32 };
/// training.activation_checkpointing: NONE; FULL (every block recomputed); SELECTIVE (Megatron's: the attention
/// core recomputed); PER_OP (torchtitan's per-op policy: every other matmul output, SDPA and reduce-scatter
/// outputs saved, the rest recomputed; docs/workload.md).
enum class Checkpointing { NONE, FULL, SELECTIVE, PER_OP };
enum class Optimizer { ADAMW, ADAM, SGD };
/// torch.optim's implementation on CUDA (training.optimizer_impl): AUTO is torch's default for the stack's version
/// (foreach from 2.0, single_tensor before); FUSED is `AdamW(fused=True)` (torch 2.0+).
enum class OptimizerImpl { AUTO, SINGLE_TENSOR, FOREACH, FUSED };
enum class Mode { TRAIN, INFERENCE };
enum class Framework { DEEPSPEED, FSDP, DDP };
enum class Dtype { FP32, FP16, BF16 };

/// Bytes of one element of `d`.
inline int dtype_bytes(Dtype d)
{
  return d == Dtype::FP32 ? 4 : 2;
}

/// The dtype of the model's parameters under `p`: bf16 and fp16 are themselves; amp_* and fp32 keep the model in fp32
/// (DeepSpeed's fp16/bf16 disabled; docs/deepspeed-schedule.md §1.3). DeepSpeed's default of communication_data_type
/// and data_types.grad_accum_dtype.
inline Dtype model_dtype(Precision p)
{
  if (p == Precision::BF16)
    return Dtype::BF16;
  if (p == Precision::FP16)
    return Dtype::FP16;
  return Dtype::FP32;
}

/// The data-parallel degree of `gpus` GPUs in tensor-parallel groups of `tensor_parallel` and `pipeline_parallel`
/// pipeline stages: gpus / (t x p) (docs/pipeline-parallel.md §1).
inline int data_parallel_of(int gpus, int tensor_parallel, int pipeline_parallel = 1)
{
  return gpus / (std::max(1, tensor_parallel) * std::max(1, pipeline_parallel));
}

/// Tokens of one micro-batch of one GPU: micro_batch sequences of seq_len tokens.
inline std::int64_t tokens_per_micro_batch(int micro_batch, int seq_len)
{
  return std::int64_t{micro_batch} * seq_len;
}

/// Sequences per optimizer step: micro_batch (per GPU) x grad_accum x data-parallel ranks.
inline std::int64_t global_batch_of(int micro_batch, int grad_accum, int dp)
{
  return static_cast<std::int64_t>(micro_batch) * grad_accum * dp;
}

/// The order a pipeline stage runs its micro-batches' forwards and backwards in (docs/pipeline-parallel.md §3).
enum class PipelineSchedule {
  AUTO,             ///< the framework's own (DeepSpeed's PipelineEngine: ONE_F_ONE_B); resolved by the config layer
  GPIPE,            ///< every forward, then every backward (GPipe; not a DeepSpeed schedule)
  ONE_F_ONE_B,      ///< DeepSpeed's TrainSchedule (1F1B, PipeDream-Flush): warm-up, one forward one backward, drain
  INTERLEAVED_1F1B, ///< Megatron's interleaved 1F1B (virtual stages): refused under DeepSpeed
  ZERO_BUBBLE,      ///< zero-bubble schedules: refused under DeepSpeed
};

/// training.pipeline (docs/config.md "Pipeline parallelism"): how the model is cut into stages and scheduled.
struct PipelineSpec {
  PipelineSchedule schedule = PipelineSchedule::AUTO;
  int virtual_stages = 1; ///< model chunks per rank (interleaved schedules only)
  /// Transformer blocks per stage, first stage first (an explicit split); empty: `partition` decides.
  std::vector<int> layers;
  /// DeepSpeed's PipelineModule partition_method (docs/pipeline-parallel.md §2): "parameters", "uniform" or
  /// "type:REGEX" (Megatron-DeepSpeed's --pp-partition-method; its default "type:transformer").
  std::string partition = "type:transformer";
};

struct TrainingSpec {
  int seq_len = 0;
  int micro_batch = 1;             ///< per GPU
  int grad_accum = 1;              ///< resolved: global_batch / (micro_batch * dp) when global_batch was given
  std::int64_t global_batch = 0;   ///< resolved: micro_batch * grad_accum * dp
  bool global_batch_given = false; ///< which of the two the user gave (the other follows in a sweep)
  Precision precision = Precision::BF16;
  Checkpointing activation_checkpointing = Checkpointing::NONE;
  bool flash_attention = true;
  Optimizer optimizer = Optimizer::ADAMW;
  OptimizerImpl optimizer_impl = OptimizerImpl::AUTO; ///< torch.optim frameworks (ddp:, fsdp:) only
  Mode mode = Mode::TRAIN;
  std::optional<double> total_tokens;
  /// Megatron-LM tensor (intra-layer) model parallelism: t consecutive ranks of a node share every block's
  /// GEMMs (docs/tensor-parallel.md). 1: none. The data-parallel degree is GPUs / t.
  int tensor_parallel = 1;
  /// Pipeline stages p (docs/pipeline-parallel.md): ranks are placed tensor-parallel first, then data-parallel, then
  /// pipeline stage (rank = stage x D x T + data x T + model). 1: none. The data-parallel degree is GPUs / (t x p).
  int pipeline_parallel = 1;
  PipelineSpec pipeline;

  /// Tokens of one micro-batch of one GPU: micro_batch x seq_len.
  std::int64_t tokens_per_micro_batch() const { return spec::tokens_per_micro_batch(micro_batch, seq_len); }
};

struct InferenceSpec {
  int batch = 1;
  int prompt_tokens = 0;
  int generate_tokens = 0;
};

enum class OffloadDevice { NONE, CPU, NVME };

/// zero_optimization.offload_optimizer (docs/deepspeed-schedule.md §3.6, §6.1, §7, §11).
struct OffloadOptimizerSpec {
  OffloadDevice device = OffloadDevice::NONE;
  std::string nvme_path;
  int buffer_count = 4;
  bool pin_memory = true; ///< 0.19: true; 0.16: false
  bool pipeline_read = false;
  bool pipeline_write = false;
  bool fast_init = false;
  double ratio = 1.0; ///< Twin-Flow: fraction of sub-groups stepped on the CPU (stage 3)
  bool super_offload = false;
  double cpuadam_cores_perc = 0.8;
};

/// zero_optimization.offload_param (docs/deepspeed-schedule.md §6.2, §8, §11).
struct OffloadParamSpec {
  OffloadDevice device = OffloadDevice::NONE;
  std::string nvme_path;
  int buffer_count = 5;
  std::int64_t buffer_size = 100'000'000;  ///< elements
  std::int64_t max_in_cpu = 1'000'000'000; ///< elements
  bool pin_memory = true;                  ///< 0.19: true; 0.16: false
};

/// The `aio` block (docs/deepspeed-schedule.md §7, §11).
struct AioSpec {
  std::int64_t block_size = 1'048'576;
  int queue_depth = 8;
  int intra_op_parallelism = 1;
  bool single_submit = false;
  bool overlap_events = true;
  bool use_gds = false;
};

/// zero_optimization, with DeepSpeed's code defaults (docs/deepspeed-schedule.md §11).
struct ZeroSpec {
  int stage = 0;
  bool contiguous_gradients = true;
  bool reduce_scatter = true;
  std::int64_t reduce_bucket_size = 500'000'000; ///< B_r, elements
  bool use_multi_rank_bucket_allreduce = true;
  std::int64_t allgather_bucket_size = 500'000'000;      ///< ignored by DeepSpeed with all_gather_into_tensor (§1.4)
  bool overlap_comm = false;                             ///< resolved: default_overlap_comm(stage) unless given
  bool overlap_comm_given = false;                       ///< the user set overlap_comm (else it follows the stage)
  std::int64_t sub_group_size = 1'000'000'000;           ///< S_g, elements
  std::int64_t stage3_prefetch_bucket_size = 50'000'000; ///< B_p, elements
  std::int64_t stage3_param_persistence_threshold = 100'000; ///< elements
  std::int64_t stage3_model_persistence_threshold = std::numeric_limits<std::int64_t>::max();
  std::int64_t stage3_max_live_parameters = 1'000'000'000;
  std::int64_t stage3_max_reuse_distance = 1'000'000'000;
  std::int64_t stage3_module_granularity_threshold = 0;
  bool stage3_use_all_reduce_for_fetch_params = false;
  bool stage3_allgather_sequential = false;
  bool round_robin_gradients = false;
  OffloadOptimizerSpec offload_optimizer;
  OffloadParamSpec offload_param;

  /// Sets the stage, and overlap_comm to the new stage's default unless the user gave it.
  void set_stage(int s);
};

/// DeepSpeed's overlap_comm when the config leaves it unset: true for stage 3, false otherwise (zero/config.py
/// overlap_comm_valid; docs/deepspeed-schedule.md §11). The one place that default lives.
inline bool default_overlap_comm(int stage)
{
  return stage == 3;
}

inline void ZeroSpec::set_stage(int s)
{
  stage = s;
  if (!overlap_comm_given)
    overlap_comm = default_overlap_comm(s);
}

/// DeepSpeed's activation_checkpointing block (partition/offload of checkpoints).
struct DsActivationCheckpointingSpec {
  bool partition_activations = false;
  bool cpu_checkpointing = false;
  bool contiguous_memory_optimization = false;
  std::optional<int> number_checkpoints;
  bool synchronize_checkpoint_boundary = false;
  bool profile = false;
};

/// The DeepSpeed block, resolved for `deepspeed_version`.
struct DeepSpeedSpec {
  ZeroSpec zero;
  AioSpec aio;
  Dtype communication_data_type = Dtype::BF16; ///< resolved: model dtype unless given (§1.3)
  Dtype grad_accum_dtype = Dtype::BF16;        ///< resolved: model dtype unless given (§1.3)
  double gradient_clipping = 1.0;              ///< 0.19: 1.0; 0.16: 0.0
  bool prescale_gradients = false;
  double gradient_predivide_factor = 1.0;
  DsActivationCheckpointingSpec activation_checkpointing;
  /// Keys accepted but not modelled, each named in Scenario::warnings: dotted path ("deepspeed.zero_optimization.
  /// zero_quantized_weights") -> value as flow YAML, kept so that config::resolved_yaml writes them back.
  std::vector<std::pair<std::string, std::string>> unmodelled_keys;
};

enum class FsdpSharding { FULL_SHARD, SHARD_GRAD_OP, HYBRID_SHARD, NO_SHARD };
enum class BackwardPrefetch { BACKWARD_PRE, BACKWARD_POST, NONE };

/// The ZeRO stage an FSDP sharding strategy matches in what every GPU holds: 3 for FULL_SHARD and HYBRID_SHARD
/// (parameters sharded), 2 for SHARD_GRAD_OP, 0 for NO_SHARD.
inline int equivalent_zero_stage(FsdpSharding s)
{
  return s == FsdpSharding::SHARD_GRAD_OP ? 2 : s == FsdpSharding::NO_SHARD ? 0 : 3;
}

/// PyTorch FSDP (defaults are PyTorch's; docs/fsdp.md).
struct FsdpSpec {
  FsdpSharding sharding_strategy = FsdpSharding::FULL_SHARD;
  std::optional<Dtype> param_dtype;  ///< mixed_precision.param_dtype; unset = the training precision
  std::optional<Dtype> reduce_dtype; ///< mixed_precision.reduce_dtype; unset = param dtype
  BackwardPrefetch backward_prefetch = BackwardPrefetch::BACKWARD_PRE;
  bool forward_prefetch = false;
  bool limit_all_gathers = true;
  std::optional<bool> reshard_after_forward; ///< FSDP2; unset = follows sharding_strategy
  bool cpu_offload = false;
  std::string wrap = "block"; ///< one unit per transformer block
};

/// PyTorch DistributedDataParallel (docs/ddp.md; defaults are PyTorch's, torch/nn/parallel/distributed.py).
struct DdpSpec {
  double bucket_cap_mb = 25; ///< MiB: bucket_bytes_cap = int(bucket_cap_mb * 1024 * 1024)
  /// MiB. Resolved: 1 (dist._DEFAULT_FIRST_BUCKET_BYTES = 1024 * 1024) when bucket_cap_mb is not given, else
  /// bucket_cap_mb (DDP passes the small first cap only for bucket_cap_mb=None).
  double first_bucket_cap_mb = 1;
  bool gradient_as_bucket_view = false; ///< param.grad are views into the buckets (no separate grads)
  bool no_sync = false;                 ///< micro-steps 0..g-2 under model.no_sync(): one all-reduce per step
  bool find_unused_parameters = false;  ///< no bucket rebuild; an all-reduce of the used map per backward
  bool static_graph = false;            ///< the same steady state as the default (named in warnings)
  bool broadcast_buffers = true;        ///< no effect: the modelled transformer has no buffers
};

/// A figure a real run of the scenario gave (for comparison; never used in prediction).
struct MeasuredSpec {
  std::optional<double> step_time_s;
  std::optional<double> tflops_per_gpu;
  std::string tflops_definition; ///< "model" | "hardware"
  std::optional<std::int64_t> peak_memory_bytes;
  std::string source;
};

/// The mechanisms of the model that can be switched, one at a time, for the ablation table (`--without NAME` /
/// `--with NAME` on zerosim run / memory / validate; docs/validation.md "Ablation"). All on by default but
/// leaf_fetch; names as spec::MECHANISMS spells them.
struct Mechanisms {
  bool stack = true;          ///< "stack": kernels priced for the run's software stack (off: today's stack)
  bool nccl_protocols = true; ///< "protocols": NCCL's LL / LL128 / Simple as its tuner picks (off: Simple)
  bool achieved_busbw = true; ///< "busbw": links at their achieved bus bandwidth (off: line rate)
  /// "leaf_fetch": ZeRO-3 computes and fetches per leaf module (off: per block). Off by default: built as DeepSpeed
  /// runs it, it makes the ZeRO-3 rows it acts on worse (docs/schedule.md, results/validation/ablation.md), so a
  /// mechanism is still missing; `--with leaf_fetch` switches it on.
  bool per_module_fetch = false;
  bool host_dispatch = true;   ///< "host": the host's per-op / per-hook dispatch cost (off: free)
  bool sustained_clock = true; ///< "clock": sustained clocks under the power limit (off: full clocks)
  bool interference = true;    ///< "interference": communication kernels slow the compute they overlap
  /// "communicator": a group's collectives run one at a time in issue order, as NCCL launches every kernel of a
  /// communicator after the previous one (off: collectives of one group on different streams run concurrently)
  bool communicator = true;
  bool copies = true;    ///< "copies": AMP casts and FSDP flat-parameter copies
  bool allocator = true; ///< "allocator": reserved memory from the caching allocator's mechanism
  /// "alloc_order": the caching allocator sees a layer's forward op by op, transients freed after their last reader
  /// (off: the kept tensors, then the forward's peak working set at once; docs/memory.md §2.1). Off by default: it
  /// moves the measured reserved figures by a point either way and costs a run about 45 % more; `--with alloc_order`.
  bool allocation_order = false;
  /// "model_code": each block's element-wise kernels as the model code launches them (docs/workload.md §5.2; off:
  /// one fused kernel per element-wise op over its 16-bit tensors)
  bool model_code = true;
  /// "alignment": 16-bit GEMMs with n or k not a multiple of 8 at calibration/kernels.yaml's `misaligned_gemm`
  /// share of the aligned rate (docs/compute.md §1.2; off: priced as aligned)
  bool alignment = true;
};

struct Scenario {
  std::string name;
  std::string file; ///< the scenario file as given (for messages)
  ModelSpec model;
  ClusterSpec cluster;
  TrainingSpec training;
  InferenceSpec inference;
  std::optional<double> price_per_gpu_hour;
  /// The DeepSpeed version whose behaviour is modelled: "0.19" | "0.16" (the nearest modelled version at or below
  /// deepspeed_version_requested; docs/config.md "deepspeed_version").
  std::string deepspeed_version = "0.19";
  std::string deepspeed_version_requested = "0.19"; ///< as the scenario gives it: "0.14" ... "0.19"
  Framework framework = Framework::DEEPSPEED;
  DeepSpeedSpec deepspeed;
  FsdpSpec fsdp;
  DdpSpec ddp;
  std::vector<std::pair<std::string, std::vector<std::string>>> sweep; ///< dotted key -> values (as written)
  MeasuredSpec measured;
  SoftwareSpec software;
  /// The kernel efficiency data (calibration/kernels.yaml) the compute model prices kernels with.
  KernelTable kernels;
  /// The calibration profile the model's priors are scaled by (docs/calibration.md; empty: the priors).
  Calibration calibration;
  Mechanisms mechanisms;
  std::vector<std::string> warnings; ///< keys recognised but not modelled, keys ignored

  /// Every GPU of the job: the ranks, one per GPU.
  int world() const { return cluster.total_gpus(); }
  /// The data-parallel degree: GPUs / (training.tensor_parallel x training.pipeline_parallel).
  int dp() const
  {
    return data_parallel_of(cluster.total_gpus(), training.tensor_parallel, training.pipeline_parallel);
  }
  /// The tensor-parallel degree (1: none).
  int tp() const { return std::max(1, training.tensor_parallel); }
  /// The pipeline-parallel degree: pipeline stages (1: none).
  int pp() const { return std::max(1, training.pipeline_parallel); }
  /// The software stack kernels are priced for: the run's (`software`), or today's default stack when the `stack`
  /// mechanism is switched off (the ablation). The one place that switch applies.
  SoftwareSpec priced_software() const { return mechanisms.stack ? software : SoftwareSpec{}; }
  /// The model code whose kernels the blocks launch (`software.model_code`); `auto` is the framework's usual code:
  /// Megatron's under DeepSpeed (its published runs and tutorials run Megatron-DeepSpeed), Hugging Face's under
  /// PyTorch DDP and FSDP (the Trainer's and Accelerate's). Not switched by the `stack` mechanism.
  ModelCode model_code() const
  {
    if (software.model_code != ModelCode::AUTO)
      return software.model_code;
    return framework == Framework::DEEPSPEED ? ModelCode::MEGATRON : ModelCode::HF;
  }
  /// The GPU kind of the kernel data this run is priced with (the GPU's model when there are no data).
  std::string gpu_kind() const
  {
    return kernels.empty() ? cluster.node.gpu.model : kernels.kind_of(cluster.node.gpu.model).kind;
  }
};

/// The global batch of `s`: training.micro_batch x training.grad_accum x s.dp() sequences per optimizer step.
inline std::int64_t global_batch_of(const Scenario& s)
{
  return global_batch_of(s.training.micro_batch, s.training.grad_accum, s.dp());
}

/// Whether DeepSpeed's engine runs BF16_Optimizer on a pipeline of `s` (engine.py _do_optimizer_sanity_check,
/// docs/pipeline-parallel.md §5's table): bf16 at ZeRO stage 0, or at stage 1 with data_types.grad_accum_dtype fp32
/// and no optimizer offload. Otherwise ZeRO stage 1 runs DeepSpeedZeroOptimizer, whose data-parallel ranks own
/// different partitions, and stage 0 FP16_Optimizer or the plain optimizer.
inline bool pipeline_runs_bf16_optimizer(const Scenario& s)
{
  const ZeroSpec& z = s.deepspeed.zero;
  if (s.training.precision != Precision::BF16)
    return false;
  return z.stage == 0 || (z.stage == 1 && s.deepspeed.grad_accum_dtype == Dtype::FP32 &&
                          z.offload_optimizer.device == OffloadDevice::NONE);
}

} // namespace zerosim::spec
