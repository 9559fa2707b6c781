// ZeRO stage 0: plain data parallel with DeepSpeed's FP16_Optimizer (bf16/fp16) or the plain
// torch optimizer (fp32) (docs/deepspeed-schedule.md §1.2, §2).
#include "schedule/schedule_builder.hpp"

namespace zerosim::schedule::detail {

namespace {

/// Stage 0's units: model states in the prologue, the all-reduce buckets and the optimizer after the last backward.
class Stage0 : public StepUnits {
public:
  explicit Stage0(Builder& builder) : b(builder), nl(static_cast<int>(builder.w.layers.size())) {}

  void prologue() override
  {
    const std::int64_t psi = b.psi;
    // Model states (§2, §10.1 row 0). bf16/fp16: lp params 2Ψ, fp32 master 4Ψ, m,v 8Ψ.
    // fp32: the plain torch optimizer steps the fp32 params themselves, so there is no separate master.
    b.resident("lp_params", Device::GPU, MemCategory::PARAMS, psi * b.b_lp);
    if (b.mixed)
      b.resident("fp32_master", Device::GPU, MemCategory::OPTIMIZER, psi * 4);
    b.resident("optimizer_states", Device::GPU, MemCategory::OPTIMIZER, psi * b.opt_state_bytes);
    // Gradients: autograd allocates each param.grad in the first backward, accumulates (+=) in later
    // micro-steps and zero_grad(set_to_none) frees them after the step (§2 step 1): one buffer per layer,
    // allocated by its micro-step-0 backward, freed by the optimizer step.
    grads.assign(static_cast<std::size_t>(nl), -1);
  }

  void forward(int mb, int /*chunk*/) override
  {
    for (int l = b.first_layer; l < b.end_layer; ++l) // a pipeline stage's layers, or every layer
      b.forward(mb, l);
  }

  void backward(int mb, int /*chunk*/) override
  {
    for (int l = b.end_layer - 1; l >= b.first_layer; --l) {
      const TaskId bwd = b.backward(mb, l)[1];
      if (mb == 0) {
        grads[static_cast<std::size_t>(l)] = b.transient("grads." + b.w.layers[static_cast<std::size_t>(l)].name,
                                                         Device::GPU, MemCategory::GRADS, b.layer_grad_bytes(l));
        b.alloc_on(bwd, grads[static_cast<std::size_t>(l)]);
      }
      b.checkpoint_backward_end(mb, l); // DeepSpeed activation checkpointing (docs/offload.md)
    }
  }

  void epilogue() override
  {
    reduce();
    step();
  }

private:
  /// Boundary, after backward: buffered_allreduce_fallback (§2 step 2). Tensors in module.parameters()
  /// order are appended until the bucket holds > 5e8 elements; each bucket: flatten (+ cast), one
  /// all_reduce on the compute stream, unflatten back.
  void reduce()
  {
    const int last_mb = b.g - 1;
    std::int64_t bucket = 0;
    int bucket_index = 0;
    auto flush = [&]() {
      const std::string nm = "mb" + std::to_string(last_mb) + ".allreduce." + std::to_string(bucket_index++);
      const TaskId ar =
          b.collective(nm, Phase::GRAD_REDUCE, Stream::COMPUTE, CollectiveKind::ALL_REDUCE, bucket * b.b_c, last_mb);
      b.scratch(ar, nm + ".flatten", MemCategory::BUFFERS, bucket * b.b_lp);
      if (b.b_c != b.b_lp)
        b.scratch(ar, nm + ".cast", MemCategory::BUFFERS, bucket * b.b_c);
      bucket = 0;
    };
    for (const ParamInfo& p : b.params) {
      bucket += p.numel;
      if (bucket > STAGE0_BUCKET_NUMEL)
        flush();
    }
    if (bucket > 0)
      flush();
  }

  /// Step (§2 step 3). FP16_Optimizer flattens every grad into one fp32 buffer (4Ψ, transient), then
  /// fused Adam over the full master on every rank, then copies fp32 -> lp. No data-parallel collective is needed
  /// for the norm or the overflow flag: after the all-reduce every rank holds the same full gradients. With tensor
  /// parallelism each rank holds a shard: the optimizer's mpu all-reduces the overflow flag (fp16, CheckOverflow) and
  /// the norm (get_grad_norm) over the model-parallel group, and reads them on the host (docs/tensor-parallel.md §3).
  /// Extra traffic per element (mixed): flatten+cast (b_lp read, 4 written), copy-back (4 read, b_lp written).
  void step()
  {
    if (b.tp > 1) {
      const TaskId overflow = b.fp16 ? b.model_parallel_scalar("step.overflow_check.tp", 1, -1) : -1;
      b.host_wait(b.model_parallel_scalar("step.grad_norm.tp", 4, overflow));
    }
    const double extra = b.mixed ? 2.0 * (b.b_lp + 4) : 0.0;
    const TaskId opt = b.gpu_optimizer("step.optimizer", b.psi, extra);
    if (b.mixed)
      b.scratch(opt, "step.fp32_flat_grads", MemCategory::BUFFERS, b.psi * 4);
    for (BufferId gb : grads)
      b.free_on(opt, gb); // zero_grad after the step
  }

  Builder& b;
  int nl;
  std::vector<BufferId> grads;
};

} // namespace

std::unique_ptr<StepUnits> stage0_units(Builder& b)
{
  return std::make_unique<Stage0>(b);
}

} // namespace zerosim::schedule::detail
