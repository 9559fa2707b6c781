// PyTorch DistributedDataParallel with torch.optim and, for amp_*, torch.autocast / GradScaler (docs/ddp.md).
// The Reducer (torch/csrc/distributed/c10d/reducer.cpp) is cited by function name; dp = 1 is the plain
// single-GPU loop without the DDP wrapper.
#include "schedule/schedule_builder.hpp"

#include "core/error.hpp"

#include <algorithm>
#include <limits>
#include <string>
#include <vector>

namespace zerosim::schedule::detail {

namespace {

/// bucket_cap_mb is in MiB: `bucket_bytes_cap = int(bucket_cap_mb * 1024 * 1024)` (distributed.py).
constexpr double MIB = 1024.0 * 1024.0;
/// `_amp_foreach_non_finite_check_and_unscale_` (grad_scaler.py `_unscale_grads_`): read and write every
/// fp32 gradient.
constexpr double UNSCALE_BYTES_PER_ELEM = 8;
/// One multiply and one finite test per element: a stated estimate.
constexpr double UNSCALE_FLOPS_PER_ELEM = 2;
/// GradScaler's state: the fp32 `_scale` and the int32 `_growth_tracker` (grad_scaler.py).
constexpr std::int64_t GRAD_SCALER_STATE_BYTES = 8;
/// `local_used_map_`: one int32 per parameter tensor (reducer.cpp `initialize_local_used_map`).
constexpr std::int64_t USED_MAP_BYTES_PER_TENSOR = 4;

/// A cap in bytes; caps beyond 2^62 bytes (any model's size) are all "no limit" and avoid an overflowing cast.
std::int64_t cap_bytes(double mib)
{
  const double bytes = mib * MIB;
  constexpr double NO_LIMIT = 4.611686018427387904e18; // 2^62
  return bytes >= NO_LIMIT ? static_cast<std::int64_t>(NO_LIMIT) : static_cast<std::int64_t>(bytes);
}

struct DdpBucket {
  std::vector<int> params; ///< indices into Builder::params, in assignment order
  std::int64_t bytes = 0;
  int launch_layer = -1; ///< the layer after whose backward the bucket is all-reduced
};

/// `compute_bucket_assignment_by_size`: append tensors in `order`; a bucket closes once its size is >= the
/// current limit, which is `first` for the first bucket closed and `cap` afterwards; the rest is the last one.
std::vector<DdpBucket> assign_buckets(const Builder& b, const std::vector<int>& order, std::int64_t first,
                                      std::int64_t cap, int elem_bytes)
{
  std::vector<DdpBucket> out;
  DdpBucket cur;
  std::int64_t limit = first;
  for (int pi : order) {
    cur.params.push_back(pi);
    cur.bytes += b.params[static_cast<std::size_t>(pi)].numel * elem_bytes;
    if (cur.bytes >= limit) {
      out.push_back(std::move(cur));
      cur = DdpBucket{};
      limit = cap;
    }
  }
  if (!cur.params.empty())
    out.push_back(std::move(cur));
  return out;
}

/// A copy of gradients into or out of a bucket on the compute stream (mark_variable_ready_dense, copy_bucket_to_grad).
Task grad_reduce_copy(std::string name, int mb, int layer, std::int64_t elements, int elem_bytes)
{
  Task t = make_task(TaskKind::COMPUTE, Phase::GRAD_REDUCE, Stream::COMPUTE, std::move(name), mb);
  t.layer = layer;
  t.elements = elements;
  t.mem_bytes = 2.0 * static_cast<double>(elements * elem_bytes); // read one, write one
  return t;
}

/// A pass of the step over `elements`: `bytes_per_elem` of traffic and `flops_per_elem` of arithmetic each.
TaskId step_pass(Builder& b, std::string name, std::int64_t elements, double bytes_per_elem, double flops_per_elem)
{
  return b.gpu_pass(std::move(name), Phase::OPTIMIZER, -1, elements, static_cast<double>(elements) * bytes_per_elem,
                    static_cast<double>(elements) * flops_per_elem);
}

} // namespace

namespace {

/// DDP's gradient buckets (reducer.cpp compute_bucket_assignment_by_size, rebuild_buckets; distributed.py
/// _ddp_init_helper) with the layer after whose backward each is all-reduced, and each bucket's flat `gradients`
/// tensor as a resident buffer.
std::vector<DdpBucket> ddp_buckets(Builder& b, const spec::DdpSpec& d, int nl, int bp, bool find_unused, bool view)
{
  std::vector<DdpBucket> buckets;
  const std::int64_t cap = cap_bytes(d.bucket_cap_mb);
  const std::int64_t first = cap_bytes(d.first_bucket_cap_mb);
  std::vector<int> ready; // gradient-ready order: layers in reverse, tensors in reverse inside a layer
  for (int l = nl - 1; l >= 0; --l) {
    const auto& lp = b.layer_params[static_cast<std::size_t>(l)];
    ready.insert(ready.end(), lp.rbegin(), lp.rend());
  }
  if (find_unused) {
    // No rebuild: the construction-time buckets, forward order with [first, cap], reversed.
    std::vector<int> fwd(b.params.size());
    for (std::size_t i = 0; i < fwd.size(); ++i)
      fwd[i] = static_cast<int>(i);
    buckets = assign_buckets(b, fwd, first, cap, bp);
    std::reverse(buckets.begin(), buckets.end());
  } else if (b.first_step) {
    // The first iteration runs on the construction-time assignment, limits [sys.maxsize]: one bucket.
    const std::int64_t all = std::numeric_limits<std::int64_t>::max();
    buckets = assign_buckets(b, ready, all, all, bp);
  } else {
    buckets = assign_buckets(b, ready, first, cap, bp); // rebuilt in gradient-ready order
  }
  // A bucket is complete once its lowest layer's backward is done; buckets launch strictly in order.
  int prev = nl;
  for (DdpBucket& bk : buckets) {
    int low = nl;
    for (int pi : bk.params)
      low = std::min(low, b.params[static_cast<std::size_t>(pi)].layer);
    bk.launch_layer = std::min(low, prev);
    prev = bk.launch_layer;
  }
  // Each bucket's flat `gradients` tensor (initialize_buckets), alive across steps; with
  // gradient_as_bucket_view it is where param.grad lives.
  for (std::size_t i = 0; i < buckets.size(); ++i)
    b.resident("ddp_bucket." + std::to_string(i), Device::GPU, view ? MemCategory::GRADS : MemCategory::BUFFERS,
               buckets[i].bytes);
  return buckets;
}

/// The step. bf16/fp16: the 16-bit grads cast into fp32 for the master; fp16 / amp_fp16: the scaler's unscale and
/// inf check, whose .item() the host waits for (GradScaler._maybe_opt_step); torch.optim over Ψ fp32 elements;
/// the gradients freed by zero_grad(set_to_none=True).
void ddp_step(Builder& b, std::int64_t psi, int bp, bool lowp, bool scaler, const std::vector<BufferId>& grads)
{
  BufferId fp32_grads = -1;
  if (lowp) {
    const TaskId cast = step_pass(b, "step.grads_to_fp32", psi, bp + 4.0, 0);
    fp32_grads = b.transient("step.fp32_grads", Device::GPU, MemCategory::BUFFERS, psi * 4);
    b.alloc_on(cast, fp32_grads);
  }
  if (scaler)
    b.host_wait(step_pass(b, "step.grad_scaler.unscale", psi, UNSCALE_BYTES_PER_ELEM, UNSCALE_FLOPS_PER_ELEM));
  std::int64_t largest = 0; // every parameter whole: the largest is the single-tensor step's temporary
  for (const ParamInfo& pi : b.params)
    largest = std::max(largest, pi.numel);
  const TaskId opt = b.torch_optimizer("step.optimizer", psi, largest, b.param_elements());
  b.free_on(opt, fp32_grads);
  for (BufferId gb : grads)
    b.free_on(opt, gb); // zero_grad(set_to_none=True)
  if (lowp)
    step_pass(b, "step.master_to_params", psi, 4.0 + bp, 0);
}

} // namespace

namespace {

/// DDP's step as units: the reducer's buckets are assigned at construction (model states in the prologue), the
/// autocast casts a micro-step's forward saves are held for its backward, the hooks launch the buckets' all-reduces
/// in the backward of every synchronised micro-step, and the optimizer follows the last (ddp_step).
class Ddp : public StepUnits {
public:
  explicit Ddp(Builder& builder)
      : b(builder), d(builder.s.ddp), nl(static_cast<int>(builder.w.layers.size())), g(builder.g),
        ddp(builder.n > 1),  // dp = 1: the plain single-GPU loop, no DDP wrapper (docs/ddp.md)
        bp(builder.b_lp),    // param and gradient dtype: 4 (amp_*, fp32) or 2 (bf16, fp16)
        lowp(builder.mixed), // bf16 / fp16: 16-bit model, fp32 master (zerosim's reading, docs/ddp.md)
        scaler(builder.fp16 || builder.amp_fp16), view(ddp && d.gradient_as_bucket_view),
        // reducer.cpp dynamic_graph_find_unused(): find_unused_parameters without static_graph.
        find_unused(ddp && d.find_unused_parameters && !d.static_graph),
        full_ckpt(builder.s.training.activation_checkpointing == spec::Checkpointing::FULL),
        // The first micro-step whose backward is synchronised: the last one under no_sync, else the first.
        first_synced(d.no_sync ? g - 1 : 0)
  {
    const std::string where = scenario_label(b.s);
    if (!(d.bucket_cap_mb > 0) || !(d.first_bucket_cap_mb > 0))
      throw core::InputError(where +
                             ": ddp.bucket_cap_mb and ddp.first_bucket_cap_mb: expected positive numbers (MiB)");
  }

