// DeepSpeed's PipelineEngine (docs/pipeline-parallel.md, cited as §n): one pipeline stage's units. The stage runs the
// framework's units over its own layers (Builder::first_layer .. end_layer) and adds the engine's point-to-point
// instructions, the tensor-parallel split of its messages and the tied-embedding reduction; its optimizer is the one
// DeepSpeed's engine picks (§5's table): BF16_Optimizer (§6), FP16_Optimizer or the plain optimizer at ZeRO stage 0,
// DeepSpeedZeroOptimizer at ZeRO stage 1 (stage12.cpp, with its CPU offload).
#include "schedule/schedule_builder.hpp"

#include "spec/placement.hpp"

#include <map>
#include <memory>
#include <utility>

namespace zerosim::schedule::detail {

namespace {

/// BF16_Optimizer under the pipeline (§6): an unsharded fp32 gradient accumulator the bf16 gradients are added into
/// after every micro-batch's backward, a full bf16 all-reduce of it over the data-parallel group at the step, Adam on
/// this rank's 1/DP of the fp32 master, and a bf16 all-gather of the parameters over the group.
class Bf16Optimizer : public StepUnits {
public:
  explicit Bf16Optimizer(Builder& builder) : b(builder) {}

  void prologue() override
  {
    const std::int64_t psi = b.psi;
    // Memory per GPU (§6, bf16_optimizer.py:239-330): bf16 parameters 2N, fp32 accumulator 4N (unsharded), fp32 master
    // and Adam moments of this rank's partition, (4 + 8) N / DP.
    b.resident("bf16_params", Device::GPU, MemCategory::PARAMS, psi * 2);
    b.resident("fp32_grad_accumulator", Device::GPU, MemCategory::GRADS, psi * 4);
    const std::int64_t part = ceil_div(psi, b.n);
    b.resident("fp32_master_partition", Device::GPU, MemCategory::OPTIMIZER, part * 4);
    b.resident("optimizer_states", Device::GPU, MemCategory::OPTIMIZER, part * b.opt_state_bytes);
    grads.assign(static_cast<std::size_t>(b.end_layer), -1);
  }

  void forward(int mb, int /*chunk*/) override
  {
    for (int l = b.first_layer; l < b.end_layer; ++l)
      b.forward(mb, l);
  }

  void backward(int mb, int /*chunk*/) override
  {
    for (int l = b.end_layer - 1; l >= b.first_layer; --l) {
      const TaskId bwd = b.backward(mb, l)[1];
      if (mb == 0) { // the bf16 .grad tensors: allocated by the first backward, kept until the step
        grads[static_cast<std::size_t>(l)] = b.transient("grads." + b.w.layers[static_cast<std::size_t>(l)].name,
                                                         Device::GPU, MemCategory::GRADS, b.layer_numel(l) * 2);
        b.alloc_on(bwd, grads[static_cast<std::size_t>(l)]);
      }
      b.checkpoint_backward_end(mb, l);
    }
    // update_hp_grads (bf16_optimizer.py:510-526): every bf16 gradient cast to fp32 and added into the accumulator:
    // read 2 + 4 bytes, write 4 bytes per element.
    b.gpu_pass("mb" + std::to_string(mb) + ".update_hp_grads", Phase::GRAD_REDUCE, mb, b.psi, 10.0 * b.psi,
               static_cast<double>(b.psi));
  }

