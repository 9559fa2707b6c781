// A small dataflow graph of one layer's forward pass: the activation tensors it creates, the
// operations that read and write them, and what each operation saves for backward (what PyTorch
// autograd keeps in ctx.save_for_backward). From it follow, for every checkpointing mode, the
// bytes kept for backward, the transient bytes of the forward and of the backward, and the HBM
// bytes each operation moves. Internal to the workload component; see docs/workload.md §4-§5.
#pragma once

#include "workload/transformer.hpp"

#include <cstdint>
#include <string>
#include <vector>

namespace zerosim::workload::detail {

/// One activation tensor of one micro-batch.
struct TensorDef {
  std::string name;
  std::int64_t numel = 0;
  int elem_bytes = 2;   ///< bytes per element: activation dtype, 4 for fp32 stats/softmax, 1 for masks, 8 for ids
  bool has_grad = true; ///< floating activations get a gradient of the same size; masks, stats, ids do not
  /// Lives outside the layer (a slice of the inference KV cache, which the schedule allocates for the whole
  /// request): its bytes are moved by the ops that read or write it, but it is never kept, never transient.
  bool resident = false;
  std::int64_t bytes() const { return numel * elem_bytes; }
};

/// How an operation's HBM traffic is counted (docs/workload.md §5).
enum class BytesRule {
  GEMM,  ///< fwd: operands + output; bwd: 2 x fwd (dX = dY·Wᵀ and dW = Xᵀ·dY each read two operands, write one)
  STREAM ///< fwd: inputs + outputs; bwd: read dY, read the saved tensors, write dX (+ weights and their grads)
};

/// One operation of the forward, for one micro-batch.
struct OpDef {
  Op op; ///< name, kind, GEMM shape, FLOPs, selective flag (bytes are filled in)
  BytesRule rule = BytesRule::STREAM;
  std::vector<int> inputs;            ///< tensor ids read
  std::vector<int> outputs;           ///< tensor ids written (incl. masks and norm statistics)
  std::vector<int> saved;             ///< tensor ids autograd saves for this op's backward
  std::int64_t weight_read_fwd = 0;   ///< parameter bytes read by the forward (a GEMM's weight + bias, a gather's rows)
  std::int64_t weight_read_bwd = 0;   ///< parameter bytes read by the backward (STREAM rule only, e.g. a norm's gamma)
  std::int64_t weight_grad_write = 0; ///< parameter-gradient bytes written by the backward (STREAM rule only)
};

/// How the layer's activations are handled.
enum class GraphMode {
  TRAIN,           ///< everything saved stays until backward
  TRAIN_SELECTIVE, ///< the ops flagged selective_recompute keep only their inputs; the rest is recomputed
  TRAIN_FULL,      ///< only the layer input is kept; the whole forward is recomputed in backward
  /// torchtitan's per-op selective policy (torchtitan/models/llama3/infra/parallelize.py `_custom_policy`): the
  /// outputs of every other matmul (the 1st, 3rd, ... of the layer), of SDPA and of reduce-scatter are saved;
  /// every other op is recomputed in backward from the layer input and those saved outputs.
  TRAIN_PER_OP,
  INFERENCE ///< forward only: nothing kept
};

/// What the analysis of a graph gives.
struct GraphResult {
  std::vector<Op> ops; ///< with fwd_bytes / bwd_bytes filled, bwd zeroed in inference
  std::int64_t kept_bytes = 0;
  std::int64_t forward_working_bytes = 0;
  std::int64_t backward_working_bytes = 0;
  std::int64_t recomputed_bytes = 0;       ///< part of backward_working_bytes: saved tensors rebuilt by recomputation
  std::int64_t gradient_working_bytes = 0; ///< part of backward_working_bytes: largest activation-gradient pair
  // The tensors each of the three sums stands for (bytes each, in the forward's order; they sum to the figure): what
  // the caching allocator is asked for, one request per tensor (docs/memory.md §2.1).
  std::vector<std::int64_t> kept_tensors;
  std::vector<std::int64_t> forward_working_tensors;  ///< the transient tensors live at the forward's peak op
  std::vector<std::int64_t> backward_working_tensors; ///< the rebuilt tensors, then the largest gradient pair's
  /// The forward's requests in op order (docs/memory.md §2.1): `forward_trace_bytes` lists every tensor the forward
  /// allocates, kept or transient, in the order the ops write them (the layer's input first when kept);
  /// `forward_trace` is the sequence of steps, k >= 0 allocating tensor k, -k - 1 freeing it after its last
  /// reader (the layer's output at the end). Kept tensors are never freed in it.
  std::vector<std::int64_t> forward_trace_bytes;
  std::vector<int> forward_trace;
};

class OpGraph {
public:
  /// Adds a tensor and returns its id.
  int add_tensor(std::string name, std::int64_t numel, int elem_bytes, bool has_grad = true);
  /// Adds a tensor that lives outside the layer (TensorDef::resident: the KV cache) and returns its id.
  int add_resident_tensor(std::string name, std::int64_t numel, int elem_bytes);
  void add_op(OpDef op) { ops_.push_back(std::move(op)); }
  /// The tensor entering the layer (produced by the previous layer) and the one leaving it.
  void set_boundary(int input, int output)
  {
    input_ = input;
    output_ = output;
  }
  /// A tensor kept alive until backward by someone other than autograd (the logits held by the caller).
  void hold(int tensor) { held_.push_back(tensor); }

  const TensorDef& tensor(int id) const { return tensors_.at(static_cast<std::size_t>(id)); }
  GraphResult analyse(GraphMode mode) const;

private:
  std::int64_t bytes_of(const std::vector<bool>& set) const;
  std::vector<std::int64_t> tensors_of(const std::vector<bool>& set) const;
  std::vector<Op> op_bytes(const std::vector<bool>& rerun, bool inference) const;
  std::vector<std::int64_t> largest_gradient_pair(std::int64_t& bytes) const;
  void forward_trace(const std::vector<bool>& kept, const std::vector<int>& produced, const std::vector<int>& last_use,
                     GraphResult& r) const;

  std::vector<TensorDef> tensors_;
  std::vector<OpDef> ops_;
  std::vector<int> held_;
  int input_ = -1;
  int output_ = -1;
};

} // namespace zerosim::workload::detail
