// Analysis of a layer's dataflow graph: kept, transient and moved bytes. docs/workload.md §4-§5.
#include "workload/op_graph.hpp"

#include "core/error.hpp"

#include <algorithm>
#include <utility>

namespace zerosim::workload::detail {

int OpGraph::add_tensor(std::string name, std::int64_t numel, int elem_bytes, bool has_grad)
{
  tensors_.push_back(TensorDef{std::move(name), numel, elem_bytes, has_grad});
  return static_cast<int>(tensors_.size()) - 1;
}

int OpGraph::add_resident_tensor(std::string name, std::int64_t numel, int elem_bytes)
{
  tensors_.push_back(TensorDef{std::move(name), numel, elem_bytes, false, true});
  return static_cast<int>(tensors_.size()) - 1;
}

std::int64_t OpGraph::bytes_of(const std::vector<bool>& set) const
{
  std::int64_t total = 0;
  for (std::size_t t = 0; t < tensors_.size(); ++t)
    if (set[t])
      total += tensors_[t].bytes();
  return total;
}

std::vector<std::int64_t> OpGraph::tensors_of(const std::vector<bool>& set) const
{
  std::vector<std::int64_t> sizes;
  for (std::size_t t = 0; t < tensors_.size(); ++t)
    if (set[t] && tensors_[t].bytes() > 0)
      sizes.push_back(tensors_[t].bytes());
  return sizes;
}

void OpGraph::forward_trace(const std::vector<bool>& kept, const std::vector<int>& produced,
                            const std::vector<int>& last_use, GraphResult& r) const
{
  const auto idx = [](int t) { return static_cast<std::size_t>(t); };
  std::vector<int> slot(tensors_.size(), -1);
  const auto allocate = [&](int t) {
    const TensorDef& d = tensors_[idx(t)];
    if (d.resident || d.bytes() <= 0 || slot[idx(t)] >= 0)
      return;
    slot[idx(t)] = static_cast<int>(r.forward_trace_bytes.size());
    r.forward_trace_bytes.push_back(d.bytes());
    r.forward_trace.push_back(slot[idx(t)]);
  };
  // Kept tensors no op of the layer writes (its input, token ids, labels): this layer's blocks from its start (the
  // previous layer freed its output).
  for (std::size_t t = 0; t < tensors_.size(); ++t)
    if (kept[t] && produced[t] < 0)
      allocate(static_cast<int>(t));
  // Transients by the op after which they die (their last reader, or their writer when nobody reads them); the
  // layer's output lives on.
  std::vector<std::vector<int>> dies_after(ops_.size());
  for (std::size_t t = 0; t < tensors_.size(); ++t) {
    const int end = std::max(last_use[t], produced[t]);
    if (!kept[t] && static_cast<int>(t) != output_ && end >= 0 && end < static_cast<int>(ops_.size()))
      dies_after[static_cast<std::size_t>(end)].push_back(static_cast<int>(t));
  }
  for (std::size_t i = 0; i < ops_.size(); ++i) {
    for (int t : ops_[i].outputs)
      if (produced[idx(t)] == static_cast<int>(i))
        allocate(t);
    for (int t : dies_after[i])
      if (slot[idx(t)] >= 0)
        r.forward_trace.push_back(-slot[idx(t)] - 1);
  }
  if (slot[idx(output_)] >= 0 && !kept[idx(output_)])
    r.forward_trace.push_back(-slot[idx(output_)] - 1); // handed to the next layer, which allocates its own input
}

GraphResult OpGraph::analyse(GraphMode mode) const
{
  const std::size_t n_tensors = tensors_.size();
  const int n_ops = static_cast<int>(ops_.size());
  if (input_ < 0 || output_ < 0)
    throw core::InternalError("workload: layer graph without input/output tensor");
  const auto idx = [](int t) { return static_cast<std::size_t>(t); };
  const bool inference = mode == GraphMode::INFERENCE;

  // Everything autograd would save (plus what the caller holds): the kept set without checkpointing.
  std::vector<bool> saved_all(n_tensors, false);
  for (const OpDef& o : ops_)
    for (int t : o.saved)
      saved_all[idx(t)] = true;
  for (int t : held_)
    saved_all[idx(t)] = true;

  // The ops the backward re-runs (their forward), by mode.
  std::vector<bool> rerun(ops_.size(), false);
  // per_op: which ops' outputs the policy saves (torchtitan `_custom_policy`: aten.mm counted per checkpointed
  // region, saved unless its count is even; SDPA's flash/efficient kernels saved).
  std::vector<bool> policy_saves(ops_.size(), false);
  {
    int mm = 0;
    for (std::size_t i = 0; i < ops_.size(); ++i) {
      const Op& op = ops_[i].op;
      if (op.kind == OpKind::GEMM)
        policy_saves[i] = (++mm % 2) == 1;
      else
        policy_saves[i] = is_fused_attention(op); // the SDPA kernel's outputs
    }
  }
  for (std::size_t i = 0; i < ops_.size(); ++i)
    rerun[i] = mode == GraphMode::TRAIN_FULL ||
               (mode == GraphMode::TRAIN_SELECTIVE && ops_[i].op.selective_recompute) ||
               (mode == GraphMode::TRAIN_PER_OP && !policy_saves[i]);

  // The kept set of the mode.
  std::vector<bool> kept(n_tensors, false);
  switch (mode) {
  case GraphMode::INFERENCE:
    break;
  case GraphMode::TRAIN:
    kept = saved_all;
    break;
  case GraphMode::TRAIN_FULL:
    // torch.utils.checkpoint / Megatron's checkpoint keep the checkpointed function's input only.
    kept[idx(input_)] = true;
    break;
  case GraphMode::TRAIN_SELECTIVE: {
    // Korthikanti et al. 2022, section 5: the recomputed region (the attention core) keeps its inputs;
    // every other op saves as usual.
    std::vector<bool> made_inside(n_tensors, false);
    for (const OpDef& o : ops_)
      if (o.op.selective_recompute)
        for (int t : o.outputs)
          made_inside[idx(t)] = true;
    for (const OpDef& o : ops_) {
      if (o.op.selective_recompute) {
        for (int t : o.inputs)
          if (!made_inside[idx(t)])
            kept[idx(t)] = true;
      } else {
        for (int t : o.saved)
          kept[idx(t)] = true;
      }
    }
    for (int t : held_)
      kept[idx(t)] = true;
    break;
  }
  case GraphMode::TRAIN_PER_OP:
    // torch.utils.checkpoint with a selective policy keeps the region's input and the outputs of the ops the
    // policy saves; everything else autograd would save is rebuilt by re-running the other ops.
    kept[idx(input_)] = true;
    for (std::size_t i = 0; i < ops_.size(); ++i)
      if (policy_saves[i])
        for (int t : ops_[i].outputs)
          kept[idx(t)] = true;
    for (int t : held_)
      kept[idx(t)] = true;
    break;
  }

  GraphResult r;
  r.kept_bytes = bytes_of(kept);
  r.kept_tensors = tensors_of(kept);

  // Saved tensors not kept are rebuilt by the recomputation during this layer's backward.
  if (mode == GraphMode::TRAIN_FULL || mode == GraphMode::TRAIN_SELECTIVE || mode == GraphMode::TRAIN_PER_OP) {
    std::vector<bool> rebuilt(n_tensors, false);
    for (std::size_t t = 0; t < n_tensors; ++t)
      rebuilt[t] = saved_all[t] && !kept[t];
    r.recomputed_bytes = bytes_of(rebuilt);
    r.backward_working_tensors = tensors_of(rebuilt);
  }

  // Gradient temporaries: while an op's backward runs, the gradients of its outputs and of its
  // inputs are alive together; the largest such pair bounds the activation-gradient working set.
  if (!inference) {
    const std::vector<std::int64_t> pair = largest_gradient_pair(r.gradient_working_bytes);
    r.backward_working_bytes = r.recomputed_bytes + r.gradient_working_bytes;
    r.backward_working_tensors.insert(r.backward_working_tensors.end(), pair.begin(), pair.end());
  }

  // Forward transient: liveness over the op sequence. A tensor lives from the op writing it to the
  // last op reading it (the layer output to the end); at each op the live tensors that are not kept
  // are transient. Tensors nobody reads again (a mask under checkpointing) die with their op.
  std::vector<int> produced(n_tensors, n_ops);
  std::vector<int> last_use(n_tensors, -1);
  produced[idx(input_)] = -1;
  for (int i = 0; i < n_ops; ++i) {
    for (int t : ops_[static_cast<std::size_t>(i)].outputs)
      produced[idx(t)] = std::min(produced[idx(t)], i);
    for (int t : ops_[static_cast<std::size_t>(i)].inputs)
      last_use[idx(t)] = std::max(last_use[idx(t)], i);
  }
  for (std::size_t t = 0; t < n_tensors; ++t)
    if (produced[t] == n_ops) // written by no op: an external input (token ids, labels)
      produced[t] = -1;
  if (!inference)
    forward_trace(kept, produced, last_use, r);
  last_use[idx(output_)] = n_ops;
  for (int i = 0; i < n_ops; ++i) {
    std::vector<bool> alive(n_tensors, false);
    for (std::size_t t = 0; t < n_tensors; ++t) {
      const int end = std::max(last_use[t], produced[t]);
      alive[t] = !kept[t] && !tensors_[t].resident && produced[t] <= i && i <= end;
    }
    const std::int64_t live = bytes_of(alive);
    if (live > r.forward_working_bytes) {
      r.forward_working_bytes = live;
      r.forward_working_tensors = tensors_of(alive);
    }
  }

  r.ops = op_bytes(rerun, inference);
  return r;
}

/// The ops with their HBM bytes (docs/workload.md §5), marked recomputed where the backward re-runs them; inference:
/// no backward.
std::vector<Op> OpGraph::op_bytes(const std::vector<bool>& rerun, bool inference) const
{
  const auto idx = [](int t) { return static_cast<std::size_t>(t); };
  std::vector<Op> ops;
  ops.reserve(ops_.size());
  for (std::size_t i = 0; i < ops_.size(); ++i) {
    const OpDef& o = ops_[i];
    Op op = o.op;
    op.recomputed = rerun[i];
    std::int64_t in = 0, out = 0, dy = 0, dx = 0, saved = 0;
    for (int t : o.inputs) {
      in += tensors_[idx(t)].bytes();
      if (tensors_[idx(t)].has_grad)
        dx += tensors_[idx(t)].bytes();
    }
    for (int t : o.outputs) {
      out += tensors_[idx(t)].bytes();
      if (tensors_[idx(t)].has_grad)
        dy += tensors_[idx(t)].bytes();
    }
    for (int t : o.saved)
      saved += tensors_[idx(t)].bytes();
    op.fwd_bytes = static_cast<double>(in + out + o.weight_read_fwd);
    if (o.rule == BytesRule::GEMM)
      op.bwd_bytes = 2.0 * op.fwd_bytes;
    else
      op.bwd_bytes = static_cast<double>(dy + saved + dx + o.weight_read_bwd + o.weight_grad_write);
    if (inference) {
      op.bwd_flops = 0;
      op.bwd_bytes = 0;
    }
    ops.push_back(std::move(op));
  }
  return ops;
}

/// The largest set of gradients alive together while one op's backward runs (its outputs' and its inputs'): their
/// sizes, and their sum in `bytes` (left as it is when no op's exceeds it).
std::vector<std::int64_t> OpGraph::largest_gradient_pair(std::int64_t& bytes) const
{
  const auto idx = [](int t) { return static_cast<std::size_t>(t); };
  std::vector<std::int64_t> pair;
  for (const OpDef& o : ops_) {
    std::vector<int> touched = o.inputs;
    touched.insert(touched.end(), o.outputs.begin(), o.outputs.end());
    std::sort(touched.begin(), touched.end());
    touched.erase(std::unique(touched.begin(), touched.end()), touched.end());
    std::int64_t grads = 0;
    std::vector<std::int64_t> sizes;
    for (int t : touched)
      if (tensors_[idx(t)].has_grad && tensors_[idx(t)].bytes() > 0) {
        grads += tensors_[idx(t)].bytes();
        sizes.push_back(tensors_[idx(t)].bytes());
      }
    if (grads > bytes) {
      bytes = grads;
      pair = std::move(sizes);
    }
  }
  return pair;
}

} // namespace zerosim::workload::detail
