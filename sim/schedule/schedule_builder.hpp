// Internal to the schedule component: the state and helpers every stage builder shares
// (dtype sizes, parameter table, task and buffer creation, host waits, per-layer compute).
// docs/deepspeed-schedule.md is cited as "§n"; docs/schedule.md describes the resulting graphs.
#pragma once

#include "schedule/checkpointing.hpp"
#include "schedule/step_units.hpp"
#include "spec/scenario_spec.hpp"
#include "spec/task_graph.hpp"
#include "workload/transformer.hpp"

#include <array>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace zerosim::schedule {

// The task vocabulary is spec/'s (shared with compute, collectives, memory and the engine); the builders speak it
// unqualified.
using spec::Buffer;
using spec::BufferId;
using spec::CollectiveKind;
using spec::CommGroup;
using spec::CopyDirection;
using spec::Device;
using spec::MEM_CATEGORY_COUNT;
using spec::MemCategory;
using spec::Phase;
using spec::shift_micro_steps;
using spec::Stream;
using spec::STREAM_COUNT;
using spec::Task;
using spec::TaskGraph;
using spec::TaskId;
using spec::TaskKind;

} // namespace zerosim::schedule

namespace zerosim::schedule::detail {

/// DeepSpeed's hard-coded stage-0 bucket, `MEMORY_OPT_ALLREDUCE_SIZE` (§2, §11), elements.
inline constexpr std::int64_t STAGE0_BUCKET_NUMEL = 500'000'000;
/// DeepSpeedCPUAdam memory traffic: read p, g, m, v and write p, m, v (§9.1), bytes per element.
inline constexpr double ADAM_BYTES_PER_ELEM = 28;
/// Arithmetic of one Adam(W) update per element (m: 3, v: 4, sqrt/eps/div: 3, decay: 2, update: 2).
/// A stated estimate from the update formula of §9.1, not a measurement.
inline constexpr double ADAM_FLOPS_PER_ELEM = 14;
/// Plain SGD without momentum (torch's default momentum = 0): read p, g, write p; p -= lr·g.
inline constexpr double SGD_BYTES_PER_ELEM = 12;
inline constexpr double SGD_FLOPS_PER_ELEM = 2;
/// torch.optim.AdamW/Adam with its CUDA default, the foreach implementation (`_multi_tensor_adamw`,
/// torch 2.x, amsgrad and capturable off): one pass per foreach op over fp32 tensors, bytes read + written
/// per element: mul_(p) 8, lerp_(m, g) 12, mul_(v) 8, addcmul_(v, g, g) 12, sqrt(v) -> t 8, div_(t) 8,
/// add_(t, eps) 8, addcdiv_(p, m, t) 16 = 80 B/elem. `torch._foreach_sqrt` returns new tensors: a
/// transient 4 B/elem over every parameter the call steps.
inline constexpr double TORCH_ADAMW_FOREACH_BYTES_PER_ELEM = 80;
inline constexpr double TORCH_ADAMW_FOREACH_TEMP_BYTES_PER_ELEM = 4;
/// torch.optim.AdamW/Adam before torch 2.0 on CUDA: `foreach` left None meant False (torch/optim/adamw.py 1.13:
/// `if foreach is None: foreach = False`; 2.0 made foreach the CUDA default, `_default_to_fused_or_foreach`), so
/// `_single_tensor_adamw` ran per parameter: mul_(p) 8, exp_avg.mul_ 8 + add_ 12, exp_avg_sq.mul_ 8 + addcmul_
/// 12, sqrt 8, div 8, add_(eps) 8, addcdiv_ 16 = 88 B/elem. `(exp_avg_sq.sqrt() / bias_correction2_sqrt)` holds the
/// sqrt and the quotient at once: 8 B per element of the parameter being stepped.
inline constexpr double TORCH_ADAMW_SINGLE_BYTES_PER_ELEM = 88;
inline constexpr double TORCH_ADAMW_SINGLE_TEMP_BYTES_PER_ELEM = 8;
/// torch.optim.AdamW/Adam(fused=True) (torch 2.0+, `_fused_adamw`: `torch._fused_adamw_`, one multi-tensor kernel
/// over params, grads, exp_avgs and exp_avg_sqs, aten/src/ATen/native/cuda/fused_adamw_impl.cu): each fp32 element
/// of the four read once (16 B) and param, exp_avg, exp_avg_sq written once (12 B) = 28 B/elem, no temporary.
inline constexpr double TORCH_ADAMW_FUSED_BYTES_PER_ELEM = 28;
/// torch's multi-tensor kernels (aten/src/ATen/native/cuda/MultiTensorApply.cuh: kChunkSize 65536, at most 320
/// blocks per launch): one launch per 320 chunks of 65,536 elements, per foreach op. `_multi_tensor_adamw` runs 8
/// foreach ops on the GPU (weight-decay mul, lerp, mul, addcmul, sqrt, div, add eps, addcdiv; the step counters are
/// CPU tensors), `_single_tensor_adamw` 9 kernels per parameter tensor, `_fused_adamw_` one op; SGD's foreach step 1.
inline constexpr double MULTI_TENSOR_ELEMS_PER_LAUNCH = 65536.0 * 320.0;
inline constexpr int TORCH_ADAMW_FOREACH_OPS = 8;
inline constexpr int TORCH_ADAMW_SINGLE_KERNELS_PER_TENSOR = 9;
/// The first torch generation (spec::torch_generation) whose torch.optim defaults to foreach on CUDA.
inline constexpr int TORCH_FOREACH_DEFAULT_GENERATION = 2000;
/// torch.optim.SGD (momentum 0, the default): `_foreach_add_(params, grads, alpha=-lr)`: read p, g, write p.
inline constexpr double TORCH_SGD_FOREACH_BYTES_PER_ELEM = 12;
/// An autocast cast reads the fp32 weight and writes its 16-bit copy (`cached_cast`); its backward
/// (ToCopyBackward) reads the 16-bit weight gradient and writes it in fp32: 4 + 2 bytes per element (docs/ddp.md
/// "Autocast"; DDP's and FSDP's amp_* runs with fp32 parameters).
inline constexpr double AUTOCAST_CAST_BYTES_PER_ELEM = 4 + 2;
/// Minimum aio transfer, `MIN_AIO_BYTES` (§7, §11).
inline constexpr std::int64_t MIN_AIO_BYTES = 1'048'576;
/// `AIO_ALIGNED_BYTES` (§7, §11).
inline constexpr std::int64_t AIO_ALIGNED_BYTES = 1024;

/// One parameter tensor of the workload, in forward (= flat-buffer) order.
struct ParamInfo {
  int layer = -1;
  std::int64_t numel = 0;
  int module = -1;  ///< index into Builder::modules
  std::string name; ///< "<layer>.<tensor>"
};

/// One torch module owning parameters (stage 3 fetches per module, §5.3).
struct ModuleInfo {
  int layer = -1;
  std::string name;        ///< "<layer>.<module>"
  std::vector<int> params; ///< indices into Builder::params, in forward order
};

/// A layer's compute for one phase issued as parts, each a range of its ops: ZeRO-3's per-leaf-module compute, the
/// work between two module hooks (stage3.cpp, docs/schedule.md "Stage 3"). The caller issues what part i waits for
/// (its module's fetch) in `before(i)`, which returns the part's dependencies, and its release in `after(i, task)`.
struct ComputeParts {
  std::vector<std::array<int, 2>> ranges; ///< op ranges [begin, end) of Layer::ops, in issue order
  std::vector<std::string> names;         ///< per part, its task-name suffix (the module)
  std::function<std::vector<TaskId>(std::size_t)> before;
  std::function<void(std::size_t, TaskId)> after;
  std::function<void(TaskId)> after_recompute; ///< backward: after the recompute task, if any (may be empty)
};

/// "scenario 'NAME'" (or "scenario" when unnamed): how the schedule's errors name the scenario.
inline std::string scenario_label(const spec::Scenario& s)
{
  return s.name.empty() ? std::string("scenario") : "scenario '" + s.name + "'";
}

/// A step graph's first checks: the cluster has a GPU, and `rank` is one of them (errors name `where`).
void check_rank(const spec::Scenario& s, int rank, const std::string& where);

/// A DeepSpeed step graph's checks of the DeepSpeed block: bf16, fp16 or fp32 (autocast with DeepSpeed is not
/// modelled; `amp_hint` is appended to the advice, e.g. where amp_* is modelled), and a ZeRO stage of 0 to 3.
void check_deepspeed_precision_and_stage(const spec::Scenario& s, const std::string& where,
                                         const std::string& amp_hint);

/// Ceil division for non-negative values.
inline std::int64_t ceil_div(std::int64_t a, std::int64_t b)
{
  return (a + b - 1) / b;
}

/// The waves of requests of an aio transfer of `bytes`: how many times it waits for the drive's request latency.
std::int64_t aio_request_waves(const spec::AioSpec& aio, std::int64_t bytes);

/// A task of `kind` named `name`, of phase `ph` on stream `st` in micro-step `mb` (-1: the step): the fields every
/// task sets. The caller sets what its kind needs and issues it with Builder::add.
Task make_task(TaskKind kind, Phase ph, Stream st, std::string name, int mb = -1);

class Builder {
public:
  Builder(const spec::Scenario& s, const workload::Workload& w, int rank);