  void prologue() override
  {
    const std::int64_t psi = b.psi;
    // Model states (docs/ddp.md "Memory").
    b.resident("params", Device::GPU, MemCategory::PARAMS, psi * bp);
    if (lowp)
      b.resident("fp32_master", Device::GPU, MemCategory::OPTIMIZER, psi * 4);
    // torch.optim's state, per parameter
    b.torch_optimizer_state(
        b.resident("optimizer_states", Device::GPU, MemCategory::OPTIMIZER, psi * b.opt_state_bytes));
    if (scaler)
      b.resident("grad_scaler.state", Device::GPU, MemCategory::OTHER, GRAD_SCALER_STATE_BYTES);

    // Buckets (reducer.cpp compute_bucket_assignment_by_size, rebuild_buckets; distributed.py _ddp_init_helper).
    if (ddp)
      buckets = ddp_buckets(b, d, nl, bp, find_unused, view);
    launched_at.assign(static_cast<std::size_t>(nl), {});
    for (std::size_t i = 0; i < buckets.size(); ++i)
      launched_at[static_cast<std::size_t>(buckets[i].launch_layer)].push_back(static_cast<int>(i));

    cast_numel.assign(static_cast<std::size_t>(nl), 0);
    if (b.amp)
      for (int l = 0; l < nl; ++l)
        cast_numel[static_cast<std::size_t>(l)] = b.autocast_numel(l);

    // param.grad held as its own tensor: from its first backward to zero_grad after the step (no view), or
    // until the synchronised micro-step repoints it into the bucket (view, under no_sync).
    grads.assign(static_cast<std::size_t>(nl), -1);
    casts.assign(static_cast<std::size_t>(g), {});
    recast.assign(static_cast<std::size_t>(g), {});
  }

