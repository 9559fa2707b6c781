// PyTorch FullyShardedDataParallel (FSDP1, flat parameters) and fully_shard (FSDP2, per-parameter
// DTensor sharding) as the task graph of one optimizer step of one rank. docs/fsdp.md is cited as "§n";
// it names the PyTorch file and function behind every rule.
#include "schedule/fsdp_builder.hpp"

#include "core/error.hpp"
#include "spec/names.hpp"

#include <algorithm>
#include <array>
#include <deque>
#include <string>
#include <utility>
#include <vector>

namespace zerosim::schedule::detail {

namespace fsdp {

Config resolve(const Builder& b)
{
  const spec::Scenario& s = b.s;
  const spec::FsdpSpec& f = s.fsdp;
  const std::string where = scenario_label(s);
  if (f.wrap != "block" && f.wrap != "model")
    throw core::UnsupportedError(where + ": fsdp.wrap " + f.wrap +
                                 ": only block (one unit per transformer block) and model are modelled");
  Config c;
  c.v2 = f.reshard_after_forward.has_value();
  spec::FsdpSharding st = f.sharding_strategy;
  if (c.v2 && st == spec::FsdpSharding::NO_SHARD)
    throw core::UnsupportedError(where + ": fsdp.reshard_after_forward with sharding_strategy NO_SHARD: FSDP2 "
                                         "(fully_shard) has no NO_SHARD (that is replicate / DDP; use framework ddp "
                                         "or drop reshard_after_forward)");
  if (st == spec::FsdpSharding::HYBRID_SHARD && s.cluster.gpus_per_node == 1)
    throw core::UnsupportedError(where + ": fsdp.sharding_strategy HYBRID_SHARD with gpus_per_node 1: PyTorch "
                                         "switches to NO_SHARD on the one-GPU shard group and then never reduces "
                                         "gradients across nodes (pytorch/pytorch#154888); not modelled");
  c.w = st == spec::FsdpSharding::HYBRID_SHARD ? s.cluster.gpus_per_node : st == spec::FsdpSharding::NO_SHARD ? 1 : b.n;
  // FSDP1 _init_utils.py: "FSDP is switching to use NO_SHARD ... since the world size is 1" (§5).
  if (!c.v2 && c.w == 1)
    st = spec::FsdpSharding::NO_SHARD;
  c.no_shard = st == spec::FsdpSharding::NO_SHARD;
  c.hybrid_ar = st == spec::FsdpSharding::HYBRID_SHARD && s.cluster.nodes > 1;
  c.shard_group = st == spec::FsdpSharding::HYBRID_SHARD ? CommGroup::INTRA_NODE : CommGroup::WORLD;
  c.reshard_fwd = c.v2 ? *f.reshard_after_forward
                       : (st == spec::FsdpSharding::FULL_SHARD || st == spec::FsdpSharding::HYBRID_SHARD);

  // Dtypes (§9): the default param dtype follows training.precision; a given one must agree with the compute.
  const spec::Precision p = s.training.precision;
  spec::Dtype def = spec::Dtype::FP32;
  std::vector<spec::Dtype> allowed{spec::Dtype::FP32};
  switch (p) {
  case spec::Precision::BF16:
    def = spec::Dtype::BF16;
    allowed = {spec::Dtype::BF16};
    break;
  case spec::Precision::FP16:
    def = spec::Dtype::FP16;
    allowed = {spec::Dtype::FP16};
    break;
  case spec::Precision::AMP_BF16:
    allowed = {spec::Dtype::FP32, spec::Dtype::BF16};
    break;
  case spec::Precision::AMP_FP16:
    allowed = {spec::Dtype::FP32, spec::Dtype::FP16};
    break;
  case spec::Precision::FP32:
    break;
  }
  const spec::Dtype param = f.param_dtype.value_or(def);
  if (std::find(allowed.begin(), allowed.end(), param) == allowed.end())
    throw core::InputError(where + ": fsdp.mixed_precision.param_dtype " + spec::to_string(param) +
                           " contradicts training.precision " + spec::to_string(p) +
                           ": param_dtype is the compute dtype (bf16/fp16: that dtype; amp_*: fp32 or the autocast "
                           "dtype; fp32: fp32), docs/fsdp.md §9");
  c.b_p = spec::dtype_bytes(param);
  c.b_r = spec::dtype_bytes(f.reduce_dtype.value_or(param));
  c.offload = f.cpu_offload;
  c.limit = !c.v2 && f.limit_all_gathers;
  c.prefetch = c.v2 ? spec::BackwardPrefetch::BACKWARD_PRE : f.backward_prefetch;
  c.forward_prefetch = !c.v2 && f.forward_prefetch;
  c.scaler = p == spec::Precision::FP16 || p == spec::Precision::AMP_FP16;
  c.pad_always = !c.v2 && spec::torch_generation(s.priced_software().torch).value_or(0) < 2000;
  return c;
}

Fsdp::Fsdp(Builder& b, Config c) : b_(b), c_(std::move(c))
{
  const auto nl = static_cast<int>(b_.w.layers.size());
  unit_of_.assign(static_cast<std::size_t>(nl), -1);
  const bool per_block = b_.s.fsdp.wrap == "block";
  // The root unit: every parameter no block unit owns (all of them with wrap: model).
  Unit root;
  root.name = "root";
  root.root = true;
  std::vector<std::int64_t> root_params;
  for (int l = 0; l < nl; ++l) {
    const workload::Layer& layer = b_.w.layers[static_cast<std::size_t>(l)];
    if (per_block && layer.kind == workload::LayerKind::BLOCK)
      continue;
    for (int pi : b_.layer_params[static_cast<std::size_t>(l)])
      root_params.push_back(b_.params[static_cast<std::size_t>(pi)].numel);
  }
  for (std::int64_t n : root_params)
    root.numel += n;
  if (root.numel > 0) {
    root.shard = shard_of(root.numel, root_params);
    for (int l = 0; l < nl; ++l)
      if (!per_block || b_.w.layers[static_cast<std::size_t>(l)].kind != workload::LayerKind::BLOCK) {
        unit_of_[static_cast<std::size_t>(l)] = 0;
        if (root.last_bwd_layer < 0)
          root.last_bwd_layer = l; // the first layer in forward order is the last in backward
      }
    units_.push_back(root);
  }
  for (int l = 0; l < nl && per_block; ++l) {
    const workload::Layer& layer = b_.w.layers[static_cast<std::size_t>(l)];
    if (layer.kind != workload::LayerKind::BLOCK)
      continue;
    Unit u;
    u.name = layer.name;
    std::vector<std::int64_t> ps;
    for (int pi : b_.layer_params[static_cast<std::size_t>(l)]) {
      ps.push_back(b_.params[static_cast<std::size_t>(pi)].numel);
      u.numel += ps.back();
    }
    if (u.numel == 0)
      continue; // a block without parameters is no FSDP unit
    u.shard = shard_of(u.numel, ps);
    u.last_bwd_layer = l;
    unit_of_[static_cast<std::size_t>(l)] = static_cast<int>(units_.size());
    units_.push_back(u);
  }
  // Pre-forward order: root, blocks; post-forward order (backward prefetch): blocks, root (§1, §3).
  for (std::size_t u = 0; u < units_.size(); ++u)
    pre_fwd_.push_back(static_cast<int>(u));
  for (std::size_t u = 0; u < units_.size(); ++u)
    if (!units_[u].root)
      post_fwd_.push_back(static_cast<int>(u));
  if (!units_.empty() && units_[0].root)
    post_fwd_.push_back(0);
  post_fwd_index_.assign(units_.size(), -1);
  for (std::size_t i = 0; i < post_fwd_.size(); ++i)
    post_fwd_index_[static_cast<std::size_t>(post_fwd_[i])] = static_cast<int>(i);
  for (const Unit& u : units_)
    p_total_ += u.shard;
  // The largest tensor torch.optim steps on this rank: a flat parameter's shard (FSDP1) or one parameter's
  // shard (FSDP2, per numel as shard_of pads it).
  if (!c_.v2) {
    for (const Unit& u : units_)
      largest_tensor_ = std::max(largest_tensor_, u.shard);
  } else {
    for (const ParamInfo& pi : b_.params)
      largest_tensor_ = std::max(largest_tensor_, shard_of(pi.numel, {pi.numel}));
  }
  sharded_grad_.assign(units_.size(), -1);
  host_grad_.assign(units_.size(), -1);
}

void Fsdp::residents()
{
  const bool off = c_.offload;
  b_.resident("sharded_params", off ? Device::HOST : Device::GPU, MemCategory::PARAMS, 4 * p_total_, off);
  const BufferId states = b_.resident("optimizer_states", off ? Device::HOST : Device::GPU, MemCategory::OPTIMIZER,
                                      b_.opt_state_bytes * p_total_);
  // torch.optim's state per parameter the optimizer holds: FSDP1's flat parameter per unit, FSDP2's sharded
  // parameters (their relative sizes: the allocator's requests are scaled to the buffer).
  if (c_.v2) {
    b_.torch_optimizer_state(states);
  } else {
    std::vector<std::int64_t> flat;
    for (const Unit& un : units_)
      flat.push_back(un.shard);
    b_.torch_optimizer_state(states, flat);
  }
  if (off && !c_.v2) // FSDP1 `_cpu_grad`, pinned, allocated at lazy init (§7)
    b_.resident("cpu_grads", Device::HOST, MemCategory::GRADS, 4 * p_total_, true);
}

void Fsdp::forward(int mb, int /*chunk*/)
{
  mb_ = mb;
  mbs_ = "mb" + std::to_string(mb);
  us_.assign(units_.size(), UnitState{});
  // _root_pre_forward -> _wait_for_computation_stream: the all-gather streams wait for the compute
  // stream (the previous backward, its final callback's wait on the reductions, the optimizer step).
  ag_deps_ = {last_compute_, last_reduce_};
  forward_pass();
}

void Fsdp::backward(int mb, int /*chunk*/)
{
  if (mb != mb_)
    throw core::InternalError("schedule: fsdp runs each micro-step's backward after its forward (the units' state, "
                              "docs/fsdp.md); asked micro-step " +
                              std::to_string(mb) + " after " + std::to_string(mb_));
  backward_pass();
}

void Fsdp::step()
{
  const std::int64_t p = p_total_;
  if (c_.scaler) {
    if (c_.offload)
      b_.cpu_work("step.unscale", Phase::OPTIMIZER, p, UNSCALE_BYTES_PER_ELEM * static_cast<double>(p),
                  static_cast<double>(p));
    else
      last_compute_ =
          compute_task("step.unscale", Phase::OPTIMIZER, UNSCALE_BYTES_PER_ELEM * static_cast<double>(p), -1, {});
    // unscale_ all-reduces found_inf over the world group; step() reads it with .item(): a host wait.
    const TaskId ar = collective("step.found_inf", Phase::OPTIMIZER, Stream::COMPUTE, CollectiveKind::ALL_REDUCE, 4, -1,
                                 {}, CommGroup::WORLD);
    b_.host_wait(ar);
  }
  TaskId opt = -1;
  if (c_.offload) {
    const bool sgd = b_.s.training.optimizer == spec::Optimizer::SGD;
    const double per = sgd ? TORCH_SGD_FOREACH_BYTES_PER_ELEM : CPU_TORCH_ADAMW_BYTES_PER_ELEM;
    opt = b_.cpu_work("step.cpu_optimizer", Phase::OPTIMIZER, p, per * static_cast<double>(p),
                      b_.opt_flops_per_elem * static_cast<double>(p));
  } else {
    std::vector<std::int64_t> held = b_.param_elements(); // FSDP2: the sharded parameters
    if (!c_.v2) {                                         // FSDP1: one flat parameter per unit
      held.clear();
      for (const Unit& un : units_)
        held.push_back(un.shard);
    }
    opt = b_.torch_optimizer("step.optimizer", p, largest_tensor_, held);
  }
  // optimizer.zero_grad() (set_to_none) frees the sharded gradients.
  for (std::size_t u = 0; u < units_.size(); ++u) {
    b_.free_on(opt, sharded_grad_[u]);
    b_.free_on(opt, host_grad_[u]);
  }
}

std::int64_t Fsdp::shard_of(std::int64_t numel, const std::vector<std::int64_t>& params) const
{
  if (!c_.v2) // FSDP1 flat parameter: padded to a multiple of W (_get_shard, §1)
    return ceil_div(numel, c_.w);
  std::int64_t s = 0; // FSDP2: every parameter padded on its own (§8; per numel, an approximation)
  for (std::int64_t n : params)
    s += ceil_div(n, c_.w);
  return s;
}

TaskId Fsdp::collective(std::string name, Phase ph, Stream st, CollectiveKind k, std::int64_t bytes, int mb,
                        std::vector<TaskId> deps, CommGroup group)
{
  auto& last = last_comm_[static_cast<std::size_t>(group)];
  deps.push_back(last);
  if (st == Stream::ALLGATHER)
    take_ag_deps(deps);
  last = b_.collective(std::move(name), ph, st, k, bytes, mb, std::move(deps), group);
  return last;
}

double Fsdp::autocast_bytes(int l) const
{
  if (!b_.amp || c_.b_p != 4)
    return 0;
  return static_cast<double>(b_.autocast_numel(l)) * AUTOCAST_CAST_BYTES_PER_ELEM;
}

TaskId Fsdp::compute_task(std::string name, Phase ph, double mem, int mb, std::vector<TaskId> deps, Stream st)
{
  Task t = make_task(TaskKind::COMPUTE, ph, st, std::move(name), mb);
  t.mem_bytes = mem;
  if (st == Stream::ALLGATHER)
    take_ag_deps(deps);
  t.deps = std::move(deps);
  return b_.add(std::move(t));
}

void Fsdp::take_ag_deps(std::vector<TaskId>& deps)
{
  deps.insert(deps.end(), ag_deps_.begin(), ag_deps_.end());
  ag_deps_.clear();
}

void Fsdp::limiter_pop()
{
  if (!c_.limit)
    return;
  if (free_events_.size() < MAX_INFLIGHT_ALL_GATHERS)
    return;
  const TaskId ev = free_events_.front();
  free_events_.pop_front();
  if (ev >= 0) // -1: an event of the previous step, complete long before
    b_.sync(mbs_ + ".rate_limiter." + std::to_string(limiter_syncs_++), mb_, {ev});
}

void Fsdp::limiter_push(TaskId by)
{
  if (c_.limit)
    free_events_.push_back(by);
}

void Fsdp::unshard(int u, const char* pass)
{
  UnitState& st = us_[static_cast<std::size_t>(u)];
  const Unit& un = units_[static_cast<std::size_t>(u)];
  const std::string base = mbs_ + ".%." + un.name + "." + pass;
  auto nm = [&](const std::string& what) {
    std::string s = base;
    s.replace(s.find('%'), 1, what);
    return s;
  };
  const bool mp = c_.b_p != 4;
  if (c_.v2) {
    if (st.unsharded >= 0 || st.ag_pending)
      return; // is_unsharded, or an unshard is pending its wait
    TaskId pre = -1;
    BufferId staging = -1;
    if (c_.offload) { // all_gather_inputs: sharded_param_data.to(device) on the copy-in stream
      std::vector<TaskId> d;
      take_ag_deps(d);
      pre = b_.copy(nm("h2d_shard"), Phase::PARAM_GATHER, Stream::ALLGATHER, CopyDirection::H2D, 4 * un.shard, true,
                    mb_, d);
      staging = b_.transient(nm("h2d_shard"), Device::GPU, MemCategory::BUFFERS, 4 * un.shard);
      b_.alloc_on(pre, staging);
    }
    if (b_.s.mechanisms.copies && c_.w > 1) {
      // all_gather_copy_in: the shards (cast to param_dtype) into the all-gather input, one kernel; it and the
      // all-gather both wait on the previous unit's copy-out event (AllGatherState).
      const std::vector<TaskId> copy_out_events = ag_deps_;
      pre = compute_task(nm("copy_in"), Phase::PARAM_GATHER, static_cast<double>(un.shard) * (4 + c_.b_p), mb_, {pre},
                         Stream::ALLGATHER);
      ag_deps_ = copy_out_events;
    }
    st.ag_pending = true;
    st.ag = pre;
    if (c_.w > 1) {
      const std::int64_t bytes = padded(un) * c_.b_p;
      const TaskId ag = collective(nm("allgather"), Phase::PARAM_GATHER, Stream::ALLGATHER, CollectiveKind::ALL_GATHER,
                                   bytes, mb_, {pre}, c_.shard_group);
      st.ag = ag;
      st.ag_output = b_.transient(nm("allgather") + ".output", Device::GPU, MemCategory::BUFFERS, bytes);
      b_.alloc_on(ag, st.ag_output);
      if (mp) { // the flat cast of the shards to param_dtype (_get_param_all_gather_inputs)
        b_.scratch(ag, nm("allgather") + ".copy_in", MemCategory::BUFFERS, un.shard * c_.b_p);
      }
      b_.free_on(ag, staging);
      // In forward the previous unit's all-gather output is released before this unit's copy-out.
      if (std::string(pass) == "fwd" && pending_fwd_output_ >= 0) {
        b_.free_on(ag, pending_fwd_output_);
        pending_fwd_output_ = -1;
      }
    } else if (pre >= 0) {
      b_.free_on(pre, staging);
    }
    return;
  }

  // FSDP1. pre_unshard (_flat_param.py:pre_unshard) on the pre-unshard stream, here the all-gather stream.
  const bool needs_ag = !c_.no_shard && st.unsharded < 0;
  TaskId pre = -1;
  BufferId staging = -1, mp_shard = -1;
  if (c_.no_shard) {
    const std::int64_t n = un.numel;
    if (c_.offload) { // flat_param_to(device) / _local_shard.to(device): the whole fp32 flat parameter
      std::vector<TaskId> d;
      take_ag_deps(d);
      pre = b_.copy(nm("h2d_shard"), Phase::PARAM_GATHER, Stream::ALLGATHER, CopyDirection::H2D, 4 * n, true, mb_, d);
      staging = b_.transient(nm("h2d_shard"), Device::GPU, mp ? MemCategory::BUFFERS : MemCategory::PARAMS, 4 * n);
      b_.alloc_on(pre, staging);
    }
    if (mp) { // _use_low_precision_shard: the low-precision copy of the whole unit, used by the compute
      pre = compute_task(nm("mp_cast"), Phase::PARAM_GATHER, static_cast<double>(n) * (4 + c_.b_p), mb_, {pre},
                         Stream::ALLGATHER);
      b_.free_on(pre, staging);
      st.unsharded = b_.transient(nm("mp_shard"), Device::GPU, MemCategory::PARAMS, n * c_.b_p);
      b_.alloc_on(pre, st.unsharded);
    } else if (staging >= 0) {
      st.unsharded = staging; // the GPU fp32 copy is the parameter until the reshard
    }
    if (pre >= 0)
      st.ready = pre;
    limiter_pop();
    return;
  }
  // Sharded strategies: without offload, pre_unshard is a no-op for an unit that is already unsharded. With
  // offload the fp32 shard is copied H2D when it is all-gathered, and with mixed precision even when it is
  // not (the `_use_low_precision_shard` branch runs before the unsharded check).
  const bool h2d = c_.offload && (needs_ag || mp);
  const bool cast = mp && (needs_ag || c_.offload);
  if (h2d) {
    std::vector<TaskId> d;
    take_ag_deps(d);
    pre = b_.copy(nm("h2d_shard"), Phase::PARAM_GATHER, Stream::ALLGATHER, CopyDirection::H2D, 4 * un.shard, true, mb_,
                  d);
    staging = b_.transient(nm("h2d_shard"), Device::GPU, MemCategory::BUFFERS, 4 * un.shard);
    b_.alloc_on(pre, staging);
    if (mp) // cast at once into _mp_shard; the fp32 copy dies with the statement
      b_.free_on(pre, staging);
  }
  if (cast) {
    if (b_.s.mechanisms.copies) // _use_low_precision_shard: the fp32 shard cast into _mp_shard, one kernel
      pre = compute_task(nm("mp_cast"), Phase::PARAM_GATHER, static_cast<double>(un.shard) * (4 + c_.b_p), mb_, {pre},
                         Stream::ALLGATHER);
    mp_shard = b_.transient(nm("mp_shard"), Device::GPU, MemCategory::BUFFERS, un.shard * c_.b_p);
    if (pre >= 0)
      b_.alloc_on(pre, mp_shard);
  }
  limiter_pop();
  if (!needs_ag) {
    // Already unsharded (the root, SHARD_GRAD_OP in backward): post_unshard frees the needless _mp_shard, and
    // the compute still waits for the unshard stream, which waited for the copy.
    if (pre >= 0) {
      b_.free_on(pre, mp_shard);
      st.ready = pre;
    }
    return;
  }
  const std::int64_t bytes = padded(un) * c_.b_p;
  const TaskId ag = collective(nm("allgather"), Phase::PARAM_GATHER, Stream::ALLGATHER, CollectiveKind::ALL_GATHER,
                               bytes, mb_, {pre}, c_.shard_group);
  if (mp_shard >= 0 && pre < 0)
    b_.alloc_on(ag, mp_shard);
  b_.free_on(ag, mp_shard); // post_unshard, record_stream on the unshard stream
  if (!mp)
    b_.free_on(ag, staging);
  st.unsharded = b_.transient(mbs_ + ".unsharded." + un.name + "." + pass, Device::GPU, MemCategory::PARAMS, bytes);
  // _free_unsharded_flat_param: record_stream on the compute stream before the storage is freed (reshard).
  b_.record_stream(st.unsharded);
  b_.alloc_on(ag, st.unsharded);
  st.ready = ag;
}

void Fsdp::wait_for_unshard(int u, bool fwd)
{
  UnitState& st = us_[static_cast<std::size_t>(u)];
  if (!c_.v2 || !st.ag_pending)
    return;
  const Unit& un = units_[static_cast<std::size_t>(u)];
  const std::int64_t bytes = padded(un) * c_.b_p;
  const std::string nm = mbs_ + ".copy_out." + un.name + (fwd ? ".fwd" : ".bwd");
  const TaskId co = compute_task(nm, Phase::PARAM_GATHER, 2.0 * static_cast<double>(bytes), mb_, {st.ag});
  last_compute_ = co;
  if (pending_fwd_output_ >= 0 && fwd) { // no all-gather task released it (one GPU)
    b_.free_on(co, pending_fwd_output_);
    pending_fwd_output_ = -1;
  }
  st.unsharded =
      b_.transient(mbs_ + ".unsharded." + un.name + (fwd ? ".fwd" : ".bwd"), Device::GPU, MemCategory::PARAMS, bytes);
  b_.alloc_on(co, st.unsharded);
  if (fwd) {
    // The all-gather streams wait on the previous unit's copy-out event; this unit's output is kept
    // (AllGatherState) until the next unit's unshard.
    if (prev_copy_out_ >= 0)
      ag_deps_.push_back(prev_copy_out_);
    prev_copy_out_ = co;
    pending_fwd_output_ = st.ag_output;
  } else {
    b_.free_on(co, st.ag_output);
    ag_deps_.push_back(co);
  }
  st.ag_output = -1;
  st.ag_pending = false;
  st.ag = -1;
  st.ready = co;
}

void Fsdp::forward_pass()
{
  prev_copy_out_ = -1;
  const auto nl = static_cast<int>(b_.w.layers.size());
  const bool has_root = !units_.empty() && units_[0].root;
  if (has_root)
    pre_forward(0);
  for (int l = 0; l < nl; ++l) {
    const int u = unit_of_[static_cast<std::size_t>(l)];
    const bool block = u >= 0 && !units_[static_cast<std::size_t>(u)].root;
    if (block)
      pre_forward(u);
    std::vector<TaskId> deps;
    if (u >= 0)
      deps.push_back(us_[static_cast<std::size_t>(u)].ready);
    const TaskId fwd = b_.forward(mb_, l, deps);
    if (const double e = autocast_bytes(l); e > 0)
      b_.task(fwd).mem_bytes += e;
    last_compute_ = fwd;
    if (block)
      post_forward(u, fwd);
  }
  if (has_root)
    post_forward(0, last_compute_);
  if (pending_fwd_output_ >= 0) { // the root's post-forward flushes the last all-gather state (§8)
    b_.free_on(last_compute_, pending_fwd_output_);
    pending_fwd_output_ = -1;
  }
}

void Fsdp::pre_forward(int u)
{
  UnitState& st = us_[static_cast<std::size_t>(u)];
  if (c_.v2) {
    unshard(u, "fwd");
    wait_for_unshard(u, true);
    return;
  }
  if (!st.prefetched)
    unshard(u, "fwd");
  // forward_prefetch: the next unit of the recorded pre-forward order; none while the first iteration records it.
  if (c_.forward_prefetch && !(b_.first_step && mb_ == 0)) {
    const auto pos = static_cast<std::size_t>(std::find(pre_fwd_.begin(), pre_fwd_.end(), u) - pre_fwd_.begin());
    if (pos + 1 < pre_fwd_.size()) {
      const int next = pre_fwd_[pos + 1];
      if (!us_[static_cast<std::size_t>(next)].prefetched) {
        unshard(next, "fwd");
        us_[static_cast<std::size_t>(next)].prefetched = true;
      }
    }
  }
}

void Fsdp::post_forward(int u, TaskId fwd)
{
  UnitState& st = us_[static_cast<std::size_t>(u)];
  const bool root = units_[static_cast<std::size_t>(u)].root;
  st.needs_pre_bwd = true;
  if (c_.no_shard) { // post_reshard frees the low-precision (or H2D) copy, the root's too
    b_.free_on(fwd, st.unsharded);
    st.unsharded = -1;
    return;
  }
  if (root || !c_.reshard_fwd)
    return; // the root is never resharded after forward; SHARD_GRAD_OP keeps everything
  b_.free_on(fwd, st.unsharded);
  st.unsharded = -1;
  st.prefetched = false;
  if (!c_.v2)
    limiter_push(fwd);
}

} // namespace fsdp

std::unique_ptr<StepUnits> fsdp_units(Builder& b)
{
  const fsdp::Config c = fsdp::resolve(b);
  auto f = std::make_unique<fsdp::Fsdp>(b, c);
  if (f->units().empty())
    throw core::InternalError("schedule: fsdp: the workload has no parameters");
  // The limiter queue at the step's start is what a backward leaves behind. Its length is the fixed point
  // of one micro-step's pushes and pops, found on scratch graphs; its events are complete (-1).
  if (c.limit) {
    std::size_t len = 0;
    for (int it = 0; it < 8; ++it) {
      Builder scratch(b.s, b.w, b.rank);
      fsdp::Fsdp dry(scratch, c);
      dry.free_events().assign(len, -1);
      dry.micro_step(0);
      const std::size_t next = dry.free_events().size();
      if (next == len)
        break;
      len = next;
    }
    f->free_events().assign(len, -1);
  }
  return f;
}

} // namespace zerosim::schedule::detail