  void epilogue() override
  {
    const int last = b.g - 1;
    // ReduceGrads (_bf16_reduce_grads, §6): the accumulator cast to bf16 (communication_data_type), all-reduced over
    // the data-parallel group, divided and copied back to fp32. Each parameter group's accumulator is one tensor, a
    // bucket of its own; the groups without weight decay (biases, norms) are under 1 % of the parameters and are
    // folded into one all-reduce here.
    const TaskId cast = b.gpu_pass("step.reduce_grads.cast", Phase::GRAD_REDUCE, last, b.psi, 6.0 * b.psi);
    b.scratch(cast, "step.reduce_grads.bf16_copy", MemCategory::BUFFERS, b.psi * 2);
    const TaskId ar = b.collective("step.reduce_grads.allreduce", Phase::GRAD_REDUCE, Stream::COMPUTE,
                                   CollectiveKind::ALL_REDUCE, b.psi * 2, last);
    b.scratch(ar, "step.reduce_grads.bf16_buffer", MemCategory::BUFFERS, b.psi * 2);
    b.gpu_pass("step.reduce_grads.copy_back", Phase::GRAD_REDUCE, last, b.psi, 6.0 * b.psi);
    // OptimizerStep (§6): per-tensor norms read to the host (a host wait; the replica-wide sum is one float),
    // clipping, Adam over this rank's partition, its copy into the bf16 slice, then the bf16 all-gather over the
    // data-parallel group and the accumulator's zeroing.
    const TaskId norm = b.gpu_pass("step.grad_norm", Phase::OPTIMIZER, -1, b.psi, 4.0 * b.psi, 2.0 * b.psi);
    b.host_wait(b.model_parallel_scalar("step.grad_norm.tp", 4, norm));
    const std::int64_t part = ceil_div(b.psi, b.n);
    const TaskId opt = b.gpu_optimizer("step.optimizer", part, 4.0 + 2.0);
    for (BufferId gb : grads)
      b.free_on(opt, gb);
    b.collective("step.allgather_params", Phase::PARAM_GATHER, Stream::COMPUTE, CollectiveKind::ALL_GATHER,
                 part * b.n * 2, -1);
    b.gpu_pass("step.zero_accumulator", Phase::OPTIMIZER, -1, b.psi, 4.0 * b.psi);
  }

private:
  Builder& b;
  std::vector<BufferId> grads;
};

/// One stage of DeepSpeed's PipelineEngine over the framework's units `inner`: the p2p instructions (§3, §4) and the
/// tied-embedding reduction (§2) around them.
class PipelineStage : public StepUnits {
public:
  /// `hp_tied_grad`: the inner optimizer is BF16_Optimizer, whose fp32 gradient of the tied weight is reduced.
  PipelineStage(Builder& builder, std::unique_ptr<StepUnits> inner_units, bool hp_tied_grad)
      : b(builder), inner(std::move(inner_units)), ranks_per_stage(builder.n * builder.tp), hp_tied(hp_tied_grad)
  {
    // The message of one micro-batch between stages: the [s, b, h] activation (or its gradient) in the compute dtype,
    // split over the tensor-parallel group when t > 1 (PartitionedTensor, §4).
    full_bytes =
        static_cast<std::int64_t>(b.s.training.micro_batch) * b.s.training.seq_len * b.s.model.hidden * b.b_act;
    message_bytes = b.tp > 1 ? ceil_div(full_bytes, b.tp) : full_bytes;
  }

  void prologue() override
  {
    inner->prologue();
    // RecvActivation and RecvGrad receive into persistent buffers (one message each) before cloning (§4).
    if (b.stage > 0)
      b.resident("p2p.recv_activation_buffer", Device::GPU, MemCategory::BUFFERS, message_bytes);
    if (b.stage < b.stages - 1)
      b.resident("p2p.recv_grad_buffer", Device::GPU, MemCategory::BUFFERS, message_bytes);
  }

  void recv_activation(int mb) override
  {
    p2p(TaskKind::RECV, "recv_activation", mb, b.rank - ranks_per_stage, Phase::FORWARD);
    // The input is rebuilt from its tensor-parallel chunks (ForwardPass on a non-first stage, §4).
    if (b.tp > 1)
      b.collective("mb" + std::to_string(mb) + ".pipe_input.allgather", Phase::FORWARD, Stream::COMPUTE,
                   CollectiveKind::ALL_GATHER, full_bytes, mb, {}, CommGroup::TENSOR);
  }

  void forward(int mb, int chunk) override
  {
    inner->forward(mb, chunk);
    // A non-last stage keeps its output's tensor-parallel chunk until the micro-batch's backward (§4, §7).
    if (b.tp > 1 && b.stage < b.stages - 1) {
      const BufferId kept = b.transient("mb" + std::to_string(mb) + ".pipe_output_chunk", Device::GPU,
                                        MemCategory::ACTIVATIONS, message_bytes);
      b.alloc_on(b.last_task(), kept);
      output_chunk[mb] = kept;
    }
  }

  void send_activation(int mb) override
  {
    p2p(TaskKind::SEND, "send_activation", mb, b.rank + ranks_per_stage, Phase::FORWARD);
  }

