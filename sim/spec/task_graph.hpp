// The task graph of one optimizer step (or one inference request) of one rank, as the framework really runs it:
// DeepSpeed ZeRO (docs/deepspeed-schedule.md, docs/schedule.md), PyTorch DDP (docs/ddp.md) and FSDP (docs/fsdp.md),
// ZeRO-Inference (docs/inference.md), Megatron tensor parallelism (docs/tensor-parallel.md). SimGrid-free: the memory
// replay reads its allocation events in issue order, the engine replays its tasks on a platform.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace zerosim::spec {

using TaskId = std::int32_t;
using BufferId = std::int32_t;

enum class TaskKind {
  COMPUTE,     ///< GPU kernel(s): forward, backward or recompute of a layer, or the GPU optimizer step
  COLLECTIVE,  ///< NCCL collective over a group
  COPY,        ///< PCIe copy between GPU and host memory
  NVME_READ,   ///< aio read from NVMe into pinned host memory
  NVME_WRITE,  ///< aio write from pinned host memory to NVMe
  CPU_COMPUTE, ///< host work: CPU Adam, casts and copies in host memory
  SYNC,        ///< a host-side wait (device synchronize, stream synchronize, event wait): no work
  SEND,        ///< NCCL point-to-point send of `bytes` to rank `peer` (ncclSend)
  RECV,        ///< NCCL point-to-point receive of `bytes` from rank `peer` (ncclRecv)
};

enum class Phase { FORWARD, BACKWARD, RECOMPUTE, GRAD_REDUCE, OPTIMIZER, PARAM_GATHER, OTHER };

/// The stream (or host thread) a task is issued on. Tasks on one stream run in issue order.
enum class Stream {
  COMPUTE,            ///< the default CUDA stream
  REDUCTION,          ///< ZeRO-1/2 `reduction_stream` (overlap_comm); DDP's all-reduces (docs/ddp.md)
  ALLGATHER,          ///< ZeRO-3's all-gather stream (overlap_comm); FSDP's all-gather stream (docs/fsdp.md)
  REDUCE_PARTITION,   ///< ZeRO-3's `reduce_and_partition_stream` (overlap_comm); FSDP's reduce-scatter stream
  HOST,               ///< the Python thread / CPU (CPU Adam, host copies)
  NVME,               ///< the aio handle
  ACTIVATION_OFFLOAD, ///< DeepSpeed 0.19's _ActivationOffloadEngine side stream (cpu_checkpointing, docs/offload.md)
};
/// Number of Stream values (arrays indexed by stream).
inline constexpr int STREAM_COUNT = static_cast<int>(Stream::ACTIVATION_OFFLOAD) + 1;

enum class CollectiveKind { ALL_REDUCE, REDUCE_SCATTER, ALL_GATHER };

/// The kind of communicator a collective runs on. A rank's collective runs on the instance of that kind the rank
/// belongs to (spec::group_instance: its node, its local index, ...), and the k-th call of every member of one
/// instance is one collective (docs/engine.md "How collectives are matched").
enum class CommGroup {
  WORLD,      ///< every rank of the job (the data-parallel group without tensor parallelism)
  INTRA_NODE, ///< the ranks of one node (FSDP HYBRID_SHARD's shard group); all nodes' groups run at once
  INTER_NODE, ///< the ranks with the same local index on every node (HYBRID_SHARD's replicate group);
              ///< all local indices' groups run at once
  /// Megatron tensor parallelism (docs/tensor-parallel.md): t consecutive ranks of a node (rank / t); every
  /// group of every node runs at once.
  TENSOR,
  /// With tensor or pipeline parallelism, the data-parallel group: the ranks of one pipeline stage with the same
  /// tensor-parallel index (rank % t); all p x t groups run at once. Without either, WORLD.
  DATA_PARALLEL,
  /// Pipeline parallelism (docs/pipeline-parallel.md §2): the tied embedding's pair, the first and the last stage's
  /// ranks that share a data and a tensor-parallel index; all D x t pairs run at once.
  EMBEDDING,
};
enum class CopyDirection { H2D, D2H };

enum class Device { GPU, HOST, NVME };
/// The keys of memory_breakdown_bytes (docs/scenario-format.md).
enum class MemCategory { PARAMS, GRADS, OPTIMIZER, ACTIVATIONS, BUFFERS, OTHER };
inline constexpr int MEM_CATEGORY_COUNT = 6;

/// One allocation: created by the task that lists it in `allocs`, released by the task
/// that lists it in `frees`. Buffers in TaskGraph::resident live across steps.
struct Buffer {
  std::string name; ///< e.g. "ipg_bucket.0", "gathered.block.3", "fp32_master"
  Device device = Device::GPU;
  bool pinned = false; ///< host memory only: page-locked
  MemCategory category = MemCategory::OTHER;
  std::int64_t bytes = 0;
  /// The tensors the buffer stands for (a layer's kept activations, its working set), in bytes: the caching
  /// allocator gets one request per tensor, sized in proportion so that they sum to `bytes`. Empty: one tensor.
  std::vector<std::int64_t> tensors;
  /// GPU only: the framework frees it with `record_stream` onto another stream (FSDP1's unsharded flat parameter and
  /// gradient), so the caching allocator reuses its block only once that stream's work is done (docs/memory.md §2.1).
  bool record_stream = false;
  /// Resident, but created by torch.optim at its first step() (Adam's exp_avg and exp_avg_sq are initialised lazily,
  /// per parameter): the caching allocator first sees it at the first step's optimizer, carved out of whatever the
  /// first forward and backward left cached. The live sums count it from the start (the steady state).
  bool lazy = false;
  /// GPU only: the caching allocator's requests in the order the framework makes them, short-lived ones among them
  /// (a layer's forward, op by op: docs/memory.md §2.1). `trace_bytes` lists every request, `trace` the steps: k >= 0
  /// mallocs request k, -k - 1 frees it. The requests the trace never frees are this buffer's blocks (they sum to
  /// `bytes`, and replace `tensors` for the allocator); the others live only inside the trace.
  std::vector<std::int64_t> trace_bytes;
  std::vector<int> trace;
  /// Its requests are in another buffer's trace (a layer's forward working set): the allocator replay skips it; the
  /// live sums still count it.
  bool in_trace = false;
};

