// ZeRO stages 1 and 2 (DeepSpeedZeroOptimizer, docs/deepspeed-schedule.md §3), with ZeRO-Offload (§3.6), and ZeRO-1
// on a stage of DeepSpeed's pipeline engine (docs/pipeline-parallel.md §6, "ZeRO-1 with DeepSpeedZeroOptimizer").
#include "schedule/offload.hpp"

#include <algorithm>
#include <limits>
#include <map>
#include <numeric>
#include <tuple>

namespace zerosim::schedule::detail {

namespace {

/// The flat buffer padded to a multiple of 2N (nccl_start_alignment_factor = 2) and each rank's partition P of it
/// (§3.1): {padded size, P}.
std::pair<std::int64_t, std::int64_t> flat_partition(const Builder& b)
{
  const std::int64_t align = 2LL * b.n;
  const std::int64_t psi_pad = ceil_div(b.psi, align) * align;
  return {psi_pad, psi_pad / b.n};
}

/// Each param's offset in the flat buffer, flat (forward) order, and the buffer's end: begin[i] .. begin[i + 1].
std::vector<std::int64_t> flat_offsets(const Builder& b)
{
  std::vector<std::int64_t> begin(b.params.size() + 1, 0);
  for (std::size_t i = 0; i < b.params.size(); ++i)
    begin[i + 1] = begin[i] + b.params[i].numel;
  return begin;
}

/// Calls f(i, elements of param i inside [lo, hi)) for every param, from param `from` on, that has elements in the
/// partition [lo, hi) of the flat buffer (`begin`: flat_offsets).
template <class F>
void for_each_in_partition(const std::vector<std::int64_t>& begin, std::size_t from, std::int64_t lo, std::int64_t hi,
                           F f)
{
  for (std::size_t i = from; i + 1 < begin.size() && begin[i] < hi; ++i) {
    const std::int64_t in = std::min(begin[i + 1], hi) - std::max(begin[i], lo);
    if (in > 0)
      f(i, in);
  }
}

/// overlap_comm as DeepSpeedZeroOptimizer runs it: the config's, except on a pipeline stage, where
/// _configure_zero_optimizer turns it off for a PipelineModule ("Pipeline parallelism does not support overlapped
/// communication, will be disabled.", docs/pipeline-parallel.md §5).
bool overlap_comm_of(const Builder& b)
{
  return b.s.deepspeed.zero.overlap_comm && b.stages == 1;
}

/// The IPG bucket's rule (§3.2): a bucket holding `filled` elements is flushed before a param of `numel` that would
/// overflow B_r (a param larger than B_r alone still goes into an empty bucket).
bool bucket_overflows(std::int64_t filled, std::int64_t numel, std::int64_t br)
{
  return filled > 0 && filled + numel > br;
}

/// One IPG bucket being filled by gradient hooks (§3.2).
struct IpgBucket {
  std::int64_t elements = 0;
  std::int64_t e_in = 0;             ///< elements of params touching this rank's partition
  std::int64_t e_slice = 0;          ///< elements inside this rank's partition
  std::vector<BufferId> extra_grads; ///< grads of params > B_r, reduced without a copy (§3.2)
};

/// One rank's stage-1/2 step: the partition of the flat buffer, the gradients held over the step, and the state of
/// one micro-step's gradient hooks (the IPG buckets) with the hooks as functions.
struct Stage12 : StepUnits {
  explicit Stage12(Builder& builder);

  void prologue() override { residents(); }
  void forward(int m, int chunk) override;
  void backward(int m, int chunk) override;
  void epilogue() override
  {
    if (pipeline)
      reduce_after_pipeline();
    step();
  }

  /// Model states (§3.1, §10.1 rows 1, 2).
  void residents();
  /// Step (§3.5).
  void step();
  /// The micro-step state for micro-step `m`: its name, whether it is the boundary, where it reduces.
  void begin_micro_step(int m);

  /// The reduction of the IPG bucket after `trigger` (§3.2).
  void flush(TaskId trigger);
  /// A gradient hook: param `pi`'s gradient into the bucket, which is flushed first when it would overflow.
  void add_param(int pi, TaskId producer, BufferId extra_grad);
  /// The backward of every layer with its gradient hooks; returns the last backward task.
  TaskId backward_layers();
  /// The end of a micro-step (§3.2): the epilogue's synchronize, stage 2's accumulation, the releases.
  void end_micro_step(TaskId last_bwd);
  /// A pipeline stage's backward of one micro-batch: nothing reduced (docs/pipeline-parallel.md §6).
  void pipeline_backward(int m);
  /// A pipeline stage's ReduceGrads: reduce_gradients(pipeline_parallel=True) (docs/pipeline-parallel.md §6).
  void reduce_after_pipeline();