  const spec::Scenario& s;
  const workload::Workload& w;
  int rank = 0;    ///< the global rank (node-major: node x gpus_per_node + local)
  int n = 1;       ///< N, data-parallel degree (GPUs / t)
  int tp = 1;      ///< t, tensor-parallel degree (docs/tensor-parallel.md)
  int dp_rank = 0; ///< this rank's index in its data-parallel group (spec::coords_of: Megatron's and DeepSpeed's order)
  int stage = 0;   ///< pipeline stage (docs/pipeline-parallel.md §1); 0 without a pipeline
  int stages = 1;  ///< pipeline stages p
  int first_layer = 0; ///< the stage's workload layers [first_layer, end_layer) (pipeline_partition.hpp)
  int end_layer = 0;
  /// With a pipeline, the tied word embedding a first or last stage holds (its gradient is all-reduced between the
  /// two, CommGroup::EMBEDDING); 0 on the other stages or without a pipeline.
  std::int64_t tied_embedding_numel = 0;
  int b_act = 2;     ///< bytes of an activation element (the tensor-parallel all-reduces carry activations)
  int g = 1;         ///< gradient-accumulation micro-steps
  int b_lp = 2;      ///< bytes of the model dtype (§1.3)
  int b_c = 2;       ///< bytes of communication_data_type (§1.3)
  int b_ga = 2;      ///< bytes of grad_accum_dtype (§1.3)
  bool mixed = true; ///< bf16/fp16 (a separate fp32 master exists); false for fp32 and amp_*
  bool fp16 = false; ///< precision fp16 (DeepSpeed's loss scaler)
  /// amp_bf16 / amp_fp16: PyTorch autocast (fp32 params, grads and optimizer states, 16-bit compute):
  /// b_lp = 4 and mixed = false; `amp_fp16` also means torch.cuda.amp.GradScaler.
  bool amp = false;
  bool amp_fp16 = false;
  bool v016 = false;       ///< deepspeed_version "0.16" (§14)
  bool first_step = false; ///< the run's first optimizer step (StepOptions::first_step, §5.2)
  int opt_state_bytes = 8; ///< Adam m,v: 8 B/elem; SGD without momentum: 0
  double opt_bytes_per_elem = ADAM_BYTES_PER_ELEM;
  double opt_flops_per_elem = ADAM_FLOPS_PER_ELEM;
  std::int64_t psi = 0; ///< Ψ, Σ numel of every parameter tensor of the workload (of the stage's layers)
  std::int64_t largest_param = 0;
  std::vector<ParamInfo> params;
  std::vector<ModuleInfo> modules;
  std::vector<std::vector<int>> layer_modules; ///< per layer, its modules in forward order
  std::vector<std::vector<int>> layer_params;  ///< per layer, its params in forward order