struct Task {
  TaskKind kind = TaskKind::COMPUTE;
  Phase phase = Phase::OTHER;
  Stream stream = Stream::COMPUTE;
  std::string name;         ///< human-readable, unique within the graph, e.g. "mb0.fwd.block.3"
  int micro_step = -1;      ///< 0..g-1, or -1 for the step
  int layer = -1;           ///< index into Workload::layers, -1 if none
  std::vector<TaskId> deps; ///< must finish before this one starts (besides stream order)
  /// The task the host last waited for (a synchronize, a blocking copy, CPU work) before issuing this one;
  /// -1 if none. The host issues a task when it has issued the previous one and this wait has returned.
  TaskId host_barrier = -1;

  // COMPUTE of a layer: the ops [op_begin, op_end) of Workload::layers[layer].ops (op_end < 0: to the end). A part
  // of a layer is ZeRO-3's per-leaf-module compute (the work between two module hooks, docs/schedule.md).
  int op_begin = 0;
  int op_end = -1;
  // SYNC: the host thread is busy this long before it returns (Python work with no device work: ZeRO-3's module
  // hooks and fetch calls, docs/schedule.md); 0 for a plain wait.
  double host_seconds = 0;

  // COMPUTE / CPU_COMPUTE
  double flops = 0;          ///< arithmetic work
  double mem_bytes = 0;      ///< memory traffic (HBM for GPU, DRAM for CPU)
  std::int64_t elements = 0; ///< elements updated (optimizer steps)
  /// Kernels a GPU task outside the layers launches (each pays the launch gap): torch's multi-tensor optimizer
  /// launches one kernel per 320 chunks of 65,536 elements per foreach op (docs/ddp.md "Optimizer"); 1 otherwise.
  int kernels = 1;

  // COLLECTIVE
  CollectiveKind collective = CollectiveKind::ALL_REDUCE;
  std::int64_t bytes = 0; ///< COLLECTIVE: bytes of the full buffer (S·b); COPY/NVME/SEND/RECV: bytes moved
  /// NVME: how many times the transfer waits for the drive's request latency (the I/O library's waves of requests
  /// in flight; the schedule counts them from its configuration, the engine prices them on the node's drives).
  std::int64_t request_waves = 0;
  int group_size = 1; ///< ranks in the collective's group
  CommGroup group = CommGroup::WORLD;

  // SEND / RECV: the global rank at the other end (the receiver of a SEND, the sender of a RECV); `bytes` is the
  // message. The k-th SEND of rank a to b and the k-th RECV of b from a are one transfer.
  int peer = -1;

  // COPY
  CopyDirection direction = CopyDirection::H2D;
  bool pinned = true; ///< host side page-locked

  // memory events
  std::vector<BufferId> allocs; ///< allocated when the task is issued
  std::vector<BufferId> frees;  ///< released when the task completes
};

/// "world", "intra_node", "inter_node", "tensor", "data_parallel" (trace arguments, messages).
const char* to_string(CommGroup g);

struct TaskGraph {
  int rank = 0; ///< the global rank the graph is of
  int dp = 1;   ///< the data-parallel degree: GPUs / tensor-parallel degree (Scenario::dp)
  /// The step's micro-steps (training.grad_accum; under accumulation reuse the graph holds fewer, numbered as in the
  /// whole step: spec::shift_micro_steps), or an inference request's forward passes.
  int micro_steps = 1;
  /// Accumulation reuse: the micro-steps of the step the graph does not hold (spec::shift_micro_steps); the engine
  /// adds one measured period for each. 0: the graph holds every micro-step.
  int reused_micro_steps = 0;
  std::vector<Buffer> buffers;
  std::vector<BufferId> resident; ///< allocated before the step and alive across steps (model states)
  std::vector<Task> tasks;        ///< in issue order (the host program order of this rank)

  BufferId add_buffer(Buffer b);
  TaskId add_task(Task t);
};

/// Renumbers micro-steps `first` and later by `shift`: Task::micro_step, and the "mb<k>." prefix of task and
/// buffer names. Accumulation reuse builds a graph of a few micro-steps and labels its last one as the real
/// step's last one (run::simulate_step, docs/design.md "Speed and scale"); micro_steps and reused_micro_steps grow by
/// `shift`.
void shift_micro_steps(TaskGraph& g, int first, int shift);

/// Whether two ranks issue the same communications in the same order, what the symmetric replay matches across
/// nodes (docs/engine.md "Nodes alike"): each collective of the same kind, phase, stream, micro-step, communicator
/// group, size and bytes, each SEND or RECV of the same bytes with its peer at the same offset from the rank, and the
/// same micro-steps. Their local work (compute, copies, CPU work, NVMe I/O) may differ: ZeRO-1/2's partition cut
/// gives each rank the tensors that straddle it, so its accumulation passes and offload copies differ by a few
/// elements, and a bucket without elements in a rank's partition copies nothing out; the replay times the simulated
/// ranks' own as their stand-ins.
bool same_communications(const TaskGraph& a, const TaskGraph& b);

} // namespace zerosim::spec
