// The FSDP schedule's backward (docs/fsdp.md, cited as "§n"): the pre- and post-backward hooks, backward prefetch,
// the gradient reduction and the final callback, as members of fsdp::Fsdp (fsdp_builder.hpp).
#include "schedule/fsdp_builder.hpp"

#include "core/error.hpp"
#include "spec/names.hpp"

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

namespace zerosim::schedule::detail::fsdp {

void Fsdp::backward_pass()
{
  const auto nl = static_cast<int>(b_.w.layers.size());
  const bool has_root = !units_.empty() && units_[0].root;
  if (has_root)
    pre_backward(0);
  for (int l = nl - 1; l >= 0; --l) {
    const int u = unit_of_[static_cast<std::size_t>(l)];
    const bool block = u >= 0 && !units_[static_cast<std::size_t>(u)].root;
    if (block)
      pre_backward(u);
    std::vector<TaskId> deps;
    if (u >= 0)
      deps.push_back(us_[static_cast<std::size_t>(u)].ready);
    const auto [first, bwd] = b_.backward(mb_, l, deps);
    if (const double e = autocast_bytes(l); e > 0) {
      b_.task(bwd).mem_bytes += e; // ToCopyBackward: the 16-bit weight gradients back to fp32
      if (first != bwd)
        b_.task(first).mem_bytes += e; // the recomputed forward casts again (the cache died with the forward)
    }
    last_compute_ = bwd;
    if (pending_rs_input_ >= 0) { // FSDP2: dropped at the next group's post_backward (ReduceScatterState)
      b_.free_on(bwd, pending_rs_input_);
      pending_rs_input_ = -1;
    }
    if (u < 0)
      continue;
    UnitState& st = us_[static_cast<std::size_t>(u)];
    const Unit& un = units_[static_cast<std::size_t>(u)];
    if (st.grad < 0) { // the unit's unsharded gradient, from its first backward task to its reduction
      st.grad = b_.transient(mbs_ + ".unsharded_grad." + un.name, Device::GPU, MemCategory::GRADS, un.numel * c_.b_p);
      // FSDP1 _reduce_grad: the autograd gradient is record_stream'ed on the post-backward stream, then dropped.
      if (!c_.v2)
        b_.record_stream(st.grad);
      b_.alloc_on(first, st.grad);
    }
    if (l == un.last_bwd_layer)
      post_backward(u, bwd);
  }
  end_of_backward();
}

void Fsdp::prefetch_backward(int u)
{
  const int idx = post_fwd_index_[static_cast<std::size_t>(u)];
  if (idx <= 0)
    return;
  const int t = post_fwd_[static_cast<std::size_t>(idx - 1)];
  UnitState& ts = us_[static_cast<std::size_t>(t)];
  if (c_.v2) {
    unshard(t, "bwd"); // no-op when unsharded (reshard_after_forward false) or pending
    return;
  }
  if (!ts.needs_pre_bwd || ts.prefetched)
    return;
  unshard(t, "bwd");
  ts.prefetched = true;
}

void Fsdp::pre_backward(int u)
{
  UnitState& st = us_[static_cast<std::size_t>(u)];
  if (c_.v2) {
    unshard(u, "bwd");
    wait_for_unshard(u, false);
    prefetch_backward(u); // implicit prefetch of the previous group in post-forward order
    return;
  }
  if (st.needs_pre_bwd && !st.prefetched)
    unshard(u, "bwd");
  st.needs_pre_bwd = false;
  if (c_.prefetch == spec::BackwardPrefetch::BACKWARD_PRE)
    prefetch_backward(u);
}

void Fsdp::post_backward(int u, TaskId bwd)
{
  UnitState& st = us_[static_cast<std::size_t>(u)];
  // _post_backward_reshard (FSDP1) / FSDPParamGroup.post_backward -> reshard (FSDP2).
  b_.free_on(bwd, st.unsharded);
  st.unsharded = -1;
  if (!c_.v2) {
    if (!c_.no_shard) {
      limiter_push(bwd);
      st.prefetched = false;
    }
    if (c_.prefetch == spec::BackwardPrefetch::BACKWARD_POST)
      prefetch_backward(u);
  }
  reduce(u, bwd);
}

void Fsdp::reduce(int u, TaskId bwd)
{
  UnitState& st = us_[static_cast<std::size_t>(u)];
  const Unit& un = units_[static_cast<std::size_t>(u)];
  const std::string nm = mbs_ + ".%." + un.name;
  auto name = [&](const std::string& what) {
    std::string s = nm;
    s.replace(s.find('%'), 1, what);
    return s;
  };
  const std::int64_t s_u = un.shard, full = padded(un);
  std::vector<TaskId> deps{bwd};
  TaskId first = -1; // the task the reduction's temporaries belong to
  TaskId last = -1;
  if (c_.v2) {
    // foreach_reduce: the compute stream waits for the previous reduce-scatter, then copies the unsharded
    // gradients into reduce_scatter_input (chunk_cat, widening casts included).
    double mem = static_cast<double>(un.numel * c_.b_p + full * c_.b_r);
    if (c_.b_r < c_.b_p)
      mem += static_cast<double>(full * c_.b_p);
    const TaskId cin = compute_task(name("rs_copy_in"), Phase::GRAD_REDUCE, mem, mb_, {bwd, prev_rs_});
    last_compute_ = cin;
    if (c_.b_r < c_.b_p) { // narrowing: through a grad-dtype temporary
      b_.scratch(cin, name("rs_copy_in") + ".narrow", MemCategory::BUFFERS, full * c_.b_p);
    }
    const BufferId input =
        b_.transient(name("reduce_scatter") + ".input", Device::GPU, MemCategory::BUFFERS, full * c_.b_r);
    b_.alloc_on(cin, input);
    b_.free_on(cin, st.grad);
    pending_rs_input_ = input;
    deps = {cin};
    first = last = cin;
    if (c_.w > 1) {
      first = last = collective(name("reduce_scatter"), Phase::GRAD_REDUCE, Stream::REDUCE_PARTITION,
                                CollectiveKind::REDUCE_SCATTER, full * c_.b_r, mb_, deps, c_.shard_group);
      prev_rs_ = last;
    }
  } else if (c_.no_shard) {
    // _reduce_grad_no_shard: all_reduce(flat_param.grad) in place, after the cast to reduce_dtype if any.
    if (b_.n > 1)
      first = last = collective(name("all_reduce"), Phase::GRAD_REDUCE, Stream::REDUCE_PARTITION,
                                CollectiveKind::ALL_REDUCE, un.numel * c_.b_r, mb_, deps, CommGroup::WORLD);
    else
      first = last = bwd;
  } else {
    first = last = collective(name("reduce_scatter"), Phase::GRAD_REDUCE, Stream::REDUCE_PARTITION,
                              CollectiveKind::REDUCE_SCATTER, full * c_.b_r, mb_, deps, c_.shard_group);
    if (c_.b_r != c_.b_p) { // flat_param.grad.to(reduce_dtype)
      b_.scratch(first, name("reduce_scatter") + ".cast", MemCategory::BUFFERS, un.numel * c_.b_r);
    }
    if (full != un.numel || c_.pad_always) { // _get_reduce_scatter_tensors: F.pad to W·S_u (torch < 2.0: always)
      b_.scratch(first, name("reduce_scatter") + ".pad", MemCategory::BUFFERS, full * c_.b_r);
    }
    b_.free_on(first, st.grad); // record_stream on the post-backward stream
  }
  if (c_.hybrid_ar) // the shard all-reduced across nodes on the all-reduce stream
    last = collective(name("all_reduce"), Phase::GRAD_REDUCE, Stream::REDUCTION, CollectiveKind::ALL_REDUCE,
                      s_u * c_.b_r, mb_, {last}, CommGroup::INTER_NODE);

  // The reduced shard (S_u·b_r; NO_SHARD: the whole gradient, reduced in place), cast to fp32 (S_u·4) and
  // accumulated into the sharded gradient.
  const std::size_t ui = static_cast<std::size_t>(u);
  const bool keep = !c_.offload && sharded_grad_[ui] < 0; // micro-step 0: it becomes the sharded gradient
  BufferId reduced = -1;
  if (c_.no_shard && c_.b_r == c_.b_p) {
    reduced = st.grad;
  } else {
    reduced = b_.transient(name(c_.no_shard ? "all_reduce" : "reduce_scatter") + (c_.no_shard ? ".cast" : ".output"),
                           Device::GPU, MemCategory::BUFFERS, s_u * c_.b_r);
    b_.alloc_on(first, reduced);
    if (c_.no_shard)
      b_.free_on(first, st.grad);
  }
  BufferId grad_gpu = reduced;
  if (c_.b_r != 4) {
    if (c_.v2 && c_.hybrid_ar)
      end_frees_.push_back(reduced); // AllReduceState holds the all-reduce input to the end of the backward
    else
      b_.free_on(last, reduced);
    grad_gpu = b_.transient(name(c_.no_shard ? "all_reduce" : "reduce_scatter") + ".fp32", Device::GPU,
                            MemCategory::BUFFERS, s_u * 4);
    b_.alloc_on(last, grad_gpu);
  }
  if (keep) {
    Buffer& g = b_.graph.buffers[static_cast<std::size_t>(grad_gpu)];
    g.name = "sharded_grad." + un.name;
    g.category = MemCategory::GRADS;
    sharded_grad_[ui] = grad_gpu;
  } else if (!c_.offload) {
    b_.free_on(last, grad_gpu); // added into the sharded gradient (`_saved_grad_shard +=`)
  }
  if (c_.offload) {
    const Stream st_off = c_.hybrid_ar ? Stream::REDUCTION : Stream::REDUCE_PARTITION;
    const bool accumulate_v2 = c_.v2 && mb_ > 0; // FSDP2: a blocking copy, then a CPU add
    const bool blocking = c_.no_shard || accumulate_v2;
    const TaskId d2h =
        b_.copy(name("d2h_grad"), Phase::GRAD_REDUCE, st_off, CopyDirection::D2H, s_u * 4, !accumulate_v2, mb_, {last});
    if (c_.v2) {
      b_.free_on(d2h, grad_gpu); // dropped once the copy is issued on the reduce stream
      if (!accumulate_v2) {
        host_grad_[ui] = b_.transient("sharded_grad_cpu." + un.name, Device::HOST, MemCategory::GRADS, s_u * 4, true);
        b_.alloc_on(d2h, host_grad_[ui]);
        offload_events_.push_back(d2h);
      } else {
        const BufferId tmp = b_.transient(name("d2h_grad") + ".cpu", Device::HOST, MemCategory::GRADS, s_u * 4);
        b_.alloc_on(d2h, tmp);
        b_.host_wait(d2h);
        const TaskId add =
            b_.cpu_work(name("cpu_accumulate"), Phase::GRAD_REDUCE, s_u,
                        CPU_ACCUMULATE_BYTES_PER_ELEM * static_cast<double>(s_u), static_cast<double>(s_u));
        b_.free_on(add, tmp);
      }
    } else {
      end_frees_.push_back(grad_gpu); // FSDP1: the GPU _saved_grad_shard lives to the final callback
      if (blocking)
        b_.host_wait(d2h); // NO_SHARD: non_blocking=False
    }
    last = d2h;
  }
  last_reduce_ = last;
}

void Fsdp::end_of_backward()
{
  b_.compute_waits_for(last_reduce_); // current_stream().wait_stream(post_backward / all-reduce stream)
  TaskId end = b_.last_task();
  const bool sync = c_.offload && (!c_.v2 || !offload_events_.empty());
  if (sync) {
    std::vector<TaskId> deps{last_compute_, last_reduce_};
    deps.insert(deps.end(), offload_events_.begin(), offload_events_.end());
    end = b_.sync(mbs_ + ".post_backward_final_callback.synchronize", mb_, deps);
  }
  offload_events_.clear();
  if (pending_rs_input_ >= 0) {
    b_.free_on(end, pending_rs_input_);
    pending_rs_input_ = -1;
  }
  for (BufferId id : end_frees_)
    b_.free_on(end, id);
  end_frees_.clear();
  prev_rs_ = -1;
}

} // namespace zerosim::schedule::detail::fsdp
