// Offload paths: ZeRO-Offload for stage 1/2 (docs/deepspeed-schedule.md §3.6), stage 3 CPU offload (§6.1,
// §6.2), the NVMe optimizer swapper (§7) and NVMe parameter placement (§8).
#include "schedule/offload.hpp"

#include "core/error.hpp"

#include <algorithm>

namespace zerosim::schedule::detail {

// ---------------------------------------------------------------------------------------------
// Stage 1/2
// ---------------------------------------------------------------------------------------------

void stage12_offload_residents(Builder& b, std::int64_t part, std::int64_t p_in)
{
  const bool pin = b.s.deepspeed.zero.offload_optimizer.pin_memory;
  // §3.6 / §10.1 row "1/2 + offload cpu": fp32 master and fp32 grad partitions (pinned if pin_memory),
  // Adam m,v created by DeepSpeedCPUAdam (torch.zeros_like: pageable).
  b.resident("fp32_master_partition", Device::HOST, MemCategory::OPTIMIZER, part * 4, pin);
  b.resident("fp32_grad_partition", Device::HOST, MemCategory::GRADS, part * 4, pin);
  b.resident("optimizer_states", Device::HOST, MemCategory::OPTIMIZER, part * b.opt_state_bytes, false);
  if (!b.v016) // 0.19: param_buffer_of_bit16_for_cpu_offload_groups, P·b_lp (§3.6, §14)
    b.resident("lp_staging_partition", Device::HOST, MemCategory::BUFFERS, part * b.b_lp, pin);
  if (stage12_offload_accumulates(b)) // accumulated_grads_in_cpu: Σ numel of the params touching the partition (§10.1)
    b.resident("accumulated_grads_in_cpu", Device::HOST, MemCategory::GRADS, p_in * b.b_lp, pin);
  b.resident("temp_grad_buffer_for_cpu_offload", Device::HOST, MemCategory::BUFFERS, b.largest_param * b.b_lp, pin);
  b.resident("temp_grad_buffer_for_gpu_offload", Device::GPU, MemCategory::BUFFERS, b.largest_param * b.b_lp);
}

bool stage12_offload_accumulates(const Builder& b)
{
  return b.g > 1 && (b.stages == 1 || b.v016);
}

TaskId stage12_offload_bucket_copies(Builder& b, const std::string& name, int mb, int micro_step_id, bool boundary,
                                     std::int64_t e_in, std::int64_t e_slice, Stream st)
{
  const bool pin = b.s.deepspeed.zero.offload_optimizer.pin_memory;
  TaskId last = -1;
  // async_accumulate_grad_in_cpu_via_gpu (copy_grads_in_partition, §3.6): 0.19 when micro_step_id > 0 or not at the
  // boundary; 0.16 whenever gradient_accumulation_steps > 1. Without a pipeline micro_step_id is the micro-step index
  // and the two agree (stage 1 reduces only at the boundary, micro-step g-1); at a pipeline's ReduceGrads it is 0
  // (docs/pipeline-parallel.md §6), so 0.19 skips the path and 0.16 copies the gradients to the host.
  const bool accumulate = b.v016 ? b.g > 1 : micro_step_id > 0 || !boundary;
  if (accumulate && e_in > 0) {
    if (micro_step_id == 0) {
      last = b.copy(name + ".d2h_accumulate", Phase::GRAD_REDUCE, st, CopyDirection::D2H, e_in * b.b_lp, pin, mb);
    } else {
      // 0.19: H2D of the CPU accumulator into temp_grad_buffer_for_gpu_offload, add, D2H back.
      // 0.16: the D2H back was skipped (the gradient-accumulation bug, §3.6).
      last = b.copy(name + ".h2d_accumulate", Phase::GRAD_REDUCE, st, CopyDirection::H2D, e_in * b.b_lp, pin, mb);
      if (!b.v016)
        last = b.copy(name + ".d2h_accumulate", Phase::GRAD_REDUCE, st, CopyDirection::D2H, e_in * b.b_lp, pin, mb);
    }
  }
  // Boundary: the partition slice cast to fp32 on the GPU, then D2H into the pinned fp32 grad
  // partition (async_inplace_copy_grad_to_fp32_buffer_from_gpu, §3.6).
  if (boundary && e_slice > 0) {
    last = b.copy(name + ".d2h_fp32_grads", Phase::GRAD_REDUCE, st, CopyDirection::D2H, e_slice * 4, pin, mb);
    b.scratch(last, name + ".fp32_grad_slice", MemCategory::BUFFERS, e_slice * 4);
  }
  return last;
}

TaskId stage12_offload_step(Builder& b, std::int64_t part, std::vector<TaskId> deps)
{
  const bool pin = b.s.deepspeed.zero.offload_optimizer.pin_memory;
  const TaskId adam = b.cpu_optimizer("step.cpu_adam", part, std::move(deps));
  if (!b.v016) {
    // 0.19: CPU copy fp32 -> pinned lp staging buffer, then H2D non_blocking P·b_lp (§3.6, §14).
    const TaskId cast =
        b.cpu_work("step.lp_staging_cast", Phase::OPTIMIZER, part, static_cast<double>(part) * (4 + b.b_lp), 0, {adam});
    return b.copy("step.h2d_lp_params", Phase::OPTIMIZER, Stream::COMPUTE, CopyDirection::H2D, part * b.b_lp, pin, -1,
                  {cast});
  }
  // 0.16: fp32_partition.to(cuda) (H2D 4 B/elem), then the cast on the GPU (§3.6, §14).
  const TaskId h2d =
      b.copy("step.h2d_fp32_params", Phase::OPTIMIZER, Stream::COMPUTE, CopyDirection::H2D, part * 4, pin, -1, {adam});
  const BufferId tmp = b.transient("step.fp32_params_on_gpu", Device::GPU, MemCategory::BUFFERS, part * 4);
  b.alloc_on(h2d, tmp);
  const TaskId cast =
      b.gpu_pass("step.lp_cast", Phase::OPTIMIZER, -1, part, static_cast<double>(part) * (4 + b.b_lp), 0, {h2d});
  b.free_on(cast, tmp);
  return cast;
}

// ---------------------------------------------------------------------------------------------
// Stage 3
// ---------------------------------------------------------------------------------------------

std::int64_t io_aligned(std::int64_t numel, int elem_bytes, int intra_op)
{
  const std::int64_t align = std::max<std::int64_t>(1, AIO_ALIGNED_BYTES * std::max(1, intra_op) / elem_bytes);
  return ceil_div(numel, align) * align;
}

std::int64_t param_swap_pool_bytes(const Builder& b)
{
  const spec::OffloadParamSpec& op = b.s.deepspeed.zero.offload_param;
  return static_cast<std::int64_t>(op.buffer_count) *
         io_aligned(op.buffer_size, b.b_lp, b.s.deepspeed.aio.intra_op_parallelism) * b.b_lp;
}

void check_swap_buffer_fits(const Builder& b, std::size_t p, std::int64_t part)
{
  const std::int64_t size = b.s.deepspeed.zero.offload_param.buffer_size;
  if (part >= size)
    throw core::InputError(scenario_label(b.s) +
                           ": deepspeed.zero_optimization.offload_param.buffer_size: " + std::to_string(size) +
                           " elements, but the partition of " + b.params[p].name + " has " + std::to_string(part) +
                           " (each NVMe partition must fit one swap buffer, docs/deepspeed-schedule.md §8)");
}

Stage3Offload stage3_plan(const Builder& b, const std::vector<std::int64_t>& part, const std::vector<char>& persistent)
{
  const spec::ZeroSpec& z = b.s.deepspeed.zero;
  Stage3Offload o;
  o.opt_offload = z.offload_optimizer.device != spec::OffloadDevice::NONE;
  o.opt_nvme = z.offload_optimizer.device == spec::OffloadDevice::NVME;
  o.param_offload = z.offload_param.device != spec::OffloadDevice::NONE;
  o.param_nvme = z.offload_param.device == spec::OffloadDevice::NVME;
  o.sub_group_of.assign(b.params.size(), -1);
  o.param_on_nvme.assign(b.params.size(), 0);

  // Sub-groups: params appended until Σ partition numel >= sub_group_size (§5.1).
  const std::int64_t sg_size = std::max<std::int64_t>(1, z.sub_group_size);
  SubGroup cur;
  for (std::size_t p = 0; p < b.params.size(); ++p) {
    cur.params.push_back(static_cast<int>(p));
    cur.elements += part[p];
    o.part_total += part[p];
    o.sub_group_of[p] = static_cast<int>(o.sub_groups.size());
    if (cur.elements >= sg_size || p + 1 == b.params.size()) {
      o.largest_sub_group = std::max(o.largest_sub_group, cur.elements);
      o.sub_groups.push_back(std::move(cur));
      cur = SubGroup{};
    }
  }

  // Homes. Twin-Flow (§6.1): with S sub-groups, 0.19 puts sub-group i on the CPU iff
  // i >= int((1 - ratio)·S); 0.16 iff i < int(ratio·S). NVMe: a CPU sub-group is swappable iff
  // numel·4 >= max(1 MiB, aio.block_size) (§7); smaller ones stay in CPU memory.
  const auto count = static_cast<double>(o.sub_groups.size());
  const double ratio = z.offload_optimizer.ratio;
  const std::int64_t min_aio = std::max<std::int64_t>(MIN_AIO_BYTES, b.s.deepspeed.aio.block_size);
  for (std::size_t i = 0; i < o.sub_groups.size(); ++i) {
    SubGroup& sg = o.sub_groups[i];
    if (!o.opt_offload) {
      sg.home = SubGroupHome::GPU;
      continue;
    }
    const auto idx = static_cast<double>(i);
    const bool on_cpu = b.v016 ? idx < static_cast<double>(static_cast<std::int64_t>(ratio * count))
                               : idx >= static_cast<double>(static_cast<std::int64_t>((1.0 - ratio) * count));
    sg.home = on_cpu ? SubGroupHome::CPU : SubGroupHome::GPU;
    if (on_cpu && o.opt_nvme && sg.elements * 4 >= min_aio)
      sg.home = SubGroupHome::NVME;
  }
  if (o.opt_nvme) {
    const auto& oo = z.offload_optimizer;
    const int needed = 4 * (1 + (oo.pipeline_read ? 1 : 0) + (oo.pipeline_write ? 1 : 0));
    const bool any = std::any_of(o.sub_groups.begin(), o.sub_groups.end(),
                                 [](const SubGroup& sg) { return sg.home == SubGroupHome::NVME; });
    if (any && oo.buffer_count < needed)
      throw core::InputError(
          "deepspeed.zero_optimization.offload_optimizer.buffer_count: " + std::to_string(oo.buffer_count) +
          " swap buffers, the NVMe optimizer swapper needs " + std::to_string(needed) +
          " (4 per sub-group in flight, docs/deepspeed-schedule.md §7); DeepSpeed "
          "fails with \"ran out of swap buffers, try increasing 'buffer_count'\"");
  }

  // NVMe parameters (§8): sub-groups whose cumulative partition count exceeds max_in_cpu get no CPU
  // flat buffer; their partitions of >= max(1 MiB, block_size) bytes live on NVMe. Persistent
  // params stay on the GPU.
  if (o.param_nvme) {
    const auto& op = z.offload_param;
    std::int64_t cumulative = 0;
    for (SubGroup& sg : o.sub_groups) {
      cumulative += sg.elements;
      if (cumulative <= op.max_in_cpu)
        continue;
      for (int p : sg.params) {
        const auto pu = static_cast<std::size_t>(p);
        if (persistent[pu] || part[pu] * b.b_lp < min_aio)
          continue;
        check_swap_buffer_fits(b, pu, part[pu]);
        o.param_on_nvme[pu] = 1;
        sg.nvme_lp_elements += part[pu];
      }
    }
  }
  return o;
}

void stage3_residents(Builder& b, const Stage3Offload& o, const std::vector<std::int64_t>& part,
                      const std::vector<char>& persistent)
{
  const spec::ZeroSpec& z = b.s.deepspeed.zero;
  const bool pin = z.offload_optimizer.pin_memory;
  std::int64_t lp_gpu = 0, lp_cpu = 0, lp_nvme = 0, persist_full = 0;
  for (std::size_t p = 0; p < b.params.size(); ++p) {
    if (persistent[p]) {
      lp_gpu += part[p];
      persist_full += part[p] * b.n; // gathered into ⌈n/N⌉·N elements (§5.3)
    } else if (!o.param_offload) {
      lp_gpu += part[p];
    } else if (o.param_on_nvme[p]) {
      lp_nvme += part[p];
    } else {
      lp_cpu += part[p];
    }
  }
  // lp partitions: one defragmented GPU buffer, or a CPU flat buffer that is always pinned (§5.1, §6.2).
  b.resident("lp_partition", Device::GPU, MemCategory::PARAMS, lp_gpu * b.b_lp);
  b.resident("lp_partition_cpu", Device::HOST, MemCategory::PARAMS, lp_cpu * b.b_lp, true);
  b.resident("lp_partition_nvme", Device::NVME, MemCategory::PARAMS, lp_nvme * b.b_lp);
  // Persistent params: gathered once and kept (§5.1). They are released at step() start and
  // re-gathered by _post_step; that short dip is not modelled (they stay counted).
  b.resident("persistent_params", Device::GPU, MemCategory::PARAMS, persist_full * b.b_lp);
  // The IPG bucket, allocated once (§5.5).
  b.resident("ipg_bucket", Device::GPU, MemCategory::BUFFERS, z.reduce_bucket_size * b.b_lp);
  // grad_partitions_flat_buffer: P × b_ga, on the CPU with offload_optimizer (§5.5, §6.1).
  if (o.opt_offload)
    b.resident("grad_partitions_flat_buffer", Device::HOST, MemCategory::GRADS, o.part_total * b.b_ga, pin);
  else
    b.resident("grad_partitions_flat_buffer", Device::GPU, MemCategory::GRADS, o.part_total * b.b_ga);

  std::int64_t e_gpu = 0, e_cpu = 0, e_nvme = 0, nvme_largest = 0;
  for (const SubGroup& sg : o.sub_groups) {
    if (sg.home == SubGroupHome::GPU)
      e_gpu += sg.elements;
    else if (sg.home == SubGroupHome::CPU)
      e_cpu += sg.elements;
    else {
      e_nvme += sg.elements;
      nvme_largest = std::max(nvme_largest, sg.elements);
    }
  }
  b.resident("fp32_master", Device::GPU, MemCategory::OPTIMIZER, e_gpu * 4);
  b.resident("optimizer_states", Device::GPU, MemCategory::OPTIMIZER, e_gpu * b.opt_state_bytes);
  if (o.opt_offload) // Twin-Flow GPU sub-groups keep their fp32 grads on the GPU (§10.1)
    b.resident("fp32_grads", Device::GPU, MemCategory::GRADS, e_gpu * 4);
  b.resident("fp32_master_cpu", Device::HOST, MemCategory::OPTIMIZER, e_cpu * 4, pin);
  b.resident("fp32_grads_cpu", Device::HOST, MemCategory::GRADS, e_cpu * 4, pin);
  b.resident("optimizer_states_cpu", Device::HOST, MemCategory::OPTIMIZER, e_cpu * b.opt_state_bytes, false);
  // NVMe optimizer (§7): fp32 param, m, v and fp32 grads on NVMe; pinned swap buffers of
  // buffer_count × io_aligned(largest sub-group) fp32 elements.
  b.resident("fp32_master_nvme", Device::NVME, MemCategory::OPTIMIZER, e_nvme * 4);
  b.resident("optimizer_states_nvme", Device::NVME, MemCategory::OPTIMIZER, e_nvme * b.opt_state_bytes);
  b.resident("fp32_grads_nvme", Device::NVME, MemCategory::GRADS, e_nvme * 4);
  if (e_nvme > 0)
    b.resident("optimizer_swap_buffers", Device::HOST, MemCategory::BUFFERS,
               static_cast<std::int64_t>(z.offload_optimizer.buffer_count) *
                   io_aligned(nvme_largest, 4, b.s.deepspeed.aio.intra_op_parallelism) * 4,
               true);
  // NVMe parameters (§8): the pinned swap pool buffer_count × io_aligned(buffer_size) lp elements and
  // the partitioned_swap_buffer (largest sub-group, lp) used by the step's write-back.
  if (o.param_nvme) {
    b.resident("param_swap_pool", Device::HOST, MemCategory::BUFFERS, param_swap_pool_bytes(b), true);
    if (lp_nvme > 0)
      b.resident("partitioned_swap_buffer", Device::HOST, MemCategory::BUFFERS, o.largest_sub_group * b.b_lp, true);
  }
}

TaskId stage3_offload_bucket_copies(Builder& b, const Stage3Offload& o, const std::string& name, int mb, bool boundary,
                                    const std::vector<int>& bucket_params, const std::vector<std::int64_t>& part,
                                    Stream st)
{
  if (!o.opt_offload)
    return -1;
  const bool pin = b.s.deepspeed.zero.offload_optimizer.pin_memory;
  std::int64_t e = 0, e_cpu = 0, e_nvme = 0;
  for (int p : bucket_params) {
    const auto pu = static_cast<std::size_t>(p);
    e += part[pu];
    const SubGroupHome h = o.sub_groups[static_cast<std::size_t>(o.sub_group_of[pu])].home;
    if (h == SubGroupHome::CPU)
      e_cpu += part[pu];
    else if (h == SubGroupHome::NVME)
      e_nvme += part[pu];
  }
  // partition_grads with the CPU accumulation buffer (§6.1): micro-step 0 copies the partition to the
  // CPU and back to a GPU copy; later micro-steps bring the accumulator to the GPU, add, copy back.
  const BufferId gpu_copy = b.transient(name + ".grad_partition_gpu_copy", Device::GPU, MemCategory::GRADS, e * b.b_ga);
  TaskId last = -1;
  if (mb == 0) {
    b.copy(name + ".d2h_grad_partition", Phase::GRAD_REDUCE, st, CopyDirection::D2H, e * b.b_ga, pin, mb);
    last = b.copy(name + ".h2d_grad_partition", Phase::GRAD_REDUCE, st, CopyDirection::H2D, e * b.b_ga, pin, mb);
    b.alloc_on(last, gpu_copy);
  } else {
    last = b.copy(name + ".h2d_grad_accumulator", Phase::GRAD_REDUCE, st, CopyDirection::H2D, e * b.b_ga, pin, mb);
    b.alloc_on(last, gpu_copy);
    last = b.copy(name + ".d2h_grad_accumulator", Phase::GRAD_REDUCE, st, CopyDirection::D2H, e * b.b_ga, pin, mb);
  }
  if (boundary) {
    // _offload_grad_partition_at_boundary: grad_buffer.to(fp32) on the GPU, D2H 4 B/elem (§6.1).
    if (e_cpu > 0) {
      last = b.copy(name + ".d2h_fp32_grads", Phase::GRAD_REDUCE, st, CopyDirection::D2H, e_cpu * 4, pin, mb);
      b.scratch(last, name + ".fp32_grad_cast", MemCategory::BUFFERS, e_cpu * 4);
    }
    // NVMe optimizer: swap_out_gradients = D2H into the pinned swap buffers + async aio write (§7).
    if (e_nvme > 0) {
      const TaskId d2h =
          b.copy(name + ".d2h_fp32_grads_swap", Phase::GRAD_REDUCE, st, CopyDirection::D2H, e_nvme * 4, true, mb);
      b.scratch(d2h, name + ".fp32_grad_cast_swap", MemCategory::BUFFERS, e_nvme * 4);
      last = b.nvme(name + ".nvme_write_fp32_grads", Phase::GRAD_REDUCE, true, e_nvme * 4, mb, {d2h});
    }
  }
  b.free_on(last, gpu_copy);
  return last;
}

TaskId stage3_optimizer_loop(Builder& b, const Stage3Offload& o)
{
  const auto& oo = b.s.deepspeed.zero.offload_optimizer;
  const int state_bytes = 4 + b.opt_state_bytes; // fp32 param + moments per element (§7)
  TaskId last = -1;
  TaskId prev_lp_write = -1;
  TaskId prev_state_write = -1;
  std::vector<std::array<TaskId, 2>> reads(o.sub_groups.size(), {TaskId{-1}, TaskId{-1}});

  auto issue_reads = [&](std::size_t i) {
    const SubGroup& sg = o.sub_groups[i];
    const std::string nm = "step.subgroup." + std::to_string(i);
    // swap_in_optimizer_state: param, m, v, then the grads (§7)
    reads[i][0] = b.nvme(nm + ".nvme_read_state", Phase::OPTIMIZER, false, sg.elements * state_bytes, -1);
    reads[i][1] = b.nvme(nm + ".nvme_read_grads", Phase::OPTIMIZER, false, sg.elements * 4, -1);
  };
  auto next_nvme = [&](std::size_t i) {
    for (std::size_t j = i + 1; j < o.sub_groups.size(); ++j)
      if (o.sub_groups[j].home == SubGroupHome::NVME)
        return j;
    return o.sub_groups.size();
  };

  for (std::size_t i = 0; i < o.sub_groups.size(); ++i) {
    const SubGroup& sg = o.sub_groups[i];
    const std::string nm = "step.subgroup." + std::to_string(i);
    const std::int64_t e = sg.elements;
    TaskId opt = -1;
    if (sg.home == SubGroupHome::GPU) {
      // _prepare_fp32_grad_for_sub_group: flatten (lp) + .to(fp32), unscale, FusedAdam, lp copy-back
      // (§5.7 step 3). Twin-Flow GPU sub-groups keep their fp32 grads resident instead (§6.1).
      const bool flatten = !o.opt_offload;
      const double extra = (flatten ? 2.0 * b.b_lp + (b.mixed ? b.b_lp + 4 : 0) : 0.0) + 8 + (4 + b.b_lp);
      opt = b.gpu_optimizer(nm + ".optimizer", e, extra);
      if (flatten) {
        b.scratch(opt, nm + ".lp_flat_grads", MemCategory::BUFFERS, e * b.b_lp);
        if (b.mixed)
          b.scratch(opt, nm + ".fp32_grads", MemCategory::BUFFERS, e * 4);
      }
      last = opt;
      if (o.param_offload) {
        // The lp partition is on the CPU: the in-place copy_ becomes a D2H of e·b_lp (unverified
        // combination without offload_optimizer, §6.2 last bullet).
        last = b.copy(nm + ".d2h_lp_update", Phase::OPTIMIZER, Stream::COMPUTE, CopyDirection::D2H, e * b.b_lp, true,
                      -1, {opt});
        b.host_wait(last);
      }
    } else {
      TaskId ready = -1;
      if (sg.home == SubGroupHome::NVME) {
        if (reads[i][0] < 0)
          issue_reads(i);
        ready = reads[i][1];
        b.host_wait(ready);     // the swap-in is waited for before the step of this sub-group
        if (oo.pipeline_read) { // the read of the next sub-group overlaps this one's compute (§7)
          const std::size_t j = next_nvme(i);
          if (j < o.sub_groups.size())
            issue_reads(j);
        }
      }
      opt = b.cpu_optimizer(nm + ".cpu_adam", e, {ready});
      last = opt;
      // lp update (§6.1 step, §6.2 step): fp32 (CPU) -> lp partition.
      if (!o.param_offload) {
        // cross-device copy_ with a dtype change: cast on the host into a pageable temporary, then a
        // synchronous H2D of e·b_lp (PyTorch behaviour, unverified, §15).
        const TaskId cast =
            b.cpu_work(nm + ".lp_cast", Phase::OPTIMIZER, e, static_cast<double>(e) * (4 + b.b_lp), 0, {opt});
        const BufferId tmp = b.transient(nm + ".lp_pageable", Device::HOST, MemCategory::BUFFERS, e * b.b_lp, false);
        b.alloc_on(cast, tmp);
        last = b.copy(nm + ".h2d_lp_update", Phase::OPTIMIZER, Stream::COMPUTE, CopyDirection::H2D, e * b.b_lp, false,
                      -1, {cast});
        b.free_on(last, tmp);
        b.host_wait(last);
      } else {
        // CPU-only cast into the pinned CPU flat buffer: no PCIe at the step (§6.2).
        last = b.cpu_work(nm + ".lp_cast", Phase::OPTIMIZER, e, static_cast<double>(e) * (4 + b.b_lp), 0, {opt});
        if (sg.nvme_lp_elements > 0) {
          // _partitioned_params_swap_out: aio write of the NVMe share, waited for at the next one (§8).
          b.host_wait(prev_lp_write);
          prev_lp_write =
              b.nvme(nm + ".nvme_write_lp_params", Phase::OPTIMIZER, true, sg.nvme_lp_elements * b.b_lp, -1, {last});
          last = prev_lp_write;
        }
      }
      if (sg.home == SubGroupHome::NVME) {
        // swap_out_optimizer_state: write param, m, v; synchronous unless pipeline_write, which
        // completes the previous write before issuing this one (§7).
        if (oo.pipeline_write)
          b.host_wait(prev_state_write);
        prev_state_write = b.nvme(nm + ".nvme_write_state", Phase::OPTIMIZER, true, e * state_bytes, -1, {opt});
        if (!oo.pipeline_write)
          b.host_wait(prev_state_write);
        last = prev_state_write;
      }
    }
  }
  return last;
}

} // namespace zerosim::schedule::detail
