// Internal to the schedule component: DeepSpeed activation checkpointing as the builders model it, its settings and
// where each checkpointed block's checkpoint is during the step (docs/offload.md). The Builder's checkpoint_*
// functions (checkpointing.cpp) issue its tasks.
#pragma once

#include "spec/scenario_spec.hpp"
#include "spec/task_graph.hpp"
#include "workload/transformer.hpp"

#include <utility>
#include <vector>

namespace zerosim::schedule::detail {

/// DeepSpeed's activation_checkpointing block as it acts on the checkpointed transformer blocks
/// (deepspeed/runtime/activation_checkpointing/checkpointing.py; docs/offload.md): active for a DeepSpeed
/// training run with activation_checkpointing full, every BLOCK layer a deepspeed.checkpointing.checkpoint call.
struct DsCheckpointing {
  /// Where the checkpoints (the block inputs) go with cpu_checkpointing.
  enum class Copy {
    NONE,     ///< they stay on the GPU
    BLOCKING, ///< `.to('cpu')` / `.cpu()` into pageable memory before the block's forward, `.to(cuda)` before its
              ///< recompute, on the compute stream, each a host wait (0.16; 0.19 with partition_activations)
    ASYNC,    ///< 0.19 without partition_activations: the _ActivationOffloadEngine (pinned, non-blocking)
  };
  bool active = false;
  Copy copy = Copy::NONE;
  bool contiguous = false; ///< contiguous_memory_optimization: number_checkpoints slots at the first block
  int slots = 0;           ///< number_checkpoints
  bool synchronize = false;
  bool profile = false;
};

/// checkpointing.py `_get_cpu_offload_engine`: `_ActivationOffloadEngine(keep_last_count=1, min_offload_bytes=0)`
/// with offload_activations.py's other defaults: the newest checkpoint stays on the GPU; an offloaded one keeps
/// its GPU copy until `max_fwd_stash_count` = 2 newer checkpoints were registered.
inline constexpr int ACT_OFFLOAD_KEEP_LAST = 1;
inline constexpr int ACT_OFFLOAD_FWD_STASH = 2;
/// The stream of the async engine's copies: DeepSpeed issues them on a side stream of its own (`s1`, which
/// waits for the compute stream before each D2H), so their PCIe time overlaps compute.
inline constexpr spec::Stream ACT_OFFLOAD_STREAM = spec::Stream::ACTIVATION_OFFLOAD;

/// One rank's activation checkpointing over the step: the settings (DsCheckpointing), which layers are checkpointed,
/// and per checkpointed layer where its checkpoint is between its forward and its backward.
struct CheckpointState {
  CheckpointState() = default;
  /// The settings of scenario `s` over the layers of `w` (`v016`: DeepSpeed 0.16's blocking copies). Throws
  /// core::InputError when contiguous slots are fewer than the checkpointed blocks.
  CheckpointState(const spec::Scenario& s, const workload::Workload& w, bool v016);

  /// Whether `layer` is checkpointed.
  bool on(int layer) const { return config.active && slot[static_cast<std::size_t>(layer)] >= 0; }

  DsCheckpointing config;
  std::vector<int> slot;                  ///< per layer: its checkpoint index (block order), -1 if not checkpointed
  std::vector<int> layers;                ///< the checkpointed layers in forward order
  std::vector<char> fwd_begun;            ///< per layer: checkpoint_forward_begin ran for the coming forward
  std::vector<char> bwd_begun;            ///< per layer: checkpoint_backward_begin ran for the coming backward
  std::vector<spec::BufferId> host;       ///< per layer: the checkpoint's host copy (this micro-step)
  std::vector<spec::TaskId> d2h;          ///< per layer: the D2H that wrote it
  std::vector<spec::BufferId> input;      ///< per layer: the GPU block input a blocking D2H copied (freed by the fwd)
  std::vector<std::pair<int, int>> keep;  ///< async engine: (id, layer) registered, not offloaded yet
  std::vector<std::pair<int, int>> stash; ///< async engine: (id, layer) offloaded, GPU copy still held
  int next_id = 0;                        ///< async engine: the id of the next checkpoint registered
  int slots_mb = -1;                      ///< the micro-step whose contiguous slots are allocated
  spec::BufferId unused_slots = -1;       ///< the slots beyond the checkpointed blocks, freed at the first backward
  std::vector<spec::TaskId> pending_deps; ///< what the coming recompute waits for (H2D, stash D2H)
  std::vector<spec::BufferId> pending_frees; ///< freed by the coming recompute (or backward) task
};

} // namespace zerosim::schedule::detail