  TaskGraph graph;

  /// A buffer alive across steps (model states). Zero bytes: no buffer, returns -1.
  BufferId resident(std::string name, Device d, MemCategory c, std::int64_t bytes, bool pinned = false);
  /// A buffer some task allocates and a later (or the same) task frees. Zero bytes: -1.
  BufferId transient(std::string name, Device d, MemCategory c, std::int64_t bytes, bool pinned = false);
  /// A GPU buffer that task `t` allocates and frees itself: a flatten, cast or staging buffer, a working or temporary
  /// one. Zero bytes: none, -1.
  BufferId scratch(TaskId t, std::string name, MemCategory c, std::int64_t bytes);
  /// Marks the resident `b` as torch.optim's state over parameters of `param_elements` elements each (per rank):
  /// created lazily at the first step (Buffer::lazy), one tensor per parameter and state (Buffer::tensors).
  void torch_optimizer_state(BufferId b, const std::vector<std::int64_t>& param_elements);
  /// The same over the workload's parameter tensors (Builder::params): the optimizer steps every parameter whole
  /// (DDP) or one shard of each (FSDP2, the relative sizes the allocator's requests are scaled by).
  void torch_optimizer_state(BufferId b);
  /// Names the tensors buffer `b` stands for (Buffer::tensors; one tensor or none: left empty).
  void tensors_of(BufferId b, const std::vector<std::int64_t>& tensors);
  /// Marks buffer `b` as freed with `record_stream` onto another stream (Buffer::record_stream); none (-1): no-op.
  void record_stream(BufferId b);
  void alloc_on(TaskId t, BufferId b);
  void free_on(TaskId t, BufferId b);

