// ZeRO stage 3 (DeepSpeedZeroOptimizer_Stage3 + the parameter coordinator, docs/deepspeed-schedule.md §5),
// with its CPU/NVMe offload placements (§6-§8, offload.cpp).
#include "schedule/offload.hpp"
#include "schedule/stage3_fetch.hpp"

#include "core/error.hpp"

#include <algorithm>

namespace zerosim::schedule::detail {

namespace {

/// The per-micro-step state of the parameter coordinator (§5.2-§5.4).
struct Coordinator : FetchCoordinator {
  std::vector<BufferId> gathered; ///< per param: its full buffer while gathered
};

/// One rank's stage-3 step: the partitioning and offload plan, the trace, the state of the parameter coordinator
/// and of the reduce-scatter hooks, with the module and gradient hooks as functions.
struct Stage3 : StepUnits {
  explicit Stage3(Builder& builder);

  void prologue() override {} // the constructor places the model states (partitioning and offload plan)
  /// reset_step, then the forward of every layer.
  void forward(int m, int chunk) override;
  /// The backward of every layer from where micro-step `m`'s forward left the trace, and its end.
  void backward(int m, int chunk) override;
  void epilogue() override { step(); }
  /// step (§5.7).
  void step();

  /// Whether layer `l`'s recompute re-runs its modules' forward hooks (per-module fetching, full checkpointing).
  bool module_recompute(int l) const;
  /// The trace (§5.2) with its prefetch-queue entries and each position's next use.
  void build_trace();
  /// Whether the params of the module used at `pos` stay gathered for its next use (reuse distance, §5.4).
  bool kept_by_reuse(int pos) const;
  const ModuleInfo& module_at(int pos) const { return b.modules[static_cast<std::size_t>(trace[pos_index(pos)])]; }
  static std::size_t pos_index(int pos) { return static_cast<std::size_t>(pos); }

  // The hooks of the micro-step being built.
  void gather_call(const std::vector<int>& ps, const std::string& why);
  void pay_then_gather(const std::vector<int>& ps, const char* why);
  void fetch(int pos);
  std::vector<TaskId> deps_of(const std::vector<int>& positions) const;
  void release(int pos, TaskId by);
  void flush(TaskId trigger);
  void grad_hooks(const std::vector<int>& ps, TaskId trigger);
  ComputeParts module_parts(const LayerParts& lp, const std::vector<int>& positions, bool in_backward);
  /// The forward of every layer; returns the trace position after it.
  int forward_layers();
  /// The backward of every layer from trace position `pos`; returns the last backward task.
  TaskId backward_layers(int pos);
  /// After the backward: the last hooks' host time, the last bucket, the releases, the epilogue's synchronize.
  void end_of_backward(TaskId last_bwd);

  Builder& b;
  const spec::ZeroSpec& z;
  int nn = 1;
  Stream ag_stream = Stream::COMPUTE; ///< with overlap_comm a stream of its own (§5.3 step 1)
  Stream rs_stream = Stream::COMPUTE; ///< with overlap_comm a stream of its own (§5.5)
  CollectiveKind fetch_kind = CollectiveKind::ALL_GATHER;
  std::size_t np = 0;
  int nl = 0;
  Stage3Partition sp; ///< partitioning and persistent params (§5.1)
  Stage3Offload o;
  /// Per-leaf-module fetching (spec::Mechanisms::per_module_fetch, docs/schedule.md "Stage 3"): each module's
  /// compute is a task of its own between its hooks; off, a layer's modules are all fetched before its one compute
  /// task.
  bool per_module = false;
  /// The coordinator's host (Python) time per hook and per gather call: part of the host's per-op / per-hook
  /// dispatch cost (spec::Mechanisms::host_dispatch, `--without host`), and only counted with per-module hooks.
  bool hook_cost = false;
  double host_factor = 1; // docs/calibration.md
  std::vector<LayerParts> lparts;
  std::vector<int> trace;    ///< module per position
  TraceEntries entries;      ///< the prefetch queue's (position, param) entries
  std::vector<int> next_use; ///< per position, the module's next use in the trace (-1: none follows)
  Coordinator c;
  int call_index = 0;
  TaskId last_rs = -1;
  /// The coordinator's host time not yet paid (hook_cost only): the hooks that issued no gather, paid by the host
  /// before the next gather's issue (a delay on that issue, docs/schedule.md "Stage 3").
  double host_pending = 0;