  Builder& b;
  const spec::ZeroSpec& z;
  bool stage2 = false;
  bool pipeline = false; ///< a stage of DeepSpeed's pipeline engine: the reduction waits for ReduceGrads
  bool overlap = false;
  bool offload = false;    ///< any offload_optimizer device other than none is CPU offload (§3.6 last bullet)
  bool contiguous = false; ///< forced True with CPU offload (§3.6)
  std::int64_t br = 0;     ///< B_r, reduce_bucket_size
  int nl = 0;
  Stream red_stream = Stream::COMPUTE;
  std::int64_t psi_pad = 0;        ///< the flat buffer, padded (§3.1)
  std::int64_t part = 0;           ///< P, the partition of each rank
  std::vector<std::int64_t> slice; ///< per param, its elements inside this rank's partition
  std::vector<char> touches;       ///< per param: it touches this rank's partition
  std::int64_t p_in = 0;           ///< Σ numel of the params touching the partition
  std::vector<BufferId> stage1_grads;
  BufferId accumulated = -1;      ///< the in-partition grads held until the step (freed by it)
  TaskId last_red = -1;           ///< the last task issued on the reduction path
  TaskId first_red = -1;          ///< the first bucket reduction of the step
  std::vector<BufferId> held_ipg; ///< pipeline: the IPG bucket of micro-batch 0's first hook, held until ReduceGrads

