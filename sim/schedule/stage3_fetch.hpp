// Internal to the schedule component: what ZeRO stage 3's training step (stage3.cpp) and ZeRO-Inference
// (inference.cpp) share: the partitioning with its persistent parameters (docs/deepspeed-schedule.md §5.1) and the
// parameter coordinator's waits and prefetch queue (§5.3, partitioned_param_coordinator.py).
#pragma once

#include "schedule/schedule_builder.hpp"

#include <array>
#include <cstdint>
#include <deque>
#include <functional>
#include <string>
#include <vector>

namespace zerosim::schedule::detail {

/// `__max_ongoing_fetch_events` (partitioned_param_coordinator.py, §5.3 step 2).
inline constexpr std::size_t MAX_ONGOING_FETCH_EVENTS = 2;

/// The coordinator's host (Python) time per module hook: fetch_sub_module (pre-forward / pre-backward) and
/// release_sub_module (post-forward / post-backward) bookkeeping of a leaf module with parameters
/// (parameter_offload.py hooks, partitioned_param_coordinator.py). Prior, not fitted to the validation rows: BELLE
/// issue #402 (github.com/LianjiaTech/BELLE/issues/402, DeepSpeed 0.9, 2 x TITAN RTX, BLOOM-560M, batch 1) measured
/// "ZeRO Stage=2: bloom 560M, max长度512 ... 训练速度6.8batch/s" and "ZeRO Stage=3: bloom 560M, max长度512 ...
/// 训练速度2.6batch/s" (and 2.6 at length 1024: stage 3 did not slow with twice the tokens, it was not compute-bound).
/// Stage 3's excess, 1/2.6 - 1/6.8 = 238 ms per step, over BLOOM-560M's 147 parameter modules (24 x 6 + 3) x 4 hooks
/// = 588 hook calls and about 194 fetch calls (97 non-persistent modules, forward and backward) is at most 0.30 ms per
/// call; about half of the excess is the two PCIe all-gathers of 1.1 GB (forward, backward) that stage 2 has not,
/// so the prior is half the bound: 0.15 ms per hook and per fetch call.
inline constexpr double ZERO3_HOOK_HOST_S = 150e-6;
/// The host time of one all_gather_coalesced call beyond its hook (the flat buffer, the partitions' cat, the launch,
/// the handle; the wait-side materialising cat): same source and derivation as ZERO3_HOOK_HOST_S.
inline constexpr double ZERO3_FETCH_HOST_S = 150e-6;

/// Per-leaf-module compute of a layer (spec::Mechanisms::per_module_fetch): the layer's ops cut at its modules' own
/// ops (the op named as the module: a Linear's GEMM, a norm's kernel). Forward part k runs module k's op and the
/// parameter-less ops after it (attention core, activation, residual), up to module k+1's op; backward part k (issued
/// from the last module to the first) runs the backward of module k's op and of the parameter-less ops before it, so
/// that each part starts with the op whose hook fetched its module. `split` is false (one task per layer) when the
/// layer has no module or an op named as a module is missing or out of order.
struct LayerParts {
  bool split = false;
  std::vector<std::array<int, 2>> fwd; ///< per module, in forward order
  std::vector<std::string> names;      ///< per module, in forward order (the module's name in its layer)
  std::vector<std::array<int, 2>> bwd; ///< per module, in backward (issue) order
  std::vector<std::string> bwd_names;  ///< per module, in backward order
};
std::vector<LayerParts> stage3_layer_parts(const Builder& b);

/// Stage 3's partitioning (§5.1): every param padded to a multiple of N, ⌈n/N⌉ elements per rank; persistent params
/// (mark_persistent_parameters): numel <= stage3_param_persistence_threshold while the running total stays <=
/// stage3_model_persistence_threshold.
struct Stage3Partition {
  std::vector<std::int64_t> part; ///< per param: its partition's elements on each rank
  std::vector<char> persistent;   ///< per param: kept gathered on the GPU
};
Stage3Partition stage3_partition(const Builder& b);

/// A trace's prefetch-queue entries (§5.2): per position (module occurrence) its params as (position, param) entries,
/// and the ds_numel summed over the positions before each, which the reuse distance (§5.4) measures.
struct TraceEntries {
  std::vector<std::size_t> begin{0};         ///< per position its first entry, then one past the last entry
  std::vector<int> param;                    ///< per entry, its param
  std::vector<int> pos;                      ///< per entry, its position
  std::vector<std::int64_t> numel_before{0}; ///< per position k (and one past the last), Σ numel of positions < k

  /// Appends the next position, using `params`.
  void add(const Builder& b, const std::vector<int>& params);
};

/// The coordinator state both builders keep per param and per step (§5.2-§5.4), with the two steps of
/// fetch_sub_module they share. The prefetch queue is the trace's entries (TraceEntries).
struct FetchCoordinator {
  std::vector<char> available;     ///< per param: gathered (ZeroParamStatus AVAILABLE or INFLIGHT)
  std::vector<char> inflight;      ///< per param: gathered by a call its module has not waited on yet
  std::vector<TaskId> gathered_by; ///< per param: the task that made it available
  std::vector<int> most_recent;    ///< __most_recent_step_id_param_fetched_for (trace position)
  std::int64_t n_available = 0;    ///< Σ numel of available params (__n_available_params)
  std::size_t queue = 0;           ///< __param_queue head (index into the trace entries)
  /// __ongoing_fetch_events (§5.3 step 2): per wait, the event recorded on the compute stream after it; it
  /// completes when the waited gather and the compute issued before it have. Not reset between micro-steps.
  std::deque<std::array<TaskId, 2>> fetch_events;
  TaskId last_compute = -1; ///< the last forward/backward issued (the compute stream's position)
  int syncs = 0;            ///< back-pressure waits so far (names)

  /// Pops the queue up to entry `end` (the entries of the module being fetched), recording each param's position.
  void pop_queue_to(std::size_t end, const TraceEntries& entries);
  /// The module's params not available yet, each once, in order.
  std::vector<int> missing(const std::vector<int>& params) const;
  /// Waits for the module's in-flight params (§5.3 step 2): before each wait, with more than
  /// MAX_ONGOING_FETCH_EVENTS outstanding, the host synchronises on the oldest (a SYNC task named
  /// `prefix.fetch_backpressure.k` of step `step`), so the host stays a few waits ahead of the compute stream.
  void wait_inflight(Builder& b, const std::vector<int>& params, const std::string& prefix, int step);
  /// The prefetch (§5.3 step 3): pops the queue while the numel taken stays below `cap`, stopping before an entry
  /// for which `stop(param)` holds (NVMe partitions have a prefetch path of their own); returns the params to
  /// gather, each once.
  std::vector<int> prefetch(const Builder& b, const TraceEntries& entries, std::int64_t cap,
                            const std::function<bool(std::size_t)>& stop);
};

} // namespace zerosim::schedule::detail