  // The micro-step being built.
  int mb = 0;
  std::string mbs;
  int after_forward = 0; ///< the trace position after this micro-step's forward
  bool complete = false; ///< the trace is COMPLETE: prefetch and reuse (§5.2)
  bool boundary = false;
  int host_index = 0; ///< names of this micro-step's hook tasks
  std::vector<int> bucket;
  std::int64_t bucket_elems = 0;
  int rs_index = 0;
  std::deque<TaskId> reduce_events;
};

Stage3::Stage3(Builder& builder)
    : b(builder), z(b.s.deepspeed.zero), nn(b.n), ag_stream(z.overlap_comm ? Stream::ALLGATHER : Stream::COMPUTE),
      rs_stream(z.overlap_comm ? Stream::REDUCE_PARTITION : Stream::COMPUTE),
      fetch_kind(z.stage3_use_all_reduce_for_fetch_params ? CollectiveKind::ALL_REDUCE : CollectiveKind::ALL_GATHER),
      np(b.params.size()), nl(static_cast<int>(b.w.layers.size())), sp(stage3_partition(b)),
      o(stage3_plan(b, sp.part, sp.persistent))
{
  stage3_residents(b, o, sp.part, sp.persistent);
  per_module = b.s.mechanisms.per_module_fetch;
  hook_cost = per_module && b.s.mechanisms.host_dispatch;
  host_factor = b.s.calibration.factor("host.deepspeed");
  lparts = per_module ? stage3_layer_parts(b) : std::vector<LayerParts>(b.w.layers.size());
  build_trace();

  c.available.assign(np, 0);
  c.gathered.assign(np, -1);
  c.gathered_by.assign(np, -1);
  c.inflight.assign(np, 0);
  c.most_recent.assign(np, -1);
  // Persistent params were gathered by the previous step's _post_step and are kept (§5.1, §5.7 step 4).
  // That gather bypasses the coordinator, so they never count in __n_available_params.
  for (std::size_t p = 0; p < np; ++p)
    if (sp.persistent[p])
      c.available[p] = 1;
}

bool Stage3::module_recompute(int l) const
{
  // Under full checkpointing a block's recompute re-runs its modules' forward hooks (CheckpointFunction.backward
  // runs the block's forward): the block's modules are fetched again, in forward order, before its backward uses.
  const workload::Layer& layer = b.w.layers[static_cast<std::size_t>(l)];
  return lparts[static_cast<std::size_t>(l)].split &&
         b.s.training.activation_checkpointing == spec::Checkpointing::FULL && layer.recompute_flops > 0;
}

void Stage3::build_trace()
{
  // Modules in forward order, then in backward (reverse) order (a recomputed block: its modules in forward order,
  // then reversed).
  for (int l = 0; l < nl; ++l)
    for (int m : b.layer_modules[static_cast<std::size_t>(l)])
      trace.push_back(m);
  for (int l = nl - 1; l >= 0; --l) {
    const auto& mods = b.layer_modules[static_cast<std::size_t>(l)];
    if (module_recompute(l))
      trace.insert(trace.end(), mods.begin(), mods.end());
    trace.insert(trace.end(), mods.rbegin(), mods.rend());
  }
  for (int m : trace)
    entries.add(b, b.modules[static_cast<std::size_t>(m)].params);
  next_use.assign(trace.size(), -1);
  std::vector<int> seen(b.modules.size(), -1);
  for (auto k = static_cast<int>(trace.size()) - 1; k >= 0; --k) {
    const auto m = static_cast<std::size_t>(trace[pos_index(k)]);
    next_use[pos_index(k)] = seen[m];
    seen[m] = k;
  }
}

bool Stage3::kept_by_reuse(int pos) const
{
  // After the use at position i, the walk from i+1 sums ds_numel module by module and stops once the sum >=
  // max_reuse_distance; the module's next use is reached iff the params strictly between sum to less than the
  // distance.
  const int next = next_use[pos_index(pos)];
  if (next < 0)
    return false; // nothing follows (a backward use)
  return entries.numel_before[pos_index(next)] - entries.numel_before[pos_index(pos + 1)] < z.stage3_max_reuse_distance;
}

void Stage3::gather_call(const std::vector<int>& ps, const std::string& why)
{
  // One all_gather_coalesced call (§5.3 "One all-gather call"): [NVMe read] -> [H2D of the
  // partitions] -> all_gather_into_tensor into a flat buffer, materialised per param by a cat.
  const std::vector<std::int64_t>& part = sp.part;
  const Phase fetch_phase = Phase::PARAM_GATHER;
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
    pre = b.copy(nm + ".h2d_partitions", fetch_phase, ag_stream, CopyDirection::H2D, offloaded_part * b.b_lp, true, mb,
                 {pre});
    staging = b.transient(nm + ".h2d_staging", Device::GPU, MemCategory::BUFFERS, offloaded_part * b.b_lp);
    b.alloc_on(pre, staging);
  }
  const bool sequential = z.stage3_allgather_sequential || ps.size() == 1;
  TaskId t = -1;
  if (!sequential) {
    t = b.collective(nm, fetch_phase, ag_stream, fetch_kind, nn * part_sum * b.b_lp, mb, {pre});
    // freed once the params are materialised (modelled inside the call)
    b.scratch(t, nm + ".flat", MemCategory::BUFFERS, nn * part_sum * b.b_lp);
  }
  for (std::size_t i = 0; i < ps.size(); ++i) {
    const auto pu = static_cast<std::size_t>(ps[i]);
    if (sequential) // _all_gather_sequential: straight into param.data, one collective per param
      t = b.collective(ps.size() > 1 ? nm + "." + std::to_string(i) : nm, fetch_phase, ag_stream, fetch_kind,
                       nn * part[pu] * b.b_lp, mb, {pre});
    c.gathered[pu] =
        b.transient(mbs + ".gathered." + b.params[pu].name, Device::GPU, MemCategory::PARAMS, nn * part[pu] * b.b_lp);
    b.alloc_on(t, c.gathered[pu]);
    c.gathered_by[pu] = t;
    c.inflight[pu] = 1;
    c.available[pu] = 1;
    c.n_available += b.params[pu].numel;
  }
  b.free_on(t, staging);
}

void Stage3::pay_then_gather(const std::vector<int>& ps, const char* why)
{
  // The coordinator's host time (hook_cost): the pre-hook's and each gather call's Python is paid, with what
  // earlier hooks left unpaid, before the host issues a gather; a hook that issues none adds to the next
  // payment (fewer tasks to replay; the host's total time is the same, a module's compute may be issued a few
  // hooks early).
  if (hook_cost) {
    host_pending += ZERO3_FETCH_HOST_S * host_factor;
    b.sync(mbs + ".zero3_hooks." + std::to_string(host_index++), mb, {}, host_pending);
    host_pending = 0;
  }
  gather_call(ps, why);
}

void Stage3::fetch(int pos)
{
  // fetch_sub_module (§5.3): fetch the module's missing params now, then (COMPLETE trace) pop the
  // queue past this module and prefetch upcoming params up to min(max_live - available, B_p).
  const ModuleInfo& m = module_at(pos);
  if (complete)
    c.pop_queue_to(entries.begin[pos_index(pos) + 1], entries);
  const std::vector<int> now = c.missing(m.params);
  host_pending += hook_cost ? ZERO3_HOOK_HOST_S * host_factor : 0.0;
  if (!now.empty())
    pay_then_gather(now, "fetch");
  c.wait_inflight(b, m.params, mbs, mb);
  if (!complete)
    return;
  // NVMe params are prefetched by their own path: the queue stops at one (§5.3 step 4).
  const std::vector<int> ahead =
      c.prefetch(b, entries, std::min(z.stage3_max_live_parameters - c.n_available, z.stage3_prefetch_bucket_size),
                 [&](std::size_t pu) { return o.param_on_nvme[pu] && !c.available[pu]; });
  if (!ahead.empty())
    pay_then_gather(ahead, "prefetch");
}

std::vector<TaskId> Stage3::deps_of(const std::vector<int>& positions) const
{
  std::vector<TaskId> d;
  for (int pos : positions)
    for (int p : module_at(pos).params)
      if (!sp.persistent[static_cast<std::size_t>(p)])
        d.push_back(c.gathered_by[static_cast<std::size_t>(p)]);
  return d;
}

void Stage3::release(int pos, TaskId by)
{
  // release_sub_module (§5.4): free unless persistent, reused within the distance (COMPLETE trace),
  // or already popped by the prefetcher for a later use.
  if (hook_cost)
    host_pending += ZERO3_HOOK_HOST_S * host_factor; // release_sub_module, the post-hook
  for (int p : module_at(pos).params) {
    const auto pu = static_cast<std::size_t>(p);
    if (sp.persistent[pu] || !c.available[pu])
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
}

void Stage3::flush(TaskId trigger)
{
  // The reduce-scatter of the bucket (§5.5).
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
    padded += sp.part[static_cast<std::size_t>(p)] * nn;
  TaskId t = -1;
  if (z.reduce_scatter) { // interleaving cat (+ per-param padding), one reduce_scatter_tensor
    t = b.collective(nm, Phase::GRAD_REDUCE, rs_stream, CollectiveKind::REDUCE_SCATTER, padded * b.b_c, mb, {trigger});
    b.scratch(t, nm + ".interleave", MemCategory::BUFFERS, padded * b.b_c);
  } else { // __avg_scatter_contiguous_grads: one all_reduce of the bucket
    t = b.collective(nm, Phase::GRAD_REDUCE, rs_stream, CollectiveKind::ALL_REDUCE, bucket_elems * b.b_c, mb,
                     {trigger});
  }
  if (b.b_c != b.b_lp)
    b.scratch(t, nm + ".cast", MemCategory::BUFFERS, bucket_elems * b.b_c);
  reduce_events.push_back(t);
  const TaskId cp = stage3_offload_bucket_copies(b, o, nm, mb, boundary, bucket, sp.part, rs_stream);
  last_rs = cp >= 0 ? cp : t;
  bucket.clear();
  bucket_elems = 0;
}

void Stage3::grad_hooks(const std::vector<int>& ps, TaskId trigger)
{
  // The gradient hooks of `ps` (in backward order) after `trigger`: into the bucket, flushed when full (§5.5).
  for (auto it = ps.rbegin(); it != ps.rend(); ++it) {
    const std::int64_t numel = b.params[static_cast<std::size_t>(*it)].numel;
    if (!bucket.empty() && bucket_elems + numel > z.reduce_bucket_size)
      flush(trigger);
    bucket.push_back(*it);
    bucket_elems += numel;
  }
}

ComputeParts Stage3::module_parts(const LayerParts& lp, const std::vector<int>& positions, bool in_backward)
{
  // A split layer's compute parts (ComputeParts), positions[i] being part i's module: its pre-hook fetches the
  // module and the part waits for that gather; its post-hook releases the module and, in backward, runs the
  // module's gradient hooks.
  ComputeParts cp{in_backward ? lp.bwd : lp.fwd, in_backward ? lp.bwd_names : lp.names, {}, {}, {}};
  cp.before = [this, &positions](std::size_t i) {
    fetch(positions[i]);
    return deps_of({positions[i]});
  };
  cp.after = [this, &positions, in_backward](std::size_t i, TaskId t) {
    c.last_compute = t;
    release(positions[i], t);
    if (in_backward)
      grad_hooks(module_at(positions[i]).params, t);
  };
  return cp;
}

int Stage3::forward_layers()
{
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
  return pos;
}

TaskId Stage3::backward_layers(int pos)
{
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
      cp.after_recompute = [this, &recompute_positions](TaskId t) {
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
    b.scratch(bwd, mbs + ".autograd_grads." + b.w.layers[static_cast<std::size_t>(l)].name, MemCategory::GRADS,
              b.layer_grad_bytes(l));
    if (!lp.split) {
      for (int p : positions)
        release(p, bwd);
      grad_hooks(b.layer_params[static_cast<std::size_t>(l)], bwd);
    }
    b.checkpoint_backward_end(mb, l); // after the block's gradient hooks (docs/offload.md)
  }
  return last_bwd;
}

void Stage3::end_of_backward(TaskId last_bwd)
{
  if (host_pending > 0) { // the last post-backward hooks
    b.sync(mbs + ".zero3_hooks." + std::to_string(host_index++), mb, {}, host_pending);
    host_pending = 0;
  }
  flush(last_bwd);
  // Anything still gathered here (a prefetch the trace did not consume) is released with the module.
  for (std::size_t p = 0; p < np; ++p)
    if (!sp.persistent[p] && c.available[p]) {
      b.record_stream(c.gathered[p]); // free_param, as in release
      b.free_on(last_bwd, c.gathered[p]);
      c.available[p] = 0;
      c.gathered[p] = -1;
      c.n_available -= b.params[p].numel;
    }
  // independent_gradient_partition_epilogue: reduce_and_partition_stream.synchronize() (§5.5).
  b.sync(mbs + ".reduce_and_partition_stream.synchronize", mb, {last_rs, last_bwd});
}

void Stage3::forward(int m, int /*chunk*/)
{
  mb = m;
  mbs = "mb" + std::to_string(mb);
  // The trace is COMPLETE from the 2nd reset_step of the run on and nothing in step() invalidates it
  // (§5.2): only the run's first micro-step RECORDs it (no prefetch, everything released after use).
  complete = !b.first_step || mb >= 1;
  boundary = mb == b.g - 1;
  // reset_step (§5.2): rewind the queue, forget the prefetch marks, __n_available_params = 0.
  c.queue = 0;
  c.n_available = 0;
  host_index = 0;
  std::fill(c.most_recent.begin(), c.most_recent.end(), -1);
  bucket.clear();
  bucket_elems = 0;
  rs_index = 0;
  reduce_events.clear();

  after_forward = forward_layers();
}

void Stage3::backward(int m, int /*chunk*/)
{
  if (m != mb)
    throw core::InternalError("schedule: stage 3 runs each micro-step's backward after its forward (reset_step, "
                              "docs/deepspeed-schedule.md §5.2); asked micro-step " +
                              std::to_string(m) + " after " + std::to_string(mb));
  end_of_backward(backward_layers(after_forward));
}

void Stage3::step()
{
  // NVMe optimizer: _flush_gradient_swapper before the step (§7).
  if (o.opt_nvme) {
    for (auto i = static_cast<TaskId>(b.graph.tasks.size()) - 1; i >= 0; --i)
      if (b.task(i).kind == TaskKind::NVME_WRITE) {
        b.sync("step.flush_gradient_swapper", -1, {i});
        break;
      }
  }

  // _partition_all_parameters; overflow check (fp16 only) + grad norm; per sub-group optimizer; _post_step
  // all-gathers the persistent params in one call.
  b.step_scalars(b.fp16);
  const TaskId last_opt = stage3_optimizer_loop(b, o);
  std::int64_t persist_part = 0;
  int persist_count = 0;
  for (std::size_t p = 0; p < np; ++p)
    if (sp.persistent[p]) {
      persist_part += sp.part[p];
      ++persist_count;
    }
  if (persist_count > 0) {
    const std::int64_t bytes = nn * persist_part * b.b_lp;
    const TaskId ag = b.collective("step.allgather_persistent_params", Phase::PARAM_GATHER, ag_stream, fetch_kind,
                                   bytes, -1, {last_opt});
    if (persist_count > 1 && !z.stage3_allgather_sequential)
      b.scratch(ag, "step.allgather_persistent_params.flat", MemCategory::BUFFERS, bytes);
  }
}

} // namespace

std::unique_ptr<StepUnits> stage3_units(Builder& b)
{
  return std::make_unique<Stage3>(b);
}

} // namespace zerosim::schedule::detail