  // The micro-step being built.
  int mb = 0;
  int micro_step_id = 0; ///< DeepSpeedZeroOptimizer's micro_step_id: backwards before this one in the step (§3.6)
  std::string mbs;
  bool boundary = false;
  bool reduce_in_bwd = false;
  bool reduce_post_bwd = false;
  std::vector<BufferId> ipg;
  BufferId gip = -1; ///< this micro-step's grads_in_partition (no offload), §3.2
  IpgBucket bk;
  int bucket_index = 0;
};

Stage12::Stage12(Builder& builder)
    : b(builder), z(b.s.deepspeed.zero), stage2(z.stage == 2), pipeline(b.stages > 1), overlap(overlap_comm_of(b)),
      offload(z.offload_optimizer.device != spec::OffloadDevice::NONE), contiguous(z.contiguous_gradients || offload),
      br(z.reduce_bucket_size), nl(static_cast<int>(b.w.layers.size())),
      red_stream(overlap ? Stream::REDUCTION : Stream::COMPUTE) // §3.2 "Streams"
{
  // Flat buffer padded to a multiple of 2N (nccl_start_alignment_factor = 2) and cut into N
  // partitions (§3.1). This rank owns [rank·P, (rank+1)·P); a param straddling a boundary belongs
  // to both neighbours (P_in >= P, §10.1 notes).
  std::tie(psi_pad, part) = flat_partition(b);
  const std::int64_t p_begin = static_cast<std::int64_t>(b.dp_rank) * part;
  const std::int64_t p_end = p_begin + part;
  slice.assign(b.params.size(), 0);
  touches.assign(b.params.size(), 0);
  for_each_in_partition(flat_offsets(b), 0, p_begin, p_end, [&](std::size_t i, std::int64_t in) {
    slice[i] = in;
    touches[i] = 1;
    p_in += b.params[i].numel;
  });
  stage1_grads.assign(static_cast<std::size_t>(nl), -1);
}

void Stage12::residents()
{
  // The fp32 master partition is a clone even for fp32 training (`single_partition_of_fp32_groups` =
  // partition.clone().float()).
  b.resident("lp_flat_params", Device::GPU, MemCategory::PARAMS, psi_pad * b.b_lp);
  if (!offload) {
    b.resident("fp32_master_partition", Device::GPU, MemCategory::OPTIMIZER, part * 4);
    b.resident("optimizer_states", Device::GPU, MemCategory::OPTIMIZER, part * b.opt_state_bytes);
  } else {
    stage12_offload_residents(b, part, p_in);
  }
}

void Stage12::flush(TaskId trigger)
{
  if (bk.elements == 0)
    return;
  const std::string nm = mbs + ".allreduce." + std::to_string(bucket_index++);
  // overlap_comm: current_stream().wait_stream(reduction_stream) before the launch, so the
  // compute stream waits for the previous bucket's reduction (§3.2 "Streams").
  if (overlap)
    b.compute_waits_for(last_red);
  // use_multi_rank_bucket_allreduce (default) or reduce_scatter=False: one all_reduce of the
  // whole bucket (§3.2), after a flatten copy (+ a cast copy if b_c != b_lp).
  const TaskId ar =
      b.collective(nm, Phase::GRAD_REDUCE, red_stream, CollectiveKind::ALL_REDUCE, bk.elements * b.b_c, mb, {trigger});
  b.scratch(ar, nm + ".flatten", MemCategory::BUFFERS, bk.elements * b.b_lp);
  if (b.b_c != b.b_lp)
    b.scratch(ar, nm + ".cast", MemCategory::BUFFERS, bk.elements * b.b_c);
  for (BufferId eg : bk.extra_grads)
    b.free_on(ar, eg);
  if (first_red < 0)
    first_red = ar;
  TaskId last = ar;
  if (!offload) {
    if (bk.e_in > 0 && gip < 0) {
      gip = b.transient(mbs + ".grads_in_partition", Device::GPU, MemCategory::GRADS, p_in * b.b_lp);
      b.alloc_on(ar, gip);
    }
  } else {
    const TaskId c = stage12_offload_bucket_copies(b, nm, mb, micro_step_id, boundary, bk.e_in, bk.e_slice, red_stream);
    if (c >= 0)
      last = c;
  }
  last_red = last;
  bk = IpgBucket{};
}

void Stage12::add_param(int pi, TaskId producer, BufferId extra_grad)
{
  const ParamInfo& p = b.params[static_cast<std::size_t>(pi)];
  if (bucket_overflows(bk.elements, p.numel, br))
    flush(producer);
  bk.elements += p.numel;
  if (touches[static_cast<std::size_t>(pi)]) {
    bk.e_in += p.numel;
    bk.e_slice += slice[static_cast<std::size_t>(pi)];
  }
  if (extra_grad >= 0)
    bk.extra_grads.push_back(extra_grad);
}

TaskId Stage12::backward_layers()
{
  TaskId last_bwd = -1;
  for (int l = b.end_layer - 1; l >= b.first_layer; --l) { // a pipeline stage's layers, or every layer
    const auto [first, bwd] = b.backward(mb, l);
    last_bwd = bwd;
    if (l == b.end_layer - 1)
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
    b.scratch(bwd, mbs + ".autograd_grads." + lname, MemCategory::GRADS, small * b.b_lp);
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
  return last_bwd;
}

void Stage12::end_micro_step(TaskId last_bwd)
{
  // Epilogue (§3.2): flush (done before); with overlap_comm a device-wide synchronize; stage 2
  // accumulates this micro-step's partition grads (add_); release the IPG buffers and param.grad.
  TaskId epi = -1;
  const bool runs_epilogue = stage2 || boundary;
  if (overlap && runs_epilogue)
    epi = b.sync(mbs + ".epilogue.synchronize", mb, {last_red, last_bwd});
  if (stage2 && !offload && mb > 0 && gip >= 0) {
    // read both, write one
    epi = b.gpu_pass(mbs + ".accumulate_partition_grads", Phase::GRAD_REDUCE, mb, p_in,
                     3.0 * static_cast<double>(p_in * b.b_lp), 0, {last_red});
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

void Stage12::begin_micro_step(int m)
{
  mb = m;
  micro_step_id = m;
  mbs = "mb" + std::to_string(mb);
  boundary = mb == b.g - 1;
  // Stage 2 reduces in the hooks of every backward; stage 1 only at the boundary, in the hooks
  // with overlap_comm, else in reduce_gradients() after backward (§3.2-§3.4, §1.1).
  reduce_in_bwd = stage2 || (overlap && boundary);
  reduce_post_bwd = !stage2 && !overlap && boundary;
}

void Stage12::forward(int m, int /*chunk*/)
{
  begin_micro_step(m);
  for (int l = b.first_layer; l < b.end_layer; ++l) // a pipeline stage's layers, or every layer
    b.forward(mb, l);
}

void Stage12::backward(int m, int /*chunk*/)
{
  if (pipeline) {
    pipeline_backward(m);
    return;
  }
  begin_micro_step(m);
  // IPG buffers: setup_buckets() at the first grad hook of each backward, B_r elements of the
  // model dtype, a second one with overlap_comm; freed at the epilogue (§3.2, §10.3, §14).
  ipg.clear();
  if (contiguous) {
    ipg.push_back(b.transient(mbs + ".ipg_bucket.0", Device::GPU, MemCategory::BUFFERS, br * b.b_lp));
    if (overlap)
      ipg.push_back(b.transient(mbs + ".ipg_bucket.1", Device::GPU, MemCategory::BUFFERS, br * b.b_lp));
  }
  gip = -1;
  bk = IpgBucket{};
  bucket_index = 0;

  const TaskId last_bwd = backward_layers();
  if (reduce_post_bwd) // reduce_gradients(): every param, flat (forward) order, after backward (§3.3)
    for (std::size_t pi = 0; pi < b.params.size(); ++pi)
      add_param(static_cast<int>(pi), last_bwd, -1);
  if (reduce_in_bwd || reduce_post_bwd)
    flush(last_bwd);
  end_micro_step(last_bwd);
}

void Stage12::pipeline_backward(int m)
{
  begin_micro_step(m);
  // The engine backpropagates each micro-batch itself (torch.autograd.backward off the last stage, the optimizer's
  // backward on it, pipe/engine.py _exec_backward_pass) and reduces nothing: the lp gradients accumulate in param.grad
  // (stage 1, allocated by micro-batch 0's backward, held until ReduceGrads). With contiguous_gradients the gradient
  // hooks, registered for it, allocate the IPG bucket at the step's first hook (backward_prologue at 0.16,
  // setup_buckets at 0.19) and keep it: nothing releases it before ReduceGrads' epilogue (docs/pipeline-parallel.md
  // §6).
  ipg.clear();
  if (contiguous && mb == 0)
    ipg.push_back(b.transient(mbs + ".ipg_bucket.0", Device::GPU, MemCategory::BUFFERS, br * b.b_lp));
  backward_layers();
  held_ipg.insert(held_ipg.end(), ipg.begin(), ipg.end());
  ipg.clear();
}

void Stage12::reduce_after_pipeline()
{
  // ReduceGrads (docs/pipeline-parallel.md §6): _exec_reduce_grads forces the boundary and calls allreduce_gradients,
  // which runs reduce_gradients(pipeline_parallel=True): with contiguous_gradients a bucket of B_r elements (0.19
  // appends it beside the hooks' one, 0.16 replaces that one), then, overlap_comm being off, every parameter in flat
  // order through §3.2's buckets, each all-reduced over the stage's data-parallel group on the compute stream, and
  // the epilogue: the in-partition gradients kept (averaged_gradients), the buckets released, param.grad cleared.
  begin_micro_step(b.g - 1);
  mbs = "step.reduce_grads";
  micro_step_id = 0; // the step's one setup_buckets / backward_prologue counted one backward: 0 (§3.6)
  gip = -1;
  bk = IpgBucket{};
  bucket_index = 0;
  const TaskId before = b.last_task();
  for (std::size_t pi = 0; pi < b.params.size(); ++pi)
    add_param(static_cast<int>(pi), before, -1);
  flush(before);
  if (contiguous && !b.v016) {
    const BufferId second = b.transient(mbs + ".ipg_bucket.1", Device::GPU, MemCategory::BUFFERS, br * b.b_lp);
    b.alloc_on(first_red, second);
    held_ipg.push_back(second);
  }
  const TaskId epi = b.last_task();
  accumulated = gip;
  for (BufferId ib : held_ipg)
    b.free_on(epi, ib);
  for (BufferId gb : stage1_grads)
    b.free_on(epi, gb);
}

void Stage12::step()
{
  // Overflow check (fp16, or bf16 with check_grad_overflow, default True) and grad norm.
  b.step_scalars(b.mixed);
  TaskId before_ag = -1;
  if (!offload) {
    // flatten the partition grads (lp, P), cast to fp32 (4P), unscale, FusedAdam over P, copy fp32 -> lp.
    const double extra = 2.0 * b.b_lp + (b.mixed ? b.b_lp + 4 : 0) + 8 + (4 + b.b_lp);
    before_ag = b.gpu_optimizer("step.optimizer", part, extra, {last_red});
    b.scratch(before_ag, "step.lp_flat_grads", MemCategory::BUFFERS, part * b.b_lp);
    if (b.mixed)
      b.scratch(before_ag, "step.fp32_grads", MemCategory::BUFFERS, part * 4);
    b.free_on(before_ag, accumulated);
  } else {
    before_ag = stage12_offload_step(b, part, {last_red});
  }
  // all_gather_dp_groups: one all_gather_into_tensor of the whole padded flat buffer per param
  // group (one group here), on the default stream, after the optimizer (§1.4, §3.5 step 4).
  b.collective("step.allgather_params", Phase::PARAM_GATHER, Stream::COMPUTE, CollectiveKind::ALL_GATHER,
               psi_pad * b.b_lp, -1, {before_ag});
}

} // namespace

std::vector<int> stage12_memory_dp_ranks(const Builder& b)
{
  const spec::ZeroSpec& z = b.s.deepspeed.zero;
  const bool offload = z.offload_optimizer.device != spec::OffloadDevice::NONE;
  const std::int64_t br = z.reduce_bucket_size;
  const std::int64_t part = flat_partition(b).second;
  const std::size_t np = b.params.size();

  // The order the gradient hooks fill the IPG buckets: backward (layers and their params reversed) for stage 2 and
  // for stage 1 with overlap_comm; stage 1 without it (and on a pipeline stage) reduces after backward in flat order
  // (§3.2-§3.4). The
  // buckets follow Stage12::add_param's rule, which no rank changes: a bucket is flushed when the next param would
  // overflow B_r.
  std::vector<int> order;
  if (z.stage == 2 || overlap_comm_of(b)) {
    for (auto l = b.layer_params.rbegin(); l != b.layer_params.rend(); ++l)
      order.insert(order.end(), l->rbegin(), l->rend());
  } else {
    order.resize(np);
    std::iota(order.begin(), order.end(), 0);
  }
  std::vector<int> bucket(np, 0);
  std::int64_t filled = 0;
  int k = 0;
  for (int pi : order) {
    const std::int64_t e = b.params[static_cast<std::size_t>(pi)].numel;
    if (bucket_overflows(filled, e, br)) {
      ++k;
      filled = 0;
    }
    filled += e;
    bucket[static_cast<std::size_t>(pi)] = k;
  }
  const std::vector<std::int64_t> begin = flat_offsets(b);

  // Per data-parallel rank, what alone differs between the ranks' graphs (the constructor's walk,
  // for_each_in_partition, for every rank): P_in (the grads_in_partition buffer, and host memory with offload), the
  // first bucket whose reduction allocates it, and with offload the largest slice a bucket copies out (its fp32
  // scratch).
  struct Key {
    int first_bucket = 0;
    std::int64_t p_in = 0, slice = 0;
    int dp_rank = 0;
  };
  std::vector<Key> keys;
  std::size_t i0 = 0;
  for (int r = 0; r < b.n;) {
    const std::int64_t lo = static_cast<std::int64_t>(r) * part, hi = lo + part;
    while (i0 < np && begin[i0 + 1] <= lo)
      ++i0;
    Key key{std::numeric_limits<int>::max(), 0, 0, r};
    std::map<int, std::int64_t> slices; // per bucket
    for_each_in_partition(begin, i0, lo, hi, [&](std::size_t i, std::int64_t in) {
      key.p_in += b.params[i].numel;
      key.first_bucket = std::min(key.first_bucket, bucket[i]);
      slices[bucket[i]] += in;
    });
    for (const auto& [_, e] : slices)
      key.slice = std::max(key.slice, offload ? e : 0);
    keys.push_back(key);
    if (i0 >= np)
      break; // the padding: every later rank touches no param, the same key as this one
    // The ranks whose partitions lie inside param i0 alone, as this one's does, have this key: the lowest stands for
    // them (one key per param and per boundary, whatever N: the pass costs O(params), not O(ranks)).
    const bool inside = begin[i0] <= lo && hi <= begin[i0 + 1];
    r = inside ? static_cast<int>(std::max<std::int64_t>(r + 1, begin[i0 + 1] / part)) : r + 1;
  }

  // A rank whose buffer is allocated no later and is no smaller than another's holds at least as much at every
  // task of the same program, so its peak is at least the other's: only the ranks no earlier rank dominates can
  // hold the largest peak. Walked from the earliest allocation, largest first, lowest rank first on equal keys.
  std::sort(keys.begin(), keys.end(), [](const Key& x, const Key& y) {
    return std::tie(x.first_bucket, y.p_in, y.slice, x.dp_rank) < std::tie(y.first_bucket, x.p_in, x.slice, y.dp_rank);
  });
  std::vector<Key> front;
  for (const Key& key : keys)
    if (std::none_of(front.begin(), front.end(),
                     [&](const Key& f) { return f.p_in >= key.p_in && f.slice >= key.slice; }))
      front.push_back(key);
  std::vector<int> kept;
  for (const Key& f : front)
    kept.push_back(f.dp_rank);
  std::sort(kept.begin(), kept.end());
  return kept;
}

std::unique_ptr<StepUnits> stage12_units(Builder& b)
{
  return std::make_unique<Stage12>(b);
}

} // namespace zerosim::schedule::detail
