// Internal to sim/schedule: the FSDP schedule's state (fsdp.cpp builds the step with it, fsdp_backward.cpp holds the
// backward hooks and the gradient reduction). docs/fsdp.md is cited as "§n".
#pragma once

#include "schedule/schedule_builder.hpp"

#include <array>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <string>
#include <vector>

namespace zerosim::schedule::detail::fsdp {

/// `_FreeEventQueue._max_num_inflight_all_gathers = 2  # empirically chosen`
/// (torch/distributed/fsdp/_limiter_utils.py, §2.1).
inline constexpr std::size_t MAX_INFLIGHT_ALL_GATHERS = 2;
/// FSDP2 + CPU offload, micro-steps > 0: `sharded_param.grad._local_tensor += new_sharded_grad` on the CPU,
/// fp32: read both, write one (`_fsdp_collectives.py:foreach_reduce`, §8).
inline constexpr double CPU_ACCUMULATE_BYTES_PER_ELEM = 12;
/// ShardedGradScaler.unscale_ (`_foreach_non_finite_check_and_unscale_`): read and write each fp32 gradient.
inline constexpr double UNSCALE_BYTES_PER_ELEM = 8;
/// torch.optim's CPU AdamW/Adam (`_single_tensor_adamw`, foreach is not used on CPU tensors): the same passes
/// as the GPU foreach kernel, TORCH_ADAMW_FOREACH_BYTES_PER_ELEM (schedule_builder.hpp, §4).
inline constexpr double CPU_TORCH_ADAMW_BYTES_PER_ELEM = TORCH_ADAMW_FOREACH_BYTES_PER_ELEM;

/// What the scenario's fsdp block and precision resolve to (§9).
struct Config {
  bool v2 = false;         ///< FSDP2 (fully_shard): the scenario sets fsdp.reshard_after_forward
  bool no_shard = false;   ///< NO_SHARD (also FSDP1's switch at a one-rank shard group, §5)
  int w = 1;               ///< W, shard group size
  bool hybrid_ar = false;  ///< HYBRID_SHARD over more than one node: all-reduce of the shard across nodes
  bool reshard_fwd = true; ///< non-root units free their unsharded parameters after forward
  int b_p = 4;             ///< param_dtype bytes (all-gather, unsharded params, unsharded grads)
  int b_r = 4;             ///< reduce_dtype bytes
  bool offload = false;    ///< CPUOffload(offload_params=True) / CPUOffloadPolicy
  bool limit = false;      ///< FSDP1 limit_all_gathers
  spec::BackwardPrefetch prefetch = spec::BackwardPrefetch::BACKWARD_PRE;
  bool forward_prefetch = false;
  bool scaler = false; ///< fp16 / amp_fp16: ShardedGradScaler
  /// torch < 2.0 (FSDP1 `_post_backward_hook`): the reduce-scatter input is `F.pad(grad, [0, num_pad])` even when
  /// num_pad is 0, and F.pad with no positive pad returns a clone (ATen constant_pad_nd): always a padded copy.
  bool pad_always = false;
  CommGroup shard_group = CommGroup::WORLD;
};

struct Unit {
  std::string name; ///< "root" or the block's layer name
  bool root = false;
  std::int64_t numel = 0;  ///< n_u
  std::int64_t shard = 0;  ///< S_u (per rank, padded)
  int last_bwd_layer = -1; ///< its layer whose backward comes last (post-backward hook after it)
};

/// Per micro-step state of one unit.
struct UnitState {
  BufferId unsharded = -1;    ///< gathered parameters (NO_SHARD: the cast / H2D copy), -1 when sharded
  TaskId ready = -1;          ///< the task the unit's compute waits for
  bool ag_pending = false;    ///< FSDP2: unshard issued, copy-out not yet
  TaskId ag = -1;             ///< FSDP2: the pending all-gather (or its H2D, or -1)
  BufferId ag_output = -1;    ///< FSDP2: the pending all_gather_output
  bool prefetched = false;    ///< FSDP1 handle._prefetched
  bool needs_pre_bwd = false; ///< FSDP1 handle._needs_pre_backward_unshard
  BufferId grad = -1;         ///< unsharded gradient of this micro-step
};

/// The schedule of one rank: the units, their state over the step, and the FSDP hooks as functions.
class Fsdp : public StepUnits {
public:
  Fsdp(Builder& b, Config c);

  const std::vector<Unit>& units() const { return units_; }
  std::deque<TaskId>& free_events() { return free_events_; }

  /// Model states alive across steps (§10).
  void residents();

  void prologue() override { residents(); }
  /// The micro-step's state (_root_pre_forward), then the forward of every unit.
  void forward(int mb, int chunk) override;
  /// The backward of every unit of the micro-step whose forward was the last issued.
  void backward(int mb, int chunk) override;
  void epilogue() override { step(); }

