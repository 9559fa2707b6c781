#include "schedule/schedule_builder.hpp"

#include "core/error.hpp"

#include <algorithm>
#include <unordered_map>
#include <utility>

namespace zerosim::schedule::detail {

Builder::Builder(const spec::Scenario& scen, const workload::Workload& work, int r) : s(scen), w(work), rank(r)
{
  n = s.dp();
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
  for (std::size_t l = 0; l < w.layers.size(); ++l) {
    const workload::Layer& layer = w.layers[l];
    std::unordered_map<std::string, int> module_of;
    for (const workload::ParamTensor& t : layer.params) {
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
  act_kept_.assign(w.layers.size(), -1);
  bwd_working_.assign(w.layers.size(), -1);
  graph.dp = n;
  graph.rank = rank;
  graph.micro_steps = g;
}

BufferId Builder::resident(std::string name, Device d, MemCategory c, std::int64_t bytes, bool pinned)
{
  if (bytes <= 0)
    return -1;
  const BufferId id = graph.add_buffer(Buffer{std::move(name), d, pinned, c, bytes});
  graph.resident.push_back(id);
  return id;
}

BufferId Builder::transient(std::string name, Device d, MemCategory c, std::int64_t bytes, bool pinned)
{
  if (bytes <= 0)
    return -1;
  return graph.add_buffer(Buffer{std::move(name), d, pinned, c, bytes});
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
  return graph.add_task(std::move(t));
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
  Task t;
  t.kind = TaskKind::COLLECTIVE;
  t.phase = ph;
  t.stream = st;
  t.name = std::move(name);
  t.micro_step = mb;
  t.collective = k;
  t.bytes = bytes;
  t.group = group;
  t.group_size = group == CommGroup::INTRA_NODE   ? s.cluster.gpus_per_node
                 : group == CommGroup::INTER_NODE ? s.cluster.nodes
                                                  : n;
  t.deps = std::move(deps);
  return add(std::move(t));
}

TaskId Builder::copy(std::string name, Phase ph, Stream st, CopyDirection dir, std::int64_t bytes, bool pinned, int mb,
                     std::vector<TaskId> deps)
{
  Task t;
  t.kind = TaskKind::COPY;
  t.phase = ph;
  t.stream = st;
  t.name = std::move(name);
  t.micro_step = mb;
  t.direction = dir;
  t.bytes = bytes;
  t.pinned = pinned;
  t.deps = std::move(deps);
  return add(std::move(t));
}

TaskId Builder::nvme(std::string name, Phase ph, bool write, std::int64_t bytes, int mb, std::vector<TaskId> deps)
{
  Task t;
  t.kind = write ? TaskKind::NVME_WRITE : TaskKind::NVME_READ;
  t.phase = ph;
  t.stream = Stream::NVME;
  t.name = std::move(name);
  t.micro_step = mb;
  t.bytes = bytes;
  t.pinned = true;
  t.deps = std::move(deps);
  return add(std::move(t));
}

TaskId Builder::cpu_work(std::string name, Phase ph, std::int64_t elements, double mem_bytes, double flops,
                         std::vector<TaskId> deps)
{
  Task t;
  t.kind = TaskKind::CPU_COMPUTE;
  t.phase = ph;
  t.stream = Stream::HOST;
  t.name = std::move(name);
  t.elements = elements;
  t.mem_bytes = mem_bytes;
  t.flops = flops;
  t.deps = std::move(deps);
  const TaskId id = add(std::move(t));
  host_wait(id); // host work runs on the Python thread: nothing is issued until it returns
  return id;
}

TaskId Builder::sync(std::string name, int mb, std::vector<TaskId> deps)
{
  Task t;
  t.kind = TaskKind::SYNC;
  t.phase = Phase::OTHER;
  t.stream = Stream::HOST;
  t.name = std::move(name);
  t.micro_step = mb;
  t.deps = std::move(deps);
  const TaskId id = add(std::move(t));
  host_wait(id);
  return id;
}

TaskId Builder::forward(int mb, int layer, std::vector<TaskId> deps)
{
  const workload::Layer& l = w.layers[static_cast<std::size_t>(layer)];
  Task t;
  t.kind = TaskKind::COMPUTE;
  t.phase = Phase::FORWARD;
  t.stream = Stream::COMPUTE;
  t.name = "mb" + std::to_string(mb) + ".fwd." + l.name;
  t.micro_step = mb;
  t.layer = layer;
  t.flops = l.fwd_flops;
  for (const workload::Op& op : l.ops)
    t.mem_bytes += op.fwd_bytes;
  t.deps = std::move(deps);
  const TaskId id = add(std::move(t));
  const BufferId kept = transient("mb" + std::to_string(mb) + ".act." + l.name, Device::GPU, MemCategory::ACTIVATIONS,
                                  l.activation_bytes_kept);
  alloc_on(id, kept);
  act_kept_[static_cast<std::size_t>(layer)] = kept;
  const BufferId work = transient("mb" + std::to_string(mb) + ".fwd_working." + l.name, Device::GPU,
                                  MemCategory::ACTIVATIONS, l.activation_bytes_forward_working);
  alloc_on(id, work);
  free_on(id, work);
  return id;
}

std::array<TaskId, 2> Builder::backward(int mb, int layer, std::vector<TaskId> deps)
{
  const workload::Layer& l = w.layers[static_cast<std::size_t>(layer)];
  const std::string mbs = "mb" + std::to_string(mb);
  const BufferId work = transient(mbs + ".bwd_working." + l.name, Device::GPU, MemCategory::ACTIVATIONS,
                                  l.activation_bytes_backward_working);
  TaskId first = -1;
  if (s.training.activation_checkpointing != spec::Checkpointing::NONE && l.recompute_flops > 0) {
    Task r;
    r.kind = TaskKind::COMPUTE;
    r.phase = Phase::RECOMPUTE;
    r.stream = Stream::COMPUTE;
    r.name = mbs + ".recompute." + l.name;
    r.micro_step = mb;
    r.layer = layer;
    r.flops = l.recompute_flops;
    r.deps = deps;
    first = add(std::move(r));
    alloc_on(first, work);
  }
  Task t;
  t.kind = TaskKind::COMPUTE;
  t.phase = Phase::BACKWARD;
  t.stream = Stream::COMPUTE;
  t.name = mbs + ".bwd." + l.name;
  t.micro_step = mb;
  t.layer = layer;
  t.flops = l.bwd_flops;
  for (const workload::Op& op : l.ops)
    t.mem_bytes += op.bwd_bytes;
  t.deps = std::move(deps);
  const TaskId id = add(std::move(t));
  if (first < 0) {
    first = id;
    alloc_on(id, work);
  }
  free_on(id, work);
  free_on(id, act_kept_[static_cast<std::size_t>(layer)]);
  act_kept_[static_cast<std::size_t>(layer)] = -1;
  return {first, id};
}

TaskId Builder::gpu_optimizer(std::string name, std::int64_t elements, double extra_bytes_per_elem,
                              std::vector<TaskId> deps)
{
  Task t;
  t.kind = TaskKind::COMPUTE;
  t.phase = Phase::OPTIMIZER;
  t.stream = Stream::COMPUTE;
  t.name = std::move(name);
  t.elements = elements;
  t.mem_bytes = static_cast<double>(elements) * (opt_bytes_per_elem + extra_bytes_per_elem);
  t.flops = static_cast<double>(elements) * opt_flops_per_elem;
  t.deps = std::move(deps);
  return add(std::move(t));
}

TaskId Builder::torch_optimizer(std::string name, std::int64_t elements, std::vector<TaskId> deps)
{
  const bool sgd = s.training.optimizer == spec::Optimizer::SGD;
  Task t;
  t.kind = TaskKind::COMPUTE;
  t.phase = Phase::OPTIMIZER;
  t.stream = Stream::COMPUTE;
  t.name = name;
  t.elements = elements;
  t.mem_bytes =
      static_cast<double>(elements) * (sgd ? TORCH_SGD_FOREACH_BYTES_PER_ELEM : TORCH_ADAMW_FOREACH_BYTES_PER_ELEM);
  t.flops = static_cast<double>(elements) * opt_flops_per_elem;
  t.deps = std::move(deps);
  const TaskId id = add(std::move(t));
  if (!sgd) {
    const BufferId tmp = transient(name + ".foreach_sqrt", Device::GPU, MemCategory::BUFFERS,
                                   static_cast<std::int64_t>(elements * TORCH_ADAMW_FOREACH_TEMP_BYTES_PER_ELEM));
    alloc_on(id, tmp);
    free_on(id, tmp);
  }
  return id;
}

TaskId Builder::cpu_optimizer(std::string name, std::int64_t elements, std::vector<TaskId> deps)
{
  return cpu_work(std::move(name), Phase::OPTIMIZER, elements, static_cast<double>(elements) * opt_bytes_per_elem,
                  static_cast<double>(elements) * opt_flops_per_elem, std::move(deps));
}

TaskId Builder::step_scalars(bool overflow)
{
  TaskId last = -1;
  if (overflow) // overflow flag: AR(1 byte) MAX (§3.5 step 1, §5.7 step 2)
    last = collective("step.overflow_check", Phase::OPTIMIZER, Stream::COMPUTE, CollectiveKind::ALL_REDUCE, 1, -1);
  // global grad norm: AR(1 float) SUM; its .item() makes the host wait (§3.5 step 2, §5.7 step 2)
  last = collective("step.grad_norm", Phase::OPTIMIZER, Stream::COMPUTE, CollectiveKind::ALL_REDUCE, 4, -1);
  host_wait(last);
  return last;
}

std::int64_t Builder::layer_numel(int layer) const
{
  std::int64_t e = 0;
  for (int p : layer_params[static_cast<std::size_t>(layer)])
    e += params[static_cast<std::size_t>(p)].numel;
  return e;
}

} // namespace zerosim::schedule::detail
