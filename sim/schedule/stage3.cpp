// ZeRO stage 3 (DeepSpeedZeroOptimizer_Stage3 + the parameter coordinator, zero-schedule.md §5),
// with its CPU/NVMe offload placements (§6-§8, offload.cpp).
#include "schedule/offload.hpp"
#include "schedule/stage3_fetch.hpp"

#include <algorithm>

namespace zerosim::schedule::detail {

namespace {

/// The per-micro-step state of the parameter coordinator (§5.2-§5.4).
struct Coordinator : FetchCoordinator {
  std::vector<BufferId> gathered; ///< per param: its full buffer while gathered
};

} // namespace

void build_stage3(Builder& b)
{
  const spec::ZeroSpec& z = b.s.deepspeed.zero;
  const int nn = b.n;
  const bool overlap = z.overlap_comm;
  // With overlap_comm the all-gathers and the reduce-scatters get streams of their own, else the
  // default stream (§5.3 step 1, §5.5).
  const Stream ag_stream = overlap ? Stream::ALLGATHER : Stream::COMPUTE;
  const Stream rs_stream = overlap ? Stream::REDUCE_PARTITION : Stream::COMPUTE;
  const CollectiveKind fetch_kind =
      z.stage3_use_all_reduce_for_fetch_params ? CollectiveKind::ALL_REDUCE : CollectiveKind::ALL_GATHER;
  const std::size_t np = b.params.size();
  const auto nl = static_cast<int>(b.w.layers.size());

  // Partitioning and persistent params (§5.1).
  const Stage3Partition sp = stage3_partition(b);
  const std::vector<std::int64_t>& part = sp.part;
  const std::vector<char>& persistent = sp.persistent;
  const Stage3Offload o = stage3_plan(b, part, persistent);
  stage3_residents(b, o, part, persistent);

  // Per-leaf-module fetching (spec::Mechanisms::per_module_fetch, docs/schedule.md "Stage 3"): each module's
  // compute is a task of its own between its hooks; off, a layer's modules are all fetched before its one compute task.
  const bool per_module = b.s.mechanisms.per_module_fetch;
  // The coordinator's host (Python) time per hook and per gather call: part of the host's per-op / per-hook dispatch
  // cost (spec::Mechanisms::host_dispatch, `--without host`), and only counted with per-module hooks.
  const bool hook_cost = per_module && b.s.mechanisms.host_dispatch;
  const double host_factor = b.s.calibration.factor("host.deepspeed"); // docs/calibration.md
  const std::vector<LayerParts> lparts =
      per_module ? stage3_layer_parts(b) : std::vector<LayerParts>(b.w.layers.size());
  // Under full checkpointing a block's recompute re-runs its modules' forward hooks (CheckpointFunction.backward
  // runs the block's forward): the block's modules are fetched again, in forward order, before its backward uses.
  auto module_recompute = [&](int l) {
    const workload::Layer& layer = b.w.layers[static_cast<std::size_t>(l)];
    return lparts[static_cast<std::size_t>(l)].split &&
           b.s.training.activation_checkpointing == spec::Checkpointing::FULL && layer.recompute_flops > 0;
  };

  // The trace (§5.2): modules in forward order, then in backward (reverse) order (a recomputed block: its modules in
  // forward order, then reversed). trace_entries are the (position, param) pairs of the prefetch queue.
  std::vector<int> trace; // module per position
  for (int l = 0; l < nl; ++l)
    for (int m : b.layer_modules[static_cast<std::size_t>(l)])
      trace.push_back(m);
  for (int l = nl - 1; l >= 0; --l) {
    const auto& mods = b.layer_modules[static_cast<std::size_t>(l)];
    if (module_recompute(l))
      trace.insert(trace.end(), mods.begin(), mods.end());
    trace.insert(trace.end(), mods.rbegin(), mods.rend());
  }
  std::vector<std::size_t> entry_begin(trace.size() + 1, 0);
  std::vector<int> entry_param, entry_pos;
  std::vector<std::int64_t> numel_before(trace.size() + 1, 0); // Σ ds_numel of positions < k
  for (std::size_t k = 0; k < trace.size(); ++k) {
    entry_begin[k] = entry_param.size();
    std::int64_t sum = 0;
    for (int p : b.modules[static_cast<std::size_t>(trace[k])].params) {
      entry_param.push_back(p);
      entry_pos.push_back(static_cast<int>(k));
      sum += b.params[static_cast<std::size_t>(p)].numel;
    }
    numel_before[k + 1] = numel_before[k] + sum;
  }
  entry_begin[trace.size()] = entry_param.size();
  // The module's next use in the trace (-1: none follows).
  std::vector<int> next_use(trace.size(), -1);
  {
    std::vector<int> seen(b.modules.size(), -1);
    for (auto k = static_cast<int>(trace.size()) - 1; k >= 0; --k) {
      const auto m = static_cast<std::size_t>(trace[static_cast<std::size_t>(k)]);
      next_use[static_cast<std::size_t>(k)] = seen[m];
      seen[m] = k;
    }
  }
  // Reuse distance (§5.4): after the use at position i, the walk from i+1 sums ds_numel module by module and stops
  // once the sum >= max_reuse_distance; the module's next use is reached iff the params strictly between sum to
  // less than the distance.
  auto kept_by_reuse = [&](int pos) {
    const int next = next_use[static_cast<std::size_t>(pos)];
    if (next < 0)
      return false; // nothing follows (a backward use)
    return numel_before[static_cast<std::size_t>(next)] - numel_before[static_cast<std::size_t>(pos + 1)] <
           z.stage3_max_reuse_distance;
  };

  Coordinator c;
  c.available.assign(np, 0);
  c.gathered.assign(np, -1);
  c.gathered_by.assign(np, -1);
  c.inflight.assign(np, 0);
  c.most_recent.assign(np, -1);
  // Persistent params were gathered by the previous step's _post_step and are kept (§5.1, §5.7 step 4).
  // That gather bypasses the coordinator, so they never count in __n_available_params.
  for (std::size_t p = 0; p < np; ++p)
    if (persistent[p])
      c.available[p] = 1;

  int call_index = 0;
  TaskId last_rs = -1;
  // The coordinator's host time not yet paid (hook_cost only): the hooks that issued no gather, paid by the host
  // before the next gather's issue (a delay on that issue, docs/schedule.md "Stage 3").
  double host_pending = 0;

  for (int mb = 0; mb < b.g; ++mb) {
    const std::string mbs = "mb" + std::to_string(mb);
    // The trace is COMPLETE from the 2nd reset_step of the run on and nothing in step() invalidates it
    // (§5.2): only the run's first micro-step RECORDs it (no prefetch, everything released after use).
    const bool complete = !b.first_step || mb >= 1;
    const bool boundary = mb == b.g - 1;
    // reset_step (§5.2): rewind the queue, forget the prefetch marks, __n_available_params = 0.
    c.queue = 0;
    c.n_available = 0;
    int host_index = 0; // names of this micro-step's hook tasks
    std::fill(c.most_recent.begin(), c.most_recent.end(), -1);
    const Phase fetch_phase = Phase::PARAM_GATHER;

    // One all_gather_coalesced call (§5.3 "One all-gather call"): [NVMe read] -> [H2D of the
    // partitions] -> all_gather_into_tensor into a flat buffer, materialised per param by a cat.
    auto gather_call = [&](const std::vector<int>& ps, const std::string& why) {
      const std::string nm = mbs + ".allgather." + std::to_string(call_index++) + "." + why;
      std::int64_t part_sum = 0, nvme_part = 0, offloaded_part = 0;
      for (int p : ps) {
        part_sum += part[static_cast<std::size_t>(p)];
        if (o.param_offload) {
          offloaded_part += part[static_cast<std::size_t>(p)];
          if (o.param_on_nvme[static_cast<std::size_t>(p)])
            nvme_part += part[static_cast<std::size_t>(p)];
        }
      }
      TaskId pre = -1;
      BufferId staging = -1;
      if (nvme_part > 0) { // synchronous aio read into the swap pool (§8 "Fetch")
        pre = b.nvme(nm + ".nvme_read_params", fetch_phase, false, nvme_part * b.b_lp, mb);
        b.host_wait(pre);
      }
      if (offloaded_part > 0) { // p.ds_tensor.to(cuda) inside the cat, on the all-gather stream (§6.2)
        pre = b.copy(nm + ".h2d_partitions", fetch_phase, ag_stream, CopyDirection::H2D, offloaded_part * b.b_lp, true,
                     mb, {pre});
        staging = b.transient(nm + ".h2d_staging", Device::GPU, MemCategory::BUFFERS, offloaded_part * b.b_lp);
        b.alloc_on(pre, staging);
      }
      const bool sequential = z.stage3_allgather_sequential || ps.size() == 1;
      TaskId t = -1;
      if (!sequential) {
        t = b.collective(nm, fetch_phase, ag_stream, fetch_kind, nn * part_sum * b.b_lp, mb, {pre});
        const BufferId flat = b.transient(nm + ".flat", Device::GPU, MemCategory::BUFFERS, nn * part_sum * b.b_lp);
        b.alloc_on(t, flat);
        b.free_on(t, flat); // freed once the params are materialised (modelled inside the call)
      }
      for (std::size_t i = 0; i < ps.size(); ++i) {
        const auto pu = static_cast<std::size_t>(ps[i]);
        if (sequential) // _all_gather_sequential: straight into param.data, one collective per param
          t = b.collective(ps.size() > 1 ? nm + "." + std::to_string(i) : nm, fetch_phase, ag_stream, fetch_kind,
                           nn * part[pu] * b.b_lp, mb, {pre});
        c.gathered[pu] = b.transient(mbs + ".gathered." + b.params[pu].name, Device::GPU, MemCategory::PARAMS,
                                     nn * part[pu] * b.b_lp);
        b.alloc_on(t, c.gathered[pu]);
        c.gathered_by[pu] = t;
        c.inflight[pu] = 1;
        c.available[pu] = 1;
        c.n_available += b.params[pu].numel;
      }
      b.free_on(t, staging);
    };

    // fetch_sub_module (§5.3): fetch the module's missing params now, then (COMPLETE trace) pop the
    // queue past this module and prefetch upcoming params up to min(max_live - available, B_p).
    auto fetch = [&](int pos) {
      const ModuleInfo& m = b.modules[static_cast<std::size_t>(trace[static_cast<std::size_t>(pos)])];
      if (complete)
        c.pop_queue_to(entry_begin[static_cast<std::size_t>(pos) + 1], entry_param, entry_pos);
      const std::vector<int> now = c.missing(m.params);
      // The coordinator's host time (hook_cost): the pre-hook's and each gather call's Python is paid, with what
      // earlier hooks left unpaid, before the host issues a gather; a hook that issues none adds to the next
      // payment (fewer tasks to replay; the host's total time is the same, a module's compute may be issued a few
      // hooks early).
      auto pay_then_gather = [&](const std::vector<int>& ps, const char* why) {
        if (hook_cost) {
          host_pending += ZERO3_FETCH_HOST_S * host_factor;
          b.sync(mbs + ".zero3_hooks." + std::to_string(host_index++), mb, {}, host_pending);
          host_pending = 0;
        }
        gather_call(ps, why);
      };
      host_pending += hook_cost ? ZERO3_HOOK_HOST_S * host_factor : 0.0;
      if (!now.empty())
        pay_then_gather(now, "fetch");
      c.wait_inflight(b, m.params, mbs, mb);
      if (!complete)
        return;
      // NVMe params are prefetched by their own path: the queue stops at one (§5.3 step 4).
      const std::vector<int> ahead =
          c.prefetch(b, entry_param, entry_pos,
                     std::min(z.stage3_max_live_parameters - c.n_available, z.stage3_prefetch_bucket_size),
                     [&](std::size_t pu) { return o.param_on_nvme[pu] && !c.available[pu]; });
      if (!ahead.empty())
        pay_then_gather(ahead, "prefetch");
    };

    auto deps_of = [&](const std::vector<int>& positions) {
      std::vector<TaskId> d;
      for (int pos : positions)
        for (int p : b.modules[static_cast<std::size_t>(trace[static_cast<std::size_t>(pos)])].params)
          if (!persistent[static_cast<std::size_t>(p)])
            d.push_back(c.gathered_by[static_cast<std::size_t>(p)]);
      return d;
    };

    // release_sub_module (§5.4): free unless persistent, reused within the distance (COMPLETE trace),
    // or already popped by the prefetcher for a later use.
    auto release = [&](int pos, TaskId by) {
      if (hook_cost)
        host_pending += ZERO3_HOOK_HOST_S * host_factor; // release_sub_module, the post-hook
      for (int p : b.modules[static_cast<std::size_t>(trace[static_cast<std::size_t>(pos)])].params) {
        const auto pu = static_cast<std::size_t>(p);
        if (persistent[pu] || !c.available[pu])
          continue;
        if (complete && (kept_by_reuse(pos) || c.most_recent[pu] > pos))
          continue;
        // free_param: param.data.record_stream(current_stream()) before the storage is dropped. The gathered
        // tensor was allocated on the all-gather stream, so its block returns only once the compute stream has
        // passed the release (docs/memory.md §2.1).
        b.record_stream(c.gathered[pu]);
        b.free_on(by, c.gathered[pu]);
        c.gathered[pu] = -1;
        c.available[pu] = 0;
        c.n_available -= b.params[pu].numel;
      }
    };

    // The reduce-scatter hooks (§5.5), run by the backward below.
    std::vector<int> bucket;
    std::int64_t bucket_elems = 0;
    int rs_index = 0;
    std::deque<TaskId> reduce_events;
    auto flush = [&](TaskId trigger) {
      if (bucket.empty())
        return;
      const std::string nm = mbs + ".reduce_scatter." + std::to_string(rs_index++);
      // more than max_param_reduce_events = 2 outstanding: the host synchronises on the oldest (§5.5)
      if (reduce_events.size() > 2) {
        b.host_wait(reduce_events.front());
        reduce_events.pop_front();
      }
      std::int64_t padded = 0;
      for (int p : bucket)
        padded += part[static_cast<std::size_t>(p)] * nn;
      TaskId t = -1;
      if (z.reduce_scatter) { // interleaving cat (+ per-param padding), one reduce_scatter_tensor
        t = b.collective(nm, Phase::GRAD_REDUCE, rs_stream, CollectiveKind::REDUCE_SCATTER, padded * b.b_c, mb,
                         {trigger});
        const BufferId inter = b.transient(nm + ".interleave", Device::GPU, MemCategory::BUFFERS, padded * b.b_c);
        b.alloc_on(t, inter);
        b.free_on(t, inter);
      } else { // __avg_scatter_contiguous_grads: one all_reduce of the bucket
        t = b.collective(nm, Phase::GRAD_REDUCE, rs_stream, CollectiveKind::ALL_REDUCE, bucket_elems * b.b_c, mb,
                         {trigger});
      }
      if (b.b_c != b.b_lp) {
        const BufferId cast = b.transient(nm + ".cast", Device::GPU, MemCategory::BUFFERS, bucket_elems * b.b_c);
        b.alloc_on(t, cast);
        b.free_on(t, cast);
      }
      reduce_events.push_back(t);
      const TaskId cp = stage3_offload_bucket_copies(b, o, nm, mb, boundary, bucket, part, rs_stream);
      last_rs = cp >= 0 ? cp : t;
      bucket.clear();
      bucket_elems = 0;
    };

    // The gradient hooks of `ps` (in backward order) after `trigger`: into the bucket, flushed when full (§5.5).
    auto grad_hooks = [&](const std::vector<int>& ps, TaskId trigger) {
      for (auto it = ps.rbegin(); it != ps.rend(); ++it) {
        const std::int64_t numel = b.params[static_cast<std::size_t>(*it)].numel;
        if (!bucket.empty() && bucket_elems + numel > z.reduce_bucket_size)
          flush(trigger);
        bucket.push_back(*it);
        bucket_elems += numel;
      }
    };

    // A split layer's compute parts (ComputeParts), positions[i] being part i's module: its pre-hook fetches the
    // module and the part waits for that gather; its post-hook releases the module and, in backward, runs the
    // module's gradient hooks.
    auto module_parts = [&](const LayerParts& lp, const std::vector<int>& positions, bool backward) {
      ComputeParts cp{backward ? lp.bwd : lp.fwd, backward ? lp.bwd_names : lp.names, {}, {}, {}};
      cp.before = [&](std::size_t i) {
        fetch(positions[i]);
        return deps_of({positions[i]});
      };
      cp.after = [&, backward](std::size_t i, TaskId t) {
        c.last_compute = t;
        release(positions[i], t);
        if (backward)
          grad_hooks(b.modules[static_cast<std::size_t>(trace[static_cast<std::size_t>(positions[i])])].params, t);
      };
      return cp;
    };

    // ---- forward ----
    int pos = 0;
    for (int l = 0; l < nl; ++l) {
      std::vector<int> positions;
      for (std::size_t k = 0; k < b.layer_modules[static_cast<std::size_t>(l)].size(); ++k)
        positions.push_back(pos++);
      // DeepSpeed's checkpoint() runs before the block's forward pre-hooks fetch its params (docs/offload.md).
      b.checkpoint_forward_begin(mb, l);
      const LayerParts& lp = lparts[static_cast<std::size_t>(l)];
      if (lp.split) { // per leaf module: pre-hook (fetch) -> the module's ops -> post-hook (release)
        const ComputeParts cp = module_parts(lp, positions, false);
        b.forward(mb, l, {}, &cp);
        continue;
      }
      for (int p : positions)
        fetch(p);
      const TaskId fwd = b.forward(mb, l, deps_of(positions));
      c.last_compute = fwd;
      for (int p : positions)
        release(p, fwd);
    }

    // ---- backward ----
    TaskId last_bwd = -1;
    for (int l = nl - 1; l >= 0; --l) {
      const std::size_t nmod = b.layer_modules[static_cast<std::size_t>(l)].size();
      std::vector<int> recompute_positions; // a recomputed block's modules in forward order (per_module)
      if (module_recompute(l))
        for (std::size_t k = 0; k < nmod; ++k)
          recompute_positions.push_back(pos++);
      std::vector<int> positions; // this layer's modules in backward order
      for (std::size_t k = 0; k < nmod; ++k)
        positions.push_back(pos++);
      // CheckpointFunction.backward restores the checkpoint before the recompute's hooks fetch (docs/offload.md).
      b.checkpoint_backward_begin(mb, l);
      const LayerParts& lp = lparts[static_cast<std::size_t>(l)];
      TaskId bwd = -1;
      if (lp.split) {
        // The recompute's pre-hooks fetch the block's modules (its compute stays one task after them), then per
        // module in backward order: pre-backward hook (fetch) -> the module's backward -> post-backward hook
        // (release) and its parameters' gradient hooks.
        for (int p : recompute_positions)
          fetch(p);
        ComputeParts cp = module_parts(lp, positions, true);
        cp.after_recompute = [&](TaskId t) {
          c.last_compute = t;
          for (int p : recompute_positions)
            release(p, t);
        };
        bwd = b.backward(mb, l, deps_of(recompute_positions), &cp)[1];
      } else {
        for (int p : positions)
          fetch(p);
        bwd = b.backward(mb, l, deps_of(positions))[1];
      }
      last_bwd = bwd;
      c.last_compute = bwd;
      // autograd's grads live until the hook copies them into the IPG bucket (modelled inside backward)
      const BufferId grads = b.transient(mbs + ".autograd_grads." + b.w.layers[static_cast<std::size_t>(l)].name,
                                         Device::GPU, MemCategory::GRADS, b.layer_grad_bytes(l));
      b.alloc_on(bwd, grads);
      b.free_on(bwd, grads);
      if (!lp.split) {
        for (int p : positions)
          release(p, bwd);
        grad_hooks(b.layer_params[static_cast<std::size_t>(l)], bwd);
      }
      b.checkpoint_backward_end(mb, l); // after the block's gradient hooks (docs/offload.md)
    }
    if (host_pending > 0) { // the last post-backward hooks
      b.sync(mbs + ".zero3_hooks." + std::to_string(host_index++), mb, {}, host_pending);
      host_pending = 0;
    }
    flush(last_bwd);
    // Anything still gathered here (a prefetch the trace did not consume) is released with the module.
    for (std::size_t p = 0; p < np; ++p)
      if (!persistent[p] && c.available[p]) {
        b.record_stream(c.gathered[p]); // free_param, as in release
        b.free_on(last_bwd, c.gathered[p]);
        c.available[p] = 0;
        c.gathered[p] = -1;
        c.n_available -= b.params[p].numel;
      }
    // independent_gradient_partition_epilogue: reduce_and_partition_stream.synchronize() (§5.5).
    b.sync(mbs + ".reduce_and_partition_stream.synchronize", mb, {last_rs, last_bwd});
  }

  // NVMe optimizer: _flush_gradient_swapper before the step (§7).
  if (o.opt_nvme) {
    for (auto i = static_cast<TaskId>(b.graph.tasks.size()) - 1; i >= 0; --i)
      if (b.task(i).kind == TaskKind::NVME_WRITE) {
        b.sync("step.flush_gradient_swapper", -1, {i});
        break;
      }
  }

  // step (§5.7): _partition_all_parameters; overflow check (fp16 only) + grad norm; per sub-group
  // optimizer; _post_step all-gathers the persistent params in one call.
  b.step_scalars(b.fp16);
  const TaskId last_opt = stage3_optimizer_loop(b, o);
  std::int64_t persist_part = 0;
  int persist_count = 0;
  for (std::size_t p = 0; p < np; ++p)
    if (persistent[p]) {
      persist_part += part[p];
      ++persist_count;
    }
  if (persist_count > 0) {
    const std::int64_t bytes = nn * persist_part * b.b_lp;
    const TaskId ag = b.collective("step.allgather_persistent_params", Phase::PARAM_GATHER, ag_stream, fetch_kind,
                                   bytes, -1, {last_opt});
    if (persist_count > 1 && !z.stage3_allgather_sequential) {
      const BufferId flat =
          b.transient("step.allgather_persistent_params.flat", Device::GPU, MemCategory::BUFFERS, bytes);
      b.alloc_on(ag, flat);
      b.free_on(ag, flat);
    }
  }
}

} // namespace zerosim::schedule::detail