  /// One micro-step, forward then backward (the rate limiter's fixed point runs it on scratch graphs).
  void micro_step(int mb)
  {
    forward(mb, 0);
    backward(mb, 0);
  }

  /// ShardedGradScaler (fp16), then the optimizer over the sharded fp32 parameters (§4).
  void step();

private:
  std::int64_t shard_of(std::int64_t numel, const std::vector<std::int64_t>& params) const;

  std::int64_t padded(const Unit& u) const { return static_cast<std::int64_t>(c_.w) * u.shard; }

  /// A collective on `group`: it also waits for the previous collective of that process group, which
  /// NCCL runs on one per-device stream in issue order (api.py:BackwardPrefetch, §1).
  TaskId collective(std::string name, Phase ph, Stream st, CollectiveKind k, std::int64_t bytes, int mb,
                    std::vector<TaskId> deps, CommGroup group);

  /// Bytes of autocast's weight casts in one pass of layer `l` (amp_* with fp32 parameters: Composer's DEFAULT
  /// mixed precision, FSDP without param_dtype): Builder::autocast_numel x AUTOCAST_CAST_BYTES_PER_ELEM, as DDP's
  /// (docs/ddp.md "Autocast"). Time only: the casts' memory is not counted here; added to the layer's compute task,
  /// priced by the compute model under the copies mechanism (off: the bytes cost nothing).
  double autocast_bytes(int l) const;

  /// A GPU kernel outside the layers (copy-out, copy-in, casts): one fused pass over `mem` bytes.
  TaskId compute_task(std::string name, Phase ph, double mem, int mb, std::vector<TaskId> deps,
                      Stream st = Stream::COMPUTE);

  /// The pending waits of the all-gather streams (wait_stream / wait_event), taken by the next task issued
  /// on them; stream order carries them to every later one.
  void take_ag_deps(std::vector<TaskId>& deps);

  // ---- FSDP1 rate limiter (§2.1) ----
  void limiter_pop();
  void limiter_push(TaskId by);

  /// FSDP1 `_unshard` (pre-unshard, rate limiter, all-gather) / FSDP2 `FSDPParamGroup.unshard` (§2, §8).
  void unshard(int u, const char* pass);

  /// FSDP2 `wait_for_unshard`: the copy-out on the compute stream (§8).
  void wait_for_unshard(int u, bool fwd);

  void forward_pass();

  void pre_forward(int u);

  void post_forward(int u, TaskId fwd);

  void backward_pass();

  void prefetch_backward(int u);

  void pre_backward(int u);

  void post_backward(int u, TaskId bwd);

  /// The gradient reduction of one unit and what follows it (§3 step 3, §8).
  void reduce(int u, TaskId bwd);

  /// The post-backward final callback (§3 step 4) / FSDP2 finalize_backward (§8).
  void end_of_backward();

  Builder& b_;
  Config c_;
  std::vector<Unit> units_;
  std::vector<int> unit_of_; ///< per layer, its unit (-1: none)
  std::vector<int> pre_fwd_, post_fwd_, post_fwd_index_;
  std::int64_t p_total_ = 0;           ///< P = Σ S_u
  std::vector<BufferId> sharded_grad_; ///< per unit, the accumulated fp32 gradient on the GPU (micro-step 0 -> step)
  std::vector<BufferId> host_grad_;    ///< per unit, FSDP2 + offload: the CPU gradient (micro-step 0 -> step)

  int mb_ = 0;
  std::string mbs_;
  std::vector<UnitState> us_;
  std::deque<TaskId> free_events_; ///< FSDP1 limiter queue, carried over micro-steps
  int limiter_syncs_ = 0;
  std::int64_t largest_tensor_ = 0; ///< the largest tensor the optimizer steps (its single-tensor temporary)
  std::array<TaskId, 3> last_comm_{-1, -1, -1}; ///< per CommGroup, the last collective (one NCCL stream each)
  TaskId last_compute_ = -1;
  TaskId last_reduce_ = -1;
  std::vector<TaskId> ag_deps_;        ///< pending waits of the all-gather streams
  TaskId prev_copy_out_ = -1;          ///< FSDP2 forward: the last copy-out (AllGatherState event)
  BufferId pending_fwd_output_ = -1;   ///< FSDP2 forward: the kept all-gather output
  TaskId prev_rs_ = -1;                ///< FSDP2: the previous reduce-scatter (ReduceScatterState event)
  BufferId pending_rs_input_ = -1;     ///< FSDP2: the previous reduce_scatter_input
  std::vector<BufferId> end_frees_;    ///< freed by the final callback
  std::vector<TaskId> offload_events_; ///< FSDP2: non-blocking D2H copies the final callback waits for
};

} // namespace zerosim::schedule::detail::fsdp
