// A step as units that an ordering policy composes (docs/schedule.md "Units and ordering policies"): every
// framework's builder exposes its prologue (model states, what precedes the first micro-batch), the forward and the
// backward of one micro-batch on one model chunk, and the epilogue (the gradient reduction that follows the last
// backward and the optimizer step). An ordering policy decides in which order a rank issues them; the builder's task
// helpers chain each unit to what was issued before it, so the order of the calls is the order of the program.
// Today's frameworks run one chunk per rank and the sequential policy; a pipeline schedule is another policy over the
// same units (each stage's units then carry their SEND/RECV), registered in the same table.
#pragma once

#include <functional>
#include <string>
#include <vector>

namespace zerosim::schedule {

/// One rank's optimizer step, cut where a scheduler may interleave it.
class StepUnits {
public:
  virtual ~StepUnits() = default;
  /// What the rank issues before its first micro-batch (model states, buffers that live across the step).
  virtual void prologue() = 0;
  /// The forward of `micro_batch` (0-based) on `chunk` (0-based model chunk of the rank; one today).
  virtual void forward(int micro_batch, int chunk) = 0;
  /// The backward of `micro_batch` on `chunk`, with what the framework issues after a micro-batch's backward
  /// (gradient hooks, reductions, the micro-step's epilogue) when this is the chunk's last unit of the micro-batch.
  virtual void backward(int micro_batch, int chunk) = 0;
  /// What the rank issues after its last backward: the boundary's reductions and the optimizer step.
  virtual void epilogue() = 0;
  /// A pipeline stage's point-to-point instructions (docs/pipeline-parallel.md §3, §4): receive `micro_batch`'s input
  /// activation from the previous stage, send its output activation to the next, receive its output gradient from
  /// the next, send its input gradient to the previous. A pipeline policy issues them where the schedule does; a
  /// rank without pipeline neighbours issues nothing (the defaults).
  virtual void recv_activation(int /*micro_batch*/) {}
  virtual void send_activation(int /*micro_batch*/) {}
  virtual void recv_grad(int /*micro_batch*/) {}
  virtual void send_grad(int /*micro_batch*/) {}
};

/// How many units a step has: micro-batches (training.grad_accum, or the micro-steps an accumulation-reuse graph
/// holds) and model chunks per rank; with pipeline parallelism, the rank's stage among `stages`.
struct StepShape {
  int micro_batches = 1;
  int chunks = 1;
  int stage = 0;
  int stages = 1;
};

/// An ordering policy issues every unit of `units` exactly once: the prologue first, the epilogue last, and each
/// micro-batch's forward on a chunk before its backward on that chunk.
using OrderingPolicy = std::function<void(StepUnits& units, const StepShape& shape)>;

/// The policy every framework runs today: per micro-batch, its forwards over the chunks, then its backwards in
/// reverse chunk order, micro-batch after micro-batch (gradient accumulation as DeepSpeed, DDP and FSDP run it).
inline constexpr const char* SEQUENTIAL_POLICY = "sequential";
/// DeepSpeed's PipelineEngine TrainSchedule (1F1B, PipeDream-Flush; docs/pipeline-parallel.md §3): 2(m + P - 1) steps,
/// forward slots and backward slots alternating by the stage's parity, F(i) at step 2i + s and B(i) at
/// 2i + 2P - 1 - s; a forward slot runs RecvActivation(i), SendGrad(j) of the previous slot's micro-batch, then
/// ForwardPass(i); a backward slot SendActivation(j), RecvGrad(i), then BackwardPass(i) (DeepSpeed 0.7.0's order).
inline constexpr const char* ONE_F_ONE_B_POLICY = "1f1b";
/// GPipe (torch.distributed.pipelining's ScheduleGPipe: every micro-batch's forward, then every backward in
/// micro-batch order); each forward receives then sends, each backward likewise. Not a DeepSpeed schedule.
inline constexpr const char* GPIPE_POLICY = "gpipe";

/// Adds a policy to the table under `name` (a test or a framework registering its schedule). Throws
/// core::InternalError when the name is taken or the policy is empty.
void register_ordering_policy(const std::string& name, OrderingPolicy policy);

/// The registered policies' names, sorted.
std::vector<std::string> ordering_policies();

/// Issues the units of `units` in the order of the policy registered as `policy`. Throws core::InternalError for a
/// name no policy has, or a shape with no micro-batch or no chunk.
void compose_step(StepUnits& units, const StepShape& shape, const std::string& policy = SEQUENTIAL_POLICY);

} // namespace zerosim::schedule
