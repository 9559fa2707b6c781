// The schedule builder's shared steps (schedule_builder.hpp; docs/deepspeed-schedule.md is cited as "§n").
#include "schedule/schedule_builder.hpp"

#include "core/error.hpp"
#include "schedule/pipeline_partition.hpp"
#include "spec/placement.hpp"

#include <algorithm>
#include <cmath>
#include <unordered_map>
#include <utility>

namespace zerosim::schedule::detail {

Builder::Builder(const spec::Scenario& scen, const workload::Workload& work, int r) : s(scen), w(work), rank(r)
{
  n = s.dp();
  tp = s.tp();
  const spec::RankCoords at = spec::coords_of(rank, tp, n);
  dp_rank = at.data;
  stage = at.stage;
  stages = s.pp();
  end_layer = static_cast<int>(w.layers.size());
  if (stages > 1) {
    const StageLayers sl = stage_layers(s, w).at(static_cast<std::size_t>(stage));
    first_layer = sl.first;
    end_layer = sl.end;
  }
  b_act = s.training.precision == spec::Precision::FP32 ? 4 : 2;
  g = s.training.grad_accum;
  const spec::Precision p = s.training.precision;
  mixed = p == spec::Precision::BF16 || p == spec::Precision::FP16;
  fp16 = p == spec::Precision::FP16;
  amp = p == spec::Precision::AMP_BF16 || p == spec::Precision::AMP_FP16;
  amp_fp16 = p == spec::Precision::AMP_FP16;
  b_lp = mixed ? 2 : 4;
  b_c = spec::dtype_bytes(s.deepspeed.communication_data_type);
  b_ga = spec::dtype_bytes(s.deepspeed.grad_accum_dtype);
  v016 = s.deepspeed_version == "0.16";
  if (s.training.optimizer == spec::Optimizer::SGD) {
    opt_state_bytes = 0;
    opt_bytes_per_elem = SGD_BYTES_PER_ELEM;
    opt_flops_per_elem = SGD_FLOPS_PER_ELEM;
  }

  // Parameter and module tables, in forward order (= DeepSpeed's flat-buffer and trace order).
  layer_modules.resize(w.layers.size());
  layer_params.resize(w.layers.size());
  for (auto l = static_cast<std::size_t>(first_layer); l < static_cast<std::size_t>(end_layer); ++l) {
    const workload::Layer& layer = w.layers[l];
    std::unordered_map<std::string, int> module_of;
    std::vector<workload::ParamTensor> tensors = layer.params;
    if (stages > 1 && layer.kind == workload::LayerKind::LM_HEAD && tensors.empty() && first_layer > 0) {
      // The tied embedding (docs/pipeline-parallel.md §2): the last stage builds its own copy of the word embedding
      // for the head (TiedLayerSpec); its gradient is all-reduced with the first stage's (EMBEDDING).
      const workload::ParamTensor* word = nullptr;
      for (const workload::Layer& e : w.layers)
        if (e.kind == workload::LayerKind::EMBEDDING)
          for (const workload::ParamTensor& t : e.params)
            if (word == nullptr || t.numel > word->numel)
              word = &t;
      if (word != nullptr) {
        tensors.push_back(workload::ParamTensor{"tied_embedding.weight", word->numel, "tied_embedding"});
        tied_embedding_numel = word->numel;
      }
    }
    // The first stage's word embedding is tied to a head on another stage when that head owns no weight.
    const workload::Layer& last = w.layers.back();
    if (stages > 1 && layer.kind == workload::LayerKind::EMBEDDING && end_layer < static_cast<int>(w.layers.size()) &&
        last.kind == workload::LayerKind::LM_HEAD && last.params.empty())
      for (const workload::ParamTensor& t : layer.params)
        tied_embedding_numel = std::max(tied_embedding_numel, t.numel);
    for (const workload::ParamTensor& t : tensors) {
      if (t.numel <= 0)
        throw core::InternalError("schedule: parameter " + layer.name + "." + t.name + " has no elements");
      auto it = module_of.find(t.module);
      int m = -1;
      if (it == module_of.end()) {
        m = static_cast<int>(modules.size());
        modules.push_back(ModuleInfo{static_cast<int>(l), layer.name + "." + t.module, {}});
        module_of.emplace(t.module, m);
        layer_modules[l].push_back(m);
      } else {
        m = it->second;
      }
      const int pi = static_cast<int>(params.size());
      params.push_back(ParamInfo{static_cast<int>(l), t.numel, m, layer.name + "." + t.name});
      modules[static_cast<std::size_t>(m)].params.push_back(pi);
      layer_params[l].push_back(pi);
      psi += t.numel;
      largest_param = std::max(largest_param, t.numel);
    }
  }
  ckpt_ = CheckpointState(s, w, v016);
  graph.dp = n;
  graph.rank = rank;
  graph.micro_steps = g;
}

BufferId Builder::resident(std::string name, Device d, MemCategory c, std::int64_t bytes, bool pinned)
{
  if (bytes <= 0)
    return -1;
  const BufferId id = graph.add_buffer(Buffer{std::move(name), d, pinned, c, bytes, {}, false, false, {}, {}, false});
  graph.resident.push_back(id);
  return id;
}

BufferId Builder::transient(std::string name, Device d, MemCategory c, std::int64_t bytes, bool pinned)
{
  if (bytes <= 0)
    return -1;
  return graph.add_buffer(Buffer{std::move(name), d, pinned, c, bytes, {}, false, false, {}, {}, false});
}

BufferId Builder::scratch(TaskId t, std::string name, MemCategory c, std::int64_t bytes)
{
  const BufferId b = transient(std::move(name), Device::GPU, c, bytes);
  alloc_on(t, b);
  free_on(t, b);
  return b;
}

void Builder::torch_optimizer_state(BufferId b, const std::vector<std::int64_t>& param_elements)
{
  if (b < 0)
    return;
  Buffer& buf = graph.buffers[static_cast<std::size_t>(b)];
  buf.lazy = true;
  // One state tensor per parameter and state (Adam: exp_avg, exp_avg_sq; SGD with momentum: momentum_buffer).
  const int states = opt_state_bytes / 4;
  buf.tensors.clear();
  for (std::int64_t elements : param_elements)
    for (int k = 0; k < states; ++k)
      if (elements > 0)
        buf.tensors.push_back(4 * elements);
}

std::vector<std::int64_t> Builder::param_elements() const
{
  std::vector<std::int64_t> out;
  out.reserve(params.size());
  for (const ParamInfo& p : params)
    out.push_back(p.numel);
  return out;
}

void Builder::torch_optimizer_state(BufferId b)
{
  torch_optimizer_state(b, param_elements());
}

void Builder::tensors_of(BufferId b, const std::vector<std::int64_t>& tensors)
{
  if (b >= 0 && tensors.size() > 1)
    graph.buffers[static_cast<std::size_t>(b)].tensors = tensors;
}

void Builder::record_stream(BufferId b)
{
  if (b >= 0)
    graph.buffers[static_cast<std::size_t>(b)].record_stream = true;
}

void Builder::alloc_on(TaskId t, BufferId b)
{
  if (b >= 0)
    task(t).allocs.push_back(b);
}

void Builder::free_on(TaskId t, BufferId b)
{
  if (b >= 0)
    task(t).frees.push_back(b);
}

Task make_task(TaskKind kind, Phase ph, Stream st, std::string name, int mb)
{
  Task t;
  t.kind = kind;
  t.phase = ph;
  t.stream = st;
  t.name = std::move(name);
  t.micro_step = mb;
  return t;
}

TaskId Builder::add(Task t)
{
  const auto si = static_cast<std::size_t>(t.stream);
  t.host_barrier = barrier_;
  if (barrier_ >= 0 && !barrier_seen_[si]) {
    t.deps.push_back(barrier_);
    barrier_seen_[si] = true;
  }
  if (t.stream == Stream::COMPUTE && compute_wait_ >= 0) {
    t.deps.push_back(compute_wait_);
    compute_wait_ = -1;
  }
  std::sort(t.deps.begin(), t.deps.end());
  t.deps.erase(std::unique(t.deps.begin(), t.deps.end()), t.deps.end());
  t.deps.erase(std::remove(t.deps.begin(), t.deps.end(), TaskId{-1}), t.deps.end());
  const TaskId id = graph.add_task(std::move(t));
  last_on_stream_[si] = id;
  return id;
}

void Builder::host_wait(TaskId t)
{
  if (t < 0)
    return;
  barrier_ = t;
  barrier_seen_.fill(false);
}

void Builder::compute_waits_for(TaskId t)
{
  if (t >= 0)
    compute_wait_ = std::max(compute_wait_, t);
}

TaskId Builder::collective(std::string name, Phase ph, Stream st, CollectiveKind k, std::int64_t bytes, int mb,
                           std::vector<TaskId> deps, CommGroup group)
{
  Task t = make_task(TaskKind::COLLECTIVE, ph, st, std::move(name), mb);
  t.collective = k;
  t.bytes = bytes;
  if (group == CommGroup::WORLD && (tp > 1 || stages > 1))
    group = CommGroup::DATA_PARALLEL;
  t.group = group;
  t.group_size = group == CommGroup::INTRA_NODE   ? s.cluster.gpus_per_node
                 : group == CommGroup::INTER_NODE ? s.cluster.nodes
                 : group == CommGroup::TENSOR     ? tp
                 : group == CommGroup::EMBEDDING  ? 2
                                                  : n;
  t.deps = std::move(deps);
  return add(std::move(t));
}

TaskId Builder::copy(std::string name, Phase ph, Stream st, CopyDirection dir, std::int64_t bytes, bool pinned, int mb,
                     std::vector<TaskId> deps)
{
  Task t = make_task(TaskKind::COPY, ph, st, std::move(name), mb);
  t.direction = dir;
  t.bytes = bytes;
  t.pinned = pinned;
  t.deps = std::move(deps);
  return add(std::move(t));
}

/// The waves of requests of an aio transfer of `bytes` (docs/engine.md "NVMe"). DeepSpeed's aio handle
/// (csrc/aio/common/deepspeed_aio_common.cpp) splits a transfer over intra_op_parallelism threads, each cutting
/// its share into block_size requests and keeping at most queue_depth of them in flight; a wave of
/// block_size · queue_depth · threads bytes waits for the drive's request latency L once, so
///
///     waves = ceil(bytes / (block_size · queue_depth · intra_op_parallelism))
///     T     = waves · L  +  (the transfer: bytes over the RAID-0 stripe of every drive and its PCIe path)
///
/// with L the node's nvme.read_latency or nvme.write_latency (the engine's part). This is
/// do_aio_operation_sequential (submit a wave, reap it all) exactly; with overlap_events (the default) DeepSpeed
/// refills the queue as requests complete and can hide part of L behind other requests' data, so there it is an
/// upper bound.
std::int64_t aio_request_waves(const spec::AioSpec& aio, std::int64_t bytes)
{
  if (bytes <= 0)
    return 0;
  const double per_wave = static_cast<double>(std::max<std::int64_t>(1, aio.block_size)) *
                          std::max(1, aio.queue_depth) * std::max(1, aio.intra_op_parallelism);
  return static_cast<std::int64_t>(std::ceil(static_cast<double>(bytes) / per_wave));
}

TaskId Builder::nvme(std::string name, Phase ph, bool write, std::int64_t bytes, int mb, std::vector<TaskId> deps)
{
  Task t = make_task(write ? TaskKind::NVME_WRITE : TaskKind::NVME_READ, ph, Stream::NVME, std::move(name), mb);
  t.bytes = bytes;
  t.request_waves = aio_request_waves(s.deepspeed.aio, bytes);
  t.pinned = true;
  t.deps = std::move(deps);
  return add(std::move(t));
}

TaskId Builder::cpu_work(std::string name, Phase ph, std::int64_t elements, double mem_bytes, double flops,
                         std::vector<TaskId> deps)
{
  Task t = make_task(TaskKind::CPU_COMPUTE, ph, Stream::HOST, std::move(name));
  t.elements = elements;
  t.mem_bytes = mem_bytes;
  t.flops = flops;
  t.deps = std::move(deps);
  const TaskId id = add(std::move(t));
  host_wait(id); // host work runs on the Python thread: nothing is issued until it returns
  return id;
}

TaskId Builder::gpu_pass(std::string name, Phase ph, int mb, std::int64_t elements, double mem_bytes, double flops,
                         std::vector<TaskId> deps)
{
  Task t = make_task(TaskKind::COMPUTE, ph, Stream::COMPUTE, std::move(name), mb);
  t.elements = elements;
  t.mem_bytes = mem_bytes;
  t.flops = flops;
  t.deps = std::move(deps);
  return add(std::move(t));
}

TaskId Builder::sync(std::string name, int mb, std::vector<TaskId> deps, double host_seconds)
{
  Task t = make_task(TaskKind::SYNC, Phase::OTHER, Stream::HOST, std::move(name), mb);
  t.deps = std::move(deps);
  t.host_seconds = host_seconds;
  const TaskId id = add(std::move(t));
  host_wait(id);
  return id;
}

TaskId Builder::layer_compute(std::string name, Phase ph, int mb, int layer, std::vector<TaskId> deps, int op_begin,
                              int op_end)
{
  const workload::Layer& l = w.layers[static_cast<std::size_t>(layer)];
  Task t = make_task(TaskKind::COMPUTE, ph, Stream::COMPUTE, std::move(name), mb);
  t.layer = layer;
  const auto n_ops = static_cast<int>(l.ops.size());
  const int end = op_end < 0 ? n_ops : op_end;
  if (op_begin < 0 || end > n_ops || op_begin > end)
    throw core::InternalError("schedule: ops [" + std::to_string(op_begin) + ", " + std::to_string(end) +
                              ") of layer " + l.name + " with " + std::to_string(n_ops) + " ops");
  if (op_begin != 0 || end != n_ops) { // a part of the layer; the whole layer keeps [0, -1)
    t.op_begin = op_begin;
    t.op_end = end;
  }
  // Summed op by op in the order workload::make_layer sums the layer's totals (Layer::fwd_flops, bwd_flops,
  // recompute_flops): a whole layer's task carries exactly those, and compute_model's extra_task_bytes, which sums
  // the ops the same way, finds exactly 0 on a task the schedule attached no copies to.
  for (int i = op_begin; i < end; ++i) {
    const workload::Op& op = l.ops[static_cast<std::size_t>(i)];
    if (ph == Phase::FORWARD) {
      t.flops += op.fwd_flops;
      t.mem_bytes += op.fwd_bytes;
    } else if (ph == Phase::BACKWARD) {
      t.flops += op.bwd_flops;
      t.mem_bytes += op.bwd_bytes;
    } else if (op.recomputed) { // RECOMPUTE: the recomputed ops' forward FLOPs, no HBM bytes of its own
      t.flops += op.fwd_flops;
    }
  }
  t.deps = std::move(deps);
  return add(std::move(t));
}

TaskId Builder::forward(int mb, int layer, std::vector<TaskId> deps, const ComputeParts* parts)
{
  const workload::Layer& l = w.layers[static_cast<std::size_t>(layer)];
  const auto li = static_cast<std::size_t>(layer);
  const bool ck = ckpt_.on(layer);
  if (ck && !ckpt_.fwd_begun[li])
    checkpoint_forward_begin(mb, layer);
  ckpt_.fwd_begun[li] = 0;
  const std::string mbs = "mb" + std::to_string(mb);
  TaskId compute = -1; // the first compute task (allocations)
  TaskId last = -1;    // the last one (the working bytes' and the block input's release)
  if (parts == nullptr) {
    compute = layer_compute(mbs + ".fwd." + l.name, Phase::FORWARD, mb, layer, std::move(deps));
    last = compute;
  } else {
    for (std::size_t i = 0; i < parts->ranges.size(); ++i) {
      std::vector<TaskId> d = parts->before(i);
      if (i == 0)
        d.insert(d.end(), deps.begin(), deps.end());
      last = layer_compute(mbs + ".fwd." + l.name + "." + parts->names[i], Phase::FORWARD, mb, layer, std::move(d),
                           parts->ranges[i][0], parts->ranges[i][1]);
      if (i == 0)
        compute = last;
      parts->after(i, last);
    }
  }
  // The layer's tensor-parallel all-reduces run inside its forward (before checkpoint() returns): the layer ends
  // with the last of them. Its memory events stay on the compute task.
  const TaskId id = tensor_parallel_collectives(mb, layer, Phase::FORWARD, last);
  if (ck && (ckpt_.config.copy == DsCheckpointing::Copy::BLOCKING || ckpt_.config.contiguous)) {
    // The checkpoint is kept elsewhere (host memory or a contiguous slot): the GPU block input lives through
    // the forward, then get_partitioned_activations_for_backward / get_cpu_activations_for_backward empty it
    // (`arg.data = torch.empty([])`).
    BufferId input = ckpt_.input[li];
    ckpt_.input[li] = -1;
    if (input < 0) {
      input = transient(mbs + ".act." + l.name, Device::GPU, MemCategory::ACTIVATIONS, l.activation_bytes_kept);
      alloc_on(compute, input);
    }
    free_on(last, input);
    if (ckpt_.config.contiguous && ckpt_.config.copy != DsCheckpointing::Copy::BLOCKING) {
      // contiguous_data_buffers on the GPU: number_checkpoints slots allocated at the micro-step's first
      // checkpoint (partition_activations), each kept until its block's backward.
      if (ckpt_.slots_mb != mb) {
        ckpt_.slots_mb = mb;
        for (int cl : ckpt_.layers) {
          const workload::Layer& c = w.layers[static_cast<std::size_t>(cl)];
          act_kept(mb, static_cast<std::size_t>(cl)) = transient(mbs + ".ckpt_contiguous." + c.name, Device::GPU,
                                                                 MemCategory::ACTIVATIONS, c.activation_bytes_kept);
          alloc_on(compute, act_kept(mb, static_cast<std::size_t>(cl)));
        }
        ckpt_.unused_slots =
            transient(mbs + ".ckpt_contiguous.unused", Device::GPU, MemCategory::ACTIVATIONS,
                      (ckpt_.config.slots - static_cast<std::int64_t>(ckpt_.layers.size())) * l.activation_bytes_kept);
        alloc_on(compute, ckpt_.unused_slots);
      }
    } else {
      act_kept(mb, li) = -1;
    }
  } else {
    const BufferId kept =
        transient(mbs + ".act." + l.name, Device::GPU, MemCategory::ACTIVATIONS, l.activation_bytes_kept);
    tensors_of(kept, l.kept_tensors);
    alloc_on(compute, kept);
    act_kept(mb, li) = kept;
  }
  const BufferId work = transient(mbs + ".fwd_working." + l.name, Device::GPU, MemCategory::ACTIVATIONS,
                                  l.activation_bytes_forward_working);
  tensors_of(work, l.forward_working_tensors);
  // The caching allocator sees the forward op by op (docs/memory.md §2.1): the kept buffer carries the trace of
  // every request, its transients among them, and the working set's own requests are skipped.
  if (s.mechanisms.allocation_order && act_kept(mb, li) >= 0 && l.activation_bytes_kept > 0 &&
      !l.forward_trace.empty() &&
      !(ck && (ckpt_.config.copy == DsCheckpointing::Copy::BLOCKING || ckpt_.config.contiguous))) {
    spec::Buffer& kb = graph.buffers[static_cast<std::size_t>(act_kept(mb, li))];
    kb.trace_bytes = l.forward_trace_bytes;
    kb.trace = l.forward_trace;
    graph.buffers[static_cast<std::size_t>(work)].in_trace = true;
  }
  alloc_on(compute, work);
  free_on(last, work);
  if (!ck)
    return id;
  if (ckpt_.config.copy == DsCheckpointing::Copy::ASYNC) {
    // get_offloaded_activations_for_backward -> engine.offload_input(arg): register the block input; the
    // oldest beyond keep_last_count starts its D2H (offload_activations.py _flush_keep_last).
    const int newest = ckpt_.next_id++;
    ckpt_.keep.emplace_back(newest, layer);
    while (static_cast<int>(ckpt_.keep.size()) > ACT_OFFLOAD_KEEP_LAST) {
      const std::pair<int, int> oldest = ckpt_.keep.front();
      ckpt_.keep.erase(ckpt_.keep.begin());
      ckpt_offload(mb, oldest.second, oldest.first, newest);
    }
  }
  // CheckpointFunction.forward's end: timers.log reads the CUDA-event timer (CudaEventTimer.get_elapsed_msec:
  // end_event.synchronize(), a host wait on the compute stream), then synchronize_checkpoint_boundary.
  if (ckpt_.config.profile)
    sync(mbs + ".ckpt_profile.fwd." + l.name, mb, {id});
  if (ckpt_.config.synchronize)
    device_synchronize(mbs + ".ckpt_synchronize.fwd_end." + l.name, mb);
  return id;
}

std::array<TaskId, 2> Builder::backward(int mb, int layer, std::vector<TaskId> deps, const ComputeParts* parts)
{
  const workload::Layer& l = w.layers[static_cast<std::size_t>(layer)];
  const auto li = static_cast<std::size_t>(layer);
  if (ckpt_.on(layer)) {
    if (!ckpt_.bwd_begun[li])
      checkpoint_backward_begin(mb, layer);
    ckpt_.bwd_begun[li] = 0;
    deps.insert(deps.end(), ckpt_.pending_deps.begin(), ckpt_.pending_deps.end());
    ckpt_.pending_deps.clear();
  }
  const std::string mbs = "mb" + std::to_string(mb);
  const BufferId work = transient(mbs + ".bwd_working." + l.name, Device::GPU, MemCategory::ACTIVATIONS,
                                  l.activation_bytes_backward_working);
  tensors_of(work, l.backward_working_tensors);
  TaskId first = -1;
  if (s.training.activation_checkpointing != spec::Checkpointing::NONE && l.recompute_flops > 0) {
    first = layer_compute(mbs + ".recompute." + l.name, Phase::RECOMPUTE, mb, layer, deps);
    alloc_on(first, work);
    tensor_parallel_collectives(mb, layer, Phase::RECOMPUTE, first);
    if (parts != nullptr && parts->after_recompute)
      parts->after_recompute(first);
  }
  TaskId id = -1;
  if (parts == nullptr) {
    id = layer_compute(mbs + ".bwd." + l.name, Phase::BACKWARD, mb, layer, std::move(deps));
  } else {
    for (std::size_t i = 0; i < parts->ranges.size(); ++i) {
      std::vector<TaskId> d = parts->before(i);
      if (i == 0)
        d.insert(d.end(), deps.begin(), deps.end()); // the recompute's, or the restored checkpoint's
      const TaskId part = layer_compute(mbs + ".bwd." + l.name + "." + parts->names[i], Phase::BACKWARD, mb, layer,
                                        std::move(d), parts->ranges[i][0], parts->ranges[i][1]);
      if (first < 0) {
        first = part;
        alloc_on(part, work);
      }
      parts->after(i, part);
      id = part;
    }
  }
  if (first < 0) {
    first = id;
    alloc_on(id, work);
  }
  free_on(id, work);
  free_on(id, act_kept(mb, li));
  act_kept(mb, li) = -1;
  for (BufferId b : ckpt_.pending_frees)
    free_on(first, b);
  ckpt_.pending_frees.clear();
  return {first, tensor_parallel_collectives(mb, layer, Phase::BACKWARD, id)};
}

TaskId Builder::tensor_parallel_collectives(int mb, int layer, Phase ph, TaskId after)
{
  if (tp == 1)
    return after;
  const workload::Layer& l = w.layers[static_cast<std::size_t>(layer)];
  const std::int64_t tokens = s.training.tokens_per_micro_batch();
  const std::int64_t hidden_bytes = tokens * s.model.hidden * b_act;
  // docs/tensor-parallel.md §3 (Megatron-LM core/tensor_parallel/{layers,mappings,cross_entropy}.py):
  // a block's forward (and its recompute) all-reduces the row-parallel outputs of attention and MLP, its backward
  // the input gradients of the column-parallel QKV and MLP-up layers; the vocab-parallel embedding all-reduces its
  // output; the LM head's backward its input gradient; the vocab-parallel cross entropy three fp32 values per token
  // (the logits' max, the sum of exponentials, the target logit).
  std::vector<std::pair<std::string, std::int64_t>> reduces;
  switch (l.kind) {
  case workload::LayerKind::BLOCK:
    // Only full checkpointing re-runs the row-parallel layers; selective recomputes the attention core alone.
    if (ph == Phase::FORWARD || ph == Phase::BACKWARD ||
        (ph == Phase::RECOMPUTE && s.training.activation_checkpointing == spec::Checkpointing::FULL)) {
      const char* what = ph == Phase::BACKWARD ? "dgrad" : "out";
      reduces = {{std::string("attn.") + what, hidden_bytes}, {std::string("mlp.") + what, hidden_bytes}};
    }
    break;
  case workload::LayerKind::EMBEDDING:
    if (ph == Phase::FORWARD)
      reduces = {{"out", hidden_bytes}};
    break;
  case workload::LayerKind::LM_HEAD:
    if (ph == Phase::FORWARD)
      reduces = {{"loss.max", tokens * 4}, {"loss.sum_exp", tokens * 4}, {"loss.target", tokens * 4}};
    else if (ph == Phase::BACKWARD)
      reduces = {{"dgrad", hidden_bytes}};
    break;
  case workload::LayerKind::FINAL_NORM:
    break;
  }
  const char* phase = ph == Phase::FORWARD ? "fwd" : ph == Phase::RECOMPUTE ? "recompute" : "bwd";
  TaskId last = after;
  for (const auto& [what, bytes] : reduces)
    last = collective("mb" + std::to_string(mb) + ".tp_allreduce." + phase + "." + l.name + "." + what, ph,
                      Stream::COMPUTE, CollectiveKind::ALL_REDUCE, bytes, mb, {last}, CommGroup::TENSOR);
  return last;
}

TaskId Builder::gpu_optimizer(std::string name, std::int64_t elements, double extra_bytes_per_elem,
                              std::vector<TaskId> deps)
{
  return gpu_pass(std::move(name), Phase::OPTIMIZER, -1, elements,
                  static_cast<double>(elements) * (opt_bytes_per_elem + extra_bytes_per_elem),
                  static_cast<double>(elements) * opt_flops_per_elem, std::move(deps));
}

TaskId Builder::torch_optimizer(std::string name, std::int64_t elements, std::int64_t largest_tensor,
                                const std::vector<std::int64_t>& tensors, std::vector<TaskId> deps)
{
  const bool sgd = s.training.optimizer == spec::Optimizer::SGD;
  // training.optimizer_impl; auto: torch's CUDA default for the stack's version (docs/ddp.md "Optimizer").
  spec::OptimizerImpl impl = s.training.optimizer_impl;
  if (impl == spec::OptimizerImpl::AUTO)
    impl = spec::torch_generation(s.priced_software().torch).value_or(0) >= TORCH_FOREACH_DEFAULT_GENERATION
               ? spec::OptimizerImpl::FOREACH
               : spec::OptimizerImpl::SINGLE_TENSOR;
  const bool foreach = impl == spec::OptimizerImpl::FOREACH, fused = impl == spec::OptimizerImpl::FUSED;
  const double bytes_per_elem = sgd       ? TORCH_SGD_FOREACH_BYTES_PER_ELEM
                                : fused   ? TORCH_ADAMW_FUSED_BYTES_PER_ELEM
                                : foreach ? TORCH_ADAMW_FOREACH_BYTES_PER_ELEM
                                          : TORCH_ADAMW_SINGLE_BYTES_PER_ELEM;
  const TaskId id = gpu_pass(name, Phase::OPTIMIZER, -1, elements, static_cast<double>(elements) * bytes_per_elem,
                             static_cast<double>(elements) * opt_flops_per_elem, std::move(deps));
  const auto launches = static_cast<int>(std::ceil(static_cast<double>(elements) / MULTI_TENSOR_ELEMS_PER_LAUNCH));
  task(id).kernels =
      std::max(1, !foreach && !fused && !sgd ? TORCH_ADAMW_SINGLE_KERNELS_PER_TENSOR * static_cast<int>(params.size())
                                             : (foreach && !sgd ? TORCH_ADAMW_FOREACH_OPS : 1) * launches);
  if (foreach && !sgd) // one new tensor per parameter (`torch._foreach_sqrt`): the allocator's requests
    tensors_of(scratch(id, name + ".foreach_sqrt", MemCategory::BUFFERS,
                       static_cast<std::int64_t>(elements * TORCH_ADAMW_FOREACH_TEMP_BYTES_PER_ELEM)),
               tensors);
  else if (!sgd && !fused)
    scratch(id, name + ".sqrt", MemCategory::BUFFERS,
            static_cast<std::int64_t>(std::min(largest_tensor, elements) * TORCH_ADAMW_SINGLE_TEMP_BYTES_PER_ELEM));
  return id;
}

TaskId Builder::cpu_optimizer(std::string name, std::int64_t elements, std::vector<TaskId> deps)
{
  // Adam's DRAM traffic is the node's (cpu.adam_bytes_per_param; unset: DeepSpeedCPUAdam's 28 B/elem, §9.1).
  const double node_adam = s.cluster.node.cpu.adam_bytes_per_param;
  const double bytes_per_elem = s.training.optimizer == spec::Optimizer::SGD ? opt_bytes_per_elem
                                : node_adam > 0                              ? node_adam
                                                                             : ADAM_BYTES_PER_ELEM;
  return cpu_work(std::move(name), Phase::OPTIMIZER, elements, static_cast<double>(elements) * bytes_per_elem,
                  static_cast<double>(elements) * opt_flops_per_elem, std::move(deps));
}

TaskId Builder::step_scalars(bool overflow)
{
  TaskId last = -1;
  // With tensor parallelism (an mpu), each scalar is all-reduced over the data-parallel group, then over the
  // model-parallel one (DeepSpeed's _model_parallel_all_reduce; docs/tensor-parallel.md §3).
  if (overflow) { // overflow flag: AR(1 byte) MAX (§3.5 step 1, §5.7 step 2)
    last = collective("step.overflow_check", Phase::OPTIMIZER, Stream::COMPUTE, CollectiveKind::ALL_REDUCE, 1, -1);
    last = model_parallel_scalar("step.overflow_check.tp", 1, last);
  }
  // global grad norm: AR(1 float) SUM; its .item() makes the host wait (§3.5 step 2, §5.7 step 2)
  last = collective("step.grad_norm", Phase::OPTIMIZER, Stream::COMPUTE, CollectiveKind::ALL_REDUCE, 4, -1);
  last = model_parallel_scalar("step.grad_norm.tp", 4, last);
  host_wait(last);
  return last;
}

TaskId Builder::model_parallel_scalar(std::string name, std::int64_t bytes, TaskId after)
{
  if (tp == 1)
    return after;
  return collective(std::move(name), Phase::OPTIMIZER, Stream::COMPUTE, CollectiveKind::ALL_REDUCE, bytes, -1,
                    after < 0 ? std::vector<TaskId>{} : std::vector<TaskId>{after}, CommGroup::TENSOR);
}

std::int64_t Builder::layer_numel(int layer) const
{
  std::int64_t e = 0;
  for (int p : layer_params[static_cast<std::size_t>(layer)])
    e += params[static_cast<std::size_t>(p)].numel;
  return e;
}

std::int64_t Builder::autocast_numel(int layer) const
{
  const workload::Layer& l = w.layers[static_cast<std::size_t>(layer)];
  std::int64_t e = 0;
  for (const workload::ParamTensor& t : l.params) {
    const bool norm = t.module.size() >= 4 && t.module.compare(t.module.size() - 4, 4, "norm") == 0;
    if (!norm && t.module.rfind("embed.", 0) != 0)
      e += t.numel;
  }
  if (l.kind == workload::LayerKind::LM_HEAD && s.model.tied_embeddings)
    for (const workload::Layer& other : w.layers)
      if (other.kind == workload::LayerKind::EMBEDDING)
        for (const workload::ParamTensor& t : other.params)
          if (t.module == "embed.tokens")
            e += t.numel;
  return e;
}

void check_rank(const spec::Scenario& s, int rank, const std::string& where)
{
  if (s.world() < 1)
    throw core::InputError(where + ": cluster: no GPU (nodes x gpus_per_node = " + std::to_string(s.world()) + ")");
  if (rank < 0 || rank >= s.world())
    throw core::InputError(where + ": rank " + std::to_string(rank) + " outside 0.." + std::to_string(s.world() - 1));
}

void check_deepspeed_precision_and_stage(const spec::Scenario& s, const std::string& where, const std::string& amp_hint)
{
  const spec::Precision p = s.training.precision;
  if (p == spec::Precision::AMP_BF16 || p == spec::Precision::AMP_FP16)
    throw core::UnsupportedError(where +
                                 ": training.precision amp_*: PyTorch autocast with DeepSpeed is not "
                                 "modelled (use bf16, fp16 or fp32" +
                                 amp_hint + ")");
  const int stage = s.deepspeed.zero.stage;
  if (stage < 0 || stage > 3)
    throw core::InputError(where + ": deepspeed.zero_optimization.stage: expected 0, 1, 2 or 3, found " +
                           std::to_string(stage));
}

} // namespace zerosim::schedule::detail