  void forward(int mb, int /*chunk*/) override
  {
    const std::string mbs = "mb" + std::to_string(mb);
    // Forward under autocast: each layer's 16-bit weight casts, cached for the autocast region and saved
    // for the backward (docs/ddp.md "Autocast").
    std::vector<BufferId>& cast = casts[static_cast<std::size_t>(mb)];
    cast.assign(static_cast<std::size_t>(nl), -1);
    TaskId last_fwd = -1;
    for (int l = 0; l < nl; ++l) {
      last_fwd = b.forward(mb, l);
      const std::int64_t e = cast_numel[static_cast<std::size_t>(l)];
      if (e > 0) {
        b.task(last_fwd).mem_bytes += static_cast<double>(e) * AUTOCAST_CAST_BYTES_PER_ELEM;
        cast[static_cast<std::size_t>(l)] = b.transient(
            mbs + ".autocast." + b.w.layers[static_cast<std::size_t>(l)].name, Device::GPU, MemCategory::PARAMS, 2 * e);
        b.alloc_on(last_fwd, cast[static_cast<std::size_t>(l)]);
      }
    }
    // Under full checkpointing nothing is saved in the forward: the cache alone holds the casts of the
    // recomputed layers, until the autocast region exits at the end of the forward.
    std::vector<char>& re = recast[static_cast<std::size_t>(mb)];
    re.assign(static_cast<std::size_t>(nl), 0);
    for (int l = 0; l < nl; ++l)
      if (full_ckpt && b.w.layers[static_cast<std::size_t>(l)].recompute_flops > 0 &&
          cast[static_cast<std::size_t>(l)] >= 0) {
        b.free_on(last_fwd, cast[static_cast<std::size_t>(l)]);
        re[static_cast<std::size_t>(l)] = 1;
      }
  }