  /// Appends `t` in issue order. A task issued after a host wait depends on the waited task
  /// (once per stream); a COMPUTE task issued after compute_waits_for depends on that task.
  TaskId add(Task t);
  Task& task(TaskId id) { return graph.tasks[static_cast<std::size_t>(id)]; }
  TaskId last_task() const { return static_cast<TaskId>(graph.tasks.size()) - 1; }

  /// The host blocks until `t` completes (a synchronize, a blocking copy, synchronous CPU work).
  void host_wait(TaskId t);
  /// `current_stream().wait_stream(...)`: the next task issued on COMPUTE waits for `t`.
  void compute_waits_for(TaskId t);

  /// A collective over `group` (its group_size follows: WORLD n, INTRA_NODE gpus per node, INTER_NODE nodes,
  /// TENSOR t). With tensor parallelism WORLD, which the ZeRO code uses for "the data-parallel group", becomes
  /// DATA_PARALLEL.
  TaskId collective(std::string name, Phase ph, Stream st, CollectiveKind k, std::int64_t bytes, int mb,
                    std::vector<TaskId> deps = {}, CommGroup group = CommGroup::WORLD);
  TaskId copy(std::string name, Phase ph, Stream st, CopyDirection dir, std::int64_t bytes, bool pinned, int mb,
              std::vector<TaskId> deps = {});
  TaskId nvme(std::string name, Phase ph, bool write, std::int64_t bytes, int mb, std::vector<TaskId> deps = {});
  TaskId cpu_work(std::string name, Phase ph, std::int64_t elements, double mem_bytes, double flops,
                  std::vector<TaskId> deps = {});
  /// A plain GPU pass: a kernel on the compute stream that belongs to no layer (a cast, a copy, an accumulation, an
  /// optimizer step) over `elements`, with `mem_bytes` of HBM traffic and `flops` of arithmetic.
  TaskId gpu_pass(std::string name, Phase ph, int mb, std::int64_t elements, double mem_bytes, double flops = 0,
                  std::vector<TaskId> deps = {});
  /// The host waits for `deps` (a synchronize, an event's .item()): a SYNC task; everything issued after it waits for
  /// it. With `host_seconds`, the host thread is then busy for that long with Python work that issues no device work
  /// (ZeRO-3's module hooks and fetch calls, Task::host_seconds).
  TaskId sync(std::string name, int mb, std::vector<TaskId> deps, double host_seconds = 0);

