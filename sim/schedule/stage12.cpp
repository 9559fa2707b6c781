// ZeRO stages 1 and 2 (DeepSpeedZeroOptimizer, zero-schedule.md §3), with ZeRO-Offload (§3.6).
#include "schedule/offload.hpp"

#include <algorithm>

namespace zerosim::schedule::detail {

namespace {

/// One IPG bucket being filled by gradient hooks (§3.2).
struct IpgBucket {
  std::int64_t elements = 0;
  std::int64_t e_in = 0;             ///< elements of params touching this rank's partition
  std::int64_t e_slice = 0;          ///< elements inside this rank's partition
  std::vector<BufferId> extra_grads; ///< grads of params > B_r, reduced without a copy (§3.2)
};

} // namespace

void build_stage12(Builder& b)
{
  const spec::ZeroSpec& z = b.s.deepspeed.zero;
  const bool stage2 = z.stage == 2;
  const bool overlap = z.overlap_comm;
  // Stage 1/2 treat any offload_optimizer device other than none as CPU offload (§3.6 last bullet).
  const bool offload = z.offload_optimizer.device != spec::OffloadDevice::NONE;
  const bool contiguous = z.contiguous_gradients || offload; // forced True with CPU offload (§3.6)
  const std::int64_t br = z.reduce_bucket_size;
  const auto nl = static_cast<int>(b.w.layers.size());
  const Stream red_stream = overlap ? Stream::REDUCTION : Stream::COMPUTE; // §3.2 "Streams"

  // Flat buffer padded to a multiple of 2N (nccl_start_alignment_factor = 2) and cut into N
  // partitions (§3.1). This rank owns [rank·P, (rank+1)·P); a param straddling a boundary belongs
  // to both neighbours (P_in >= P, §10.1 notes).
  const std::int64_t align = 2LL * b.n;
  const std::int64_t psi_pad = ceil_div(b.psi, align) * align;
  const std::int64_t part = psi_pad / b.n;
  const std::int64_t p_begin = static_cast<std::int64_t>(b.dp_rank) * part;
  const std::int64_t p_end = p_begin + part;
  std::vector<std::int64_t> slice(b.params.size(), 0); // elements of each param inside the partition
  std::vector<char> touches(b.params.size(), 0);
  std::int64_t p_in = 0;
  {
    std::int64_t off = 0;
    for (std::size_t i = 0; i < b.params.size(); ++i) {
      const std::int64_t e = off + b.params[i].numel;
      const std::int64_t lo = std::max(off, p_begin);
      const std::int64_t hi = std::min(e, p_end);
      if (hi > lo) {
        slice[i] = hi - lo;
        touches[i] = 1;
        p_in += b.params[i].numel;
      }
      off = e;
    }
  }

  // Model states (§3.1, §10.1 rows 1, 2). The fp32 master partition is a clone even for fp32
  // training (`single_partition_of_fp32_groups` = partition.clone().float()).
  b.resident("lp_flat_params", Device::GPU, MemCategory::PARAMS, psi_pad * b.b_lp);
  if (!offload) {
    b.resident("fp32_master_partition", Device::GPU, MemCategory::OPTIMIZER, part * 4);
    b.resident("optimizer_states", Device::GPU, MemCategory::OPTIMIZER, part * b.opt_state_bytes);
  } else {
    stage12_offload_residents(b, part, p_in);
  }

  std::vector<BufferId> stage1_grads(static_cast<std::size_t>(nl), -1);
  BufferId accumulated = -1; // the in-partition grads held until the step (freed by it)
  TaskId last_red = -1;      // last task issued on the reduction path

  for (int mb = 0; mb < b.g; ++mb) {
    const std::string mbs = "mb" + std::to_string(mb);
    const bool boundary = mb == b.g - 1;
    // Stage 2 reduces in the hooks of every backward; stage 1 only at the boundary, in the hooks
    // with overlap_comm, else in reduce_gradients() after backward (§3.2-§3.4, §1.1).
    const bool reduce_in_bwd = stage2 || (overlap && boundary);
    const bool reduce_post_bwd = !stage2 && !overlap && boundary;

    for (int l = 0; l < nl; ++l)
      b.forward(mb, l);

    // IPG buffers: setup_buckets() at the first grad hook of each backward, B_r elements of the
    // model dtype, a second one with overlap_comm; freed at the epilogue (§3.2, §10.3, §14).
    std::vector<BufferId> ipg;
    if (contiguous) {
      ipg.push_back(b.transient(mbs + ".ipg_bucket.0", Device::GPU, MemCategory::BUFFERS, br * b.b_lp));
      if (overlap)
        ipg.push_back(b.transient(mbs + ".ipg_bucket.1", Device::GPU, MemCategory::BUFFERS, br * b.b_lp));
    }
    BufferId gip = -1; // this micro-step's grads_in_partition (no offload), §3.2
    IpgBucket bk;
    int bucket_index = 0;

    auto flush = [&](TaskId trigger) {
      if (bk.elements == 0)
        return;
      const std::string nm = mbs + ".allreduce." + std::to_string(bucket_index++);
      // overlap_comm: current_stream().wait_stream(reduction_stream) before the launch, so the
      // compute stream waits for the previous bucket's reduction (§3.2 "Streams").
      if (overlap)
        b.compute_waits_for(last_red);
      // use_multi_rank_bucket_allreduce (default) or reduce_scatter=False: one all_reduce of the
      // whole bucket (§3.2), after a flatten copy (+ a cast copy if b_c != b_lp).
      const TaskId ar = b.collective(nm, Phase::GRAD_REDUCE, red_stream, CollectiveKind::ALL_REDUCE,
                                     bk.elements * b.b_c, mb, {trigger});
      const BufferId flat = b.transient(nm + ".flatten", Device::GPU, MemCategory::BUFFERS, bk.elements * b.b_lp);
      b.alloc_on(ar, flat);
      b.free_on(ar, flat);
      if (b.b_c != b.b_lp) {
        const BufferId cast = b.transient(nm + ".cast", Device::GPU, MemCategory::BUFFERS, bk.elements * b.b_c);
        b.alloc_on(ar, cast);
        b.free_on(ar, cast);
      }
      for (BufferId eg : bk.extra_grads)
        b.free_on(ar, eg);
      TaskId last = ar;
      if (!offload) {
        if (bk.e_in > 0 && gip < 0) {
          gip = b.transient(mbs + ".grads_in_partition", Device::GPU, MemCategory::GRADS, p_in * b.b_lp);
          b.alloc_on(ar, gip);
        }
      } else {
        const TaskId c = stage12_offload_bucket_copies(b, nm, mb, boundary, bk.e_in, bk.e_slice, red_stream);
        if (c >= 0)
          last = c;
      }
      last_red = last;
      bk = IpgBucket{};
    };
    auto add_param = [&](int pi, TaskId producer, BufferId extra_grad) {
      const ParamInfo& p = b.params[static_cast<std::size_t>(pi)];
      if (bk.elements > 0 && bk.elements + p.numel > br)
        flush(producer);
      bk.elements += p.numel;
      if (touches[static_cast<std::size_t>(pi)]) {
        bk.e_in += p.numel;
        bk.e_slice += slice[static_cast<std::size_t>(pi)];
      }
      if (extra_grad >= 0)
        bk.extra_grads.push_back(extra_grad);
    };

    TaskId last_bwd = -1;
    for (int l = nl - 1; l >= 0; --l) {
      const auto [first, bwd] = b.backward(mb, l);
      last_bwd = bwd;
      if (l == nl - 1)
        for (BufferId ib : ipg)
          b.alloc_on(first, ib);
      const std::string& lname = b.w.layers[static_cast<std::size_t>(l)].name;
      const auto& lp = b.layer_params[static_cast<std::size_t>(l)];
      if (!stage2) {
        // Stage 1: full lp grads accumulate in param.grad until the boundary epilogue (§3.3).
        if (mb == 0) {
          stage1_grads[static_cast<std::size_t>(l)] =
              b.transient("grads." + lname, Device::GPU, MemCategory::GRADS, b.layer_grad_bytes(l));
          b.alloc_on(bwd, stage1_grads[static_cast<std::size_t>(l)]);
        }
        if (reduce_in_bwd)
          for (auto it = lp.rbegin(); it != lp.rend(); ++it)
            add_param(*it, bwd, -1);
        b.checkpoint_backward_end(mb, l); // after the block's gradient hooks (docs/offload.md)
        continue;
      }
      // Stage 2: autograd's grads are copied into the IPG bucket by the hook and re-pointed, so
      // they live inside the backward; a param > B_r is reduced alone without a copy (§3.2).
      std::int64_t small = 0;
      for (int pi : lp)
        if (b.params[static_cast<std::size_t>(pi)].numel <= br)
          small += b.params[static_cast<std::size_t>(pi)].numel;
      const BufferId sg =
          b.transient(mbs + ".autograd_grads." + lname, Device::GPU, MemCategory::GRADS, small * b.b_lp);
      b.alloc_on(bwd, sg);
      b.free_on(bwd, sg);
      for (auto it = lp.rbegin(); it != lp.rend(); ++it) {
        const ParamInfo& p = b.params[static_cast<std::size_t>(*it)];
        BufferId extra = -1;
        if (p.numel > br) {
          extra = b.transient(mbs + ".autograd_grad." + p.name, Device::GPU, MemCategory::GRADS, p.numel * b.b_lp);
          b.alloc_on(bwd, extra);
        }
        add_param(*it, bwd, extra);
      }
      b.checkpoint_backward_end(mb, l); // after the block's gradient hooks (docs/offload.md)
    }
    if (reduce_post_bwd) // reduce_gradients(): every param, flat (forward) order, after backward (§3.3)
      for (std::size_t pi = 0; pi < b.params.size(); ++pi)
        add_param(static_cast<int>(pi), last_bwd, -1);
    if (reduce_in_bwd || reduce_post_bwd)
      flush(last_bwd);

    // Epilogue (§3.2): flush (done above); with overlap_comm a device-wide synchronize; stage 2
    // accumulates this micro-step's partition grads (add_); release the IPG buffers and param.grad.
    TaskId epi = -1;
    const bool runs_epilogue = stage2 || boundary;
    if (overlap && runs_epilogue)
      epi = b.sync(mbs + ".epilogue.synchronize", mb, {last_red, last_bwd});
    if (stage2 && !offload && mb > 0 && gip >= 0) {
      Task acc;
      acc.kind = TaskKind::COMPUTE;
      acc.phase = Phase::GRAD_REDUCE;
      acc.stream = Stream::COMPUTE;
      acc.name = mbs + ".accumulate_partition_grads";
      acc.micro_step = mb;
      acc.elements = p_in;
      acc.mem_bytes = 3.0 * static_cast<double>(p_in * b.b_lp); // read both, write one
      acc.deps = {last_red};
      epi = b.add(std::move(acc));
      b.free_on(epi, gip);
    } else if (gip >= 0) {
      accumulated = gip; // micro-step 0 (stage 2) or the boundary (stage 1): held until the step
    }
    if (epi < 0)
      epi = b.last_task();
    for (BufferId ib : ipg)
      b.free_on(epi, ib);
    if (!stage2 && boundary)
      for (BufferId gb : stage1_grads)
        b.free_on(epi, gb);
  }

  // Step (§3.5): overflow check (fp16, or bf16 with check_grad_overflow, default True) and grad norm.
  b.step_scalars(b.mixed);
  TaskId before_ag = -1;
  if (!offload) {
    // flatten the partition grads (lp, P), cast to fp32 (4P), unscale, FusedAdam over P, copy fp32 -> lp.
    const double extra = 2.0 * b.b_lp + (b.mixed ? b.b_lp + 4 : 0) + 8 + (4 + b.b_lp);
    before_ag = b.gpu_optimizer("step.optimizer", part, extra, {last_red});
    const BufferId lpf = b.transient("step.lp_flat_grads", Device::GPU, MemCategory::BUFFERS, part * b.b_lp);
    b.alloc_on(before_ag, lpf);
    b.free_on(before_ag, lpf);
    if (b.mixed) {
      const BufferId f32 = b.transient("step.fp32_grads", Device::GPU, MemCategory::BUFFERS, part * 4);
      b.alloc_on(before_ag, f32);
      b.free_on(before_ag, f32);
    }
    b.free_on(before_ag, accumulated);
  } else {
    before_ag = stage12_offload_step(b, part, {last_red});
  }
  // all_gather_dp_groups: one all_gather_into_tensor of the whole padded flat buffer per param
  // group (one group here), on the default stream, after the optimizer (§1.4, §3.5 step 4).
  b.collective("step.allgather_params", Phase::PARAM_GATHER, Stream::COMPUTE, CollectiveKind::ALL_GATHER,
               psi_pad * b.b_lp, -1, {before_ag});
}

} // namespace zerosim::schedule::detail