  void backward(int mb, int /*chunk*/) override
  {
    const std::string mbs = "mb" + std::to_string(mb);
    const bool synced = ddp && (!d.no_sync || mb == g - 1);
    const std::vector<BufferId>& cast = casts[static_cast<std::size_t>(mb)];
    const std::vector<char>& re = recast[static_cast<std::size_t>(mb)];
    std::vector<TaskId> ars(buckets.size(), -1);
    TaskId last_ar = -1;
    for (int l = nl - 1; l >= 0; --l) {
      const std::string& lname = b.w.layers[static_cast<std::size_t>(l)].name;
      const auto [first, bwd] = b.backward(mb, l);
      const std::int64_t e = cast_numel[static_cast<std::size_t>(l)];
      if (e > 0) {
        b.task(bwd).mem_bytes += static_cast<double>(e) * AUTOCAST_CAST_BYTES_PER_ELEM; // ToCopyBackward
        if (re[static_cast<std::size_t>(l)]) {
          b.task(first).mem_bytes += static_cast<double>(e) * AUTOCAST_CAST_BYTES_PER_ELEM;
          const BufferId rc =
              b.transient(mbs + ".autocast_recompute." + lname, Device::GPU, MemCategory::PARAMS, 2 * e);
          b.alloc_on(first, rc);
          b.free_on(bwd, rc);
        } else {
          b.free_on(bwd, cast[static_cast<std::size_t>(l)]);
        }
      }

      const std::int64_t numel = b.layer_numel(l);
      BufferId repointed = -1; // the param.grad the copy-in replaces by its bucket view
      if (!view || mb < first_synced) {
        if (mb == 0) {
          grads[static_cast<std::size_t>(l)] =
              b.transient("grads." + lname, Device::GPU, MemCategory::GRADS, numel * bp);
          b.alloc_on(bwd, grads[static_cast<std::size_t>(l)]);
        }
      } else if (mb == first_synced) {
        repointed = grads[static_cast<std::size_t>(l)];
        grads[static_cast<std::size_t>(l)] = -1;
        if (repointed < 0) { // zero_grad(set_to_none) left it None: AccumulateGrad made a fresh one
          repointed = b.transient(mbs + ".autograd_grads." + lname, Device::GPU, MemCategory::GRADS, numel * bp);
          b.alloc_on(bwd, repointed);
        }
      }
      if (!synced || numel == 0)
        continue;
      // The hooks: grad / N written into the bucket (mark_variable_ready_dense), then every bucket this layer
      // completes is launched on the NCCL stream (mark_bucket_ready, all_reduce_bucket).
      const TaskId copy_in = b.add(grad_reduce_copy(mbs + ".ddp.copy_in." + lname, mb, l, numel, bp));
      b.free_on(copy_in, repointed);
      for (int i : launched_at[static_cast<std::size_t>(l)]) {
        ars[static_cast<std::size_t>(i)] =
            b.collective(mbs + ".allreduce." + std::to_string(i), Phase::GRAD_REDUCE, Stream::REDUCTION,
                         CollectiveKind::ALL_REDUCE, buckets[static_cast<std::size_t>(i)].bytes, mb, {copy_in});
        last_ar = ars[static_cast<std::size_t>(i)];
      }
    }
    if (!synced)
      return;
    if (find_unused) // all_reduce_local_used_map, launched with the last bucket
      last_ar = b.collective(mbs + ".allreduce.local_used_map", Phase::GRAD_REDUCE, Stream::REDUCTION,
                             CollectiveKind::ALL_REDUCE,
                             USED_MAP_BYTES_PER_TENSOR * static_cast<std::int64_t>(b.params.size()), mb, {last_ar});
    // finalize_backward: per bucket a stream wait on its all-reduce, then (without the view) the averaged
    // bucket is copied back into param.grad (copy_bucket_to_grad).
    if (!view)
      for (std::size_t i = 0; i < buckets.size(); ++i) {
        Task t = grad_reduce_copy(mbs + ".ddp.copy_out." + std::to_string(i), mb, -1, buckets[i].bytes / bp, bp);
        t.deps = {ars[i]};
        b.add(std::move(t));
      }
    b.compute_waits_for(last_ar);
  }

  void epilogue() override { ddp_step(b, b.psi, bp, lowp, scaler, grads); }

private:
  Builder& b;
  const spec::DdpSpec& d;
  int nl;
  int g;
  bool ddp;
  int bp;
  bool lowp;
  bool scaler;
  bool view;
  bool find_unused;
  bool full_ckpt;
  int first_synced;
  std::vector<DdpBucket> buckets;
  std::vector<std::vector<int>> launched_at; ///< per layer, the buckets its backward's hooks complete
  std::vector<std::int64_t> cast_numel;      ///< per layer, the elements autocast casts
  std::vector<BufferId> grads;               ///< per layer, param.grad held as its own tensor
  std::vector<std::vector<BufferId>> casts;  ///< per micro-step, per layer: the casts its forward saved
  std::vector<std::vector<char>> recast;     ///< per micro-step, per layer: recast in the backward's recompute
};

} // namespace

std::unique_ptr<StepUnits> ddp_units(Builder& b)
{
  return std::make_unique<Ddp>(b);
}

} // namespace zerosim::schedule::detail