  void recv_grad(int mb) override
  {
    p2p(TaskKind::RECV, "recv_grad", mb, b.rank + ranks_per_stage, Phase::BACKWARD);
    // BackwardPass on a non-last stage all-gathers the kept output chunk and the received gradient chunk (§4).
    if (b.tp > 1) {
      const std::string m = "mb" + std::to_string(mb);
      b.collective(m + ".pipe_output.allgather", Phase::BACKWARD, Stream::COMPUTE, CollectiveKind::ALL_GATHER,
                   full_bytes, mb, {}, CommGroup::TENSOR);
      b.collective(m + ".pipe_grad.allgather", Phase::BACKWARD, Stream::COMPUTE, CollectiveKind::ALL_GATHER, full_bytes,
                   mb, {}, CommGroup::TENSOR);
    }
  }

  void backward(int mb, int chunk) override
  {
    inner->backward(mb, chunk);
    if (const auto it = output_chunk.find(mb); it != output_chunk.end()) {
      b.free_on(b.last_task(), it->second);
      output_chunk.erase(it);
    }
  }

  void send_grad(int mb) override { p2p(TaskKind::SEND, "send_grad", mb, b.rank - ranks_per_stage, Phase::BACKWARD); }

  void epilogue() override
  {
    // ReduceTiedGrads before ReduceGrads (§2): the first and last stages all-reduce the tied embedding's gradient,
    // BF16_Optimizer's fp32 accumulator (weight._hp_grad) under it, the model-dtype .grad otherwise (pipe/engine.py
    // _exec_reduce_tied_grads); whole tensor, not bucketed.
    if (b.tied_embedding_numel > 0) {
      const std::int64_t elem = hp_tied ? 4 : b.b_lp;
      b.collective("step.reduce_tied_grads", Phase::GRAD_REDUCE, Stream::COMPUTE, CollectiveKind::ALL_REDUCE,
                   b.tied_embedding_numel * elem, b.g - 1, {}, CommGroup::EMBEDDING);
    }
    inner->epilogue();
  }

private:
  /// A blocking NCCL send or receive (p2p.py asserts async_op False; BLOOM also ran CUDA_LAUNCH_BLOCKING=1, §4): the
  /// host waits for it, so nothing else is issued before it ends.
  void p2p(TaskKind kind, const char* what, int mb, int peer, Phase ph)
  {
    Task t = make_task(kind, ph, Stream::COMPUTE, "mb" + std::to_string(mb) + "." + what, mb);
    t.peer = peer;
    t.bytes = message_bytes;
    b.host_wait(b.add(std::move(t)));
  }

  Builder& b;
  std::unique_ptr<StepUnits> inner;
  int ranks_per_stage = 1;
  bool hp_tied = false;
  std::int64_t full_bytes = 0;
  std::int64_t message_bytes = 0;
  std::map<int, BufferId> output_chunk; ///< per micro-batch in flight, the kept output chunk (t > 1)
};

} // namespace

std::unique_ptr<StepUnits> pipeline_units(Builder& b)
{
  // The optimizer DeepSpeed's engine builds (engine.py _do_optimizer_sanity_check, §5's table): BF16_Optimizer for
  // bf16 at ZeRO stage 0 and for bf16 at stage 1 with an fp32 grad_accum_dtype and no optimizer offload; the stage-0
  // units (FP16_Optimizer, or the plain optimizer for fp32) at stage 0; DeepSpeedZeroOptimizer at stage 1, its
  // gradients reduced by ReduceGrads (stage12.cpp). ZeRO-2/3 are refused before (check_supported).
  std::unique_ptr<StepUnits> inner;
  const bool bf16_optimizer = spec::pipeline_runs_bf16_optimizer(b.s);
  if (bf16_optimizer)
    inner = std::make_unique<Bf16Optimizer>(b);
  else if (b.s.deepspeed.zero.stage == 0)
    inner = stage0_units(b); // FP16_Optimizer (fp16) or the plain optimizer (fp32), §5's table
  else
    inner = stage12_units(b);
  return std::make_unique<PipelineStage>(b, std::move(inner), bf16_optimizer);
}

} // namespace zerosim::schedule::detail