  /// A compute task of `layer` on the compute stream for phase FORWARD, RECOMPUTE or BACKWARD: its FLOPs and HBM
  /// bytes are the layer's for that phase (a recompute re-runs the forward's recomputed FLOPs). Memory events and
  /// tensor-parallel all-reduces are the caller's.
  /// With an op range [op_begin, op_end) (op_end < 0: to the end) the task is that part of the layer (ComputeParts).
  TaskId layer_compute(std::string name, Phase ph, int mb, int layer, std::vector<TaskId> deps, int op_begin = 0,
                       int op_end = -1);
  /// Forward of `layer` in micro-step `mb`: allocates its kept activations (freed by its backward)
  /// and its forward working bytes (freed by the same task).
  /// With `parts`, the compute is one task per part (ComputeParts; `deps` go to the first): the kept activations
  /// and the working bytes are allocated by the first, the working bytes freed by the last. Returns the last task
  /// (or the last tensor-parallel all-reduce after it).
  TaskId forward(int mb, int layer, std::vector<TaskId> deps = {}, const ComputeParts* parts = nullptr);
  /// Recompute (under checkpointing, when the layer has recompute FLOPs) then backward of `layer`.
  /// The backward working bytes live from the first of the two to the backward's end; the backward
  /// frees the kept activations. Returns {first task, backward task}.
  /// With `parts`, the backward is one task per part (the recompute, if any, stays one task with `deps`; without
  /// one `deps` go to the first part); the last part frees the kept activations and the working bytes.
  std::array<TaskId, 2> backward(int mb, int layer, std::vector<TaskId> deps = {}, const ComputeParts* parts = nullptr);
  /// DeepSpeed's checkpoint() entry for a checkpointed block (docs/offload.md): synchronize_checkpoint_boundary's
  /// device synchronize and, with blocking cpu_checkpointing, the D2H of the block input. forward() runs it when
  /// the stage has not (stage 3 runs it before the block's parameter fetches, as DeepSpeed does).
  void checkpoint_forward_begin(int mb, int layer);
  /// The start of CheckpointFunction.backward: the synchronize, the release of unused contiguous slots, the
  /// restore of the checkpoint (H2D, or a wait on its D2H). backward() runs it when the stage has not.
  void checkpoint_backward_begin(int mb, int layer);
  /// The end of CheckpointFunction.backward, after the block's gradient hooks: profile's timer read (a host
  /// wait on the compute stream) and synchronize_checkpoint_boundary's device synchronize. No-op otherwise.
  void checkpoint_backward_end(int mb, int layer);
  /// GPU optimizer step over `elements` (fused Adam / SGD, §2, §3.5, §5.7); `extra_bytes_per_elem`
  /// counts the flatten/cast/unscale/copy-back traffic around it.
  TaskId gpu_optimizer(std::string name, std::int64_t elements, double extra_bytes_per_elem,
                       std::vector<TaskId> deps = {});
  /// torch.optim's step on the GPU over `elements` fp32 parameters (AdamW/Adam, or SGD): the PyTorch frameworks'
  /// optimizer (DDP, FSDP). Its CUDA default is the foreach implementation from torch 2.0 (one sqrt temporary over
  /// every parameter) and the single-tensor one before (a sqrt and a quotient of the largest parameter,
  /// `largest_tensor` elements, at once); the stack assumed is Scenario::priced_software(). `tensors`: the elements
  /// of each parameter the optimizer holds (their relative sizes), whose foreach temporaries are one tensor each.
  TaskId torch_optimizer(std::string name, std::int64_t elements, std::int64_t largest_tensor,
                         const std::vector<std::int64_t>& tensors, std::vector<TaskId> deps = {});
  /// The elements of every parameter of the model, in order (the tensors DDP's and FSDP2's optimizer holds).
  std::vector<std::int64_t> param_elements() const;
  /// CPU optimizer (DeepSpeedCPUAdam, §9.1: 28 B/elem) on the HOST thread; the host waits for it.
  TaskId cpu_optimizer(std::string name, std::int64_t elements, std::vector<TaskId> deps = {});
  /// The 1-element all-reduces of the step: overflow flag (1 byte, MAX) when `overflow`, grad norm (1 fp32).
  TaskId step_scalars(bool overflow);
  /// With tensor parallelism, a step scalar's all-reduce over the model-parallel group after `after` (DeepSpeed's
  /// _model_parallel_all_reduce, get_grad_norm / CheckOverflow with an mpu); `after` itself when t = 1.
  TaskId model_parallel_scalar(std::string name, std::int64_t bytes, TaskId after);

  /// Σ numel of a layer's parameter tensors.
  std::int64_t layer_numel(int layer) const;
  /// Grad bytes of a layer in the model dtype (Σ numel · b_lp).
  std::int64_t layer_grad_bytes(int layer) const { return layer_numel(layer) * b_lp; }
  /// Elements autocast casts to 16 bits in `layer`'s forward: the linear weights and biases (not the norms, which
  /// autocast runs in fp32, nor the embedding lookup); the LM head of a tied model casts the embedding.
  std::int64_t autocast_numel(int layer) const;

private:
  /// Megatron's tensor-parallel all-reduces of `layer` for phase FORWARD, RECOMPUTE or BACKWARD, issued on the compute
  /// stream after the layer's compute task `after` (docs/tensor-parallel.md §3). Returns the last one, or `after`
  /// when there are none (t = 1, or nothing to reduce).
  TaskId tensor_parallel_collectives(int mb, int layer, Phase ph, TaskId after);

  /// The kept activations of each (micro-step, layer) until its backward frees them: under a pipeline's 1F1B a stage
  /// runs the forwards of several micro-batches before the first of their backwards (docs/pipeline-parallel.md §7).
  std::map<std::pair<int, std::size_t>, BufferId> act_kept_;
  /// act_kept_'s entry of `layer` in micro-step `mb`, -1 when none is kept.
  BufferId& act_kept(int mb, std::size_t layer) { return act_kept_.try_emplace({mb, layer}, -1).first->second; }
  CheckpointState ckpt_;           ///< DeepSpeed activation checkpointing (docs/offload.md)
  std::array<TaskId, STREAM_COUNT> last_on_stream_ = [] {
    std::array<TaskId, STREAM_COUNT> a{};
    a.fill(-1);
    return a;
  }();
  TaskId device_synchronize(std::string name, int mb);
  /// The start of a checkpoint entry (checkpoint_forward_begin, checkpoint_backward_begin) of `layer`: false when the
  /// layer is not checkpointed or the entry already ran for the coming pass (`begun`, which it marks); else its
  /// synchronize_checkpoint_boundary (a device synchronize named after `what`) and true.
  bool checkpoint_entry(int mb, int layer, std::vector<char>& begun, const char* what);
  void ckpt_offload(int mb, int layer, int id, int newest_id);
  TaskId barrier_ = -1;
  std::array<bool, STREAM_COUNT> barrier_seen_{};
  TaskId compute_wait_ = -1;
};

// The framework builders (one file each): each returns its step's units over `b` (StepUnits), which
// build_step_graph composes with the ordering policy; the builder table of step_graph.cpp picks one per scenario.
std::unique_ptr<StepUnits> stage0_units(Builder& b);
std::unique_ptr<StepUnits> stage12_units(Builder& b);
/// The data-parallel ranks of a ZeRO-1/2 step among which the largest GPU peak lies (docs/schedule.md "Ranks that
/// can differ"): the ranks' graphs differ only in the buffer of the gradients their partition touches (its size
/// and the bucket that allocates it) and, with offload, the slices the buckets copy out; a rank that another
/// dominates in all of these cannot hold more. A handful of ranks instead of N.
std::vector<int> stage12_memory_dp_ranks(const Builder& b);
std::unique_ptr<StepUnits> stage3_units(Builder& b);
/// PyTorch DistributedDataParallel (docs/ddp.md); also a plain single-GPU PyTorch run (dp = 1).
std::unique_ptr<StepUnits> ddp_units(Builder& b);
/// PyTorch FullyShardedDataParallel, FSDP1 and FSDP2 (docs/fsdp.md).
std::unique_ptr<StepUnits> fsdp_units(Builder& b);
/// One stage of DeepSpeed's PipelineEngine (pipeline.cpp, docs/pipeline-parallel.md): the framework's units over the
/// stage's layers with the engine's point-to-point instructions and tied-embedding reduction; BF16_Optimizer, the
/// stage-0 units or DeepSpeedZeroOptimizer's ZeRO-1 (stage12_units) as DeepSpeed's engine picks them (§5).
std::unique_ptr<StepUnits> pipeline_units(Builder& b);

} // namespace zerosim::schedule::detail
