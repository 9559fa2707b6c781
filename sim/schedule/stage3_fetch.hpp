// Internal to the schedule component: what ZeRO stage 3's training step (stage3.cpp) and ZeRO-Inference
// (inference.cpp) share: the partitioning with its persistent parameters (zero-schedule.md §5.1) and the parameter
// coordinator's waits and prefetch queue (§5.3, partitioned_param_coordinator.py).
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

/// Stage 3's partitioning (§5.1): every param padded to a multiple of N, ⌈n/N⌉ elements per rank; persistent params
/// (mark_persistent_parameters): numel <= stage3_param_persistence_threshold while the running total stays <=
/// stage3_model_persistence_threshold.
struct Stage3Partition {
  std::vector<std::int64_t> part; ///< per param: its partition's elements on each rank
  std::vector<char> persistent;   ///< per param: kept gathered on the GPU
};
Stage3Partition stage3_partition(const Builder& b);

/// The coordinator state both builders keep per param and per step (§5.2-§5.4), with the two steps of
/// fetch_sub_module they share. The prefetch queue is the forward-then-backward trace as (position, param) entries.
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
  void pop_queue_to(std::size_t end, const std::vector<int>& entry_param, const std::vector<int>& entry_pos);
  /// The module's params not available yet, each once, in order.
  std::vector<int> missing(const std::vector<int>& params) const;
  /// Waits for the module's in-flight params (§5.3 step 2): before each wait, with more than
  /// MAX_ONGOING_FETCH_EVENTS outstanding, the host synchronises on the oldest (a SYNC task named
  /// `prefix.fetch_backpressure.k` of step `step`), so the host stays a few waits ahead of the compute stream.
  void wait_inflight(Builder& b, const std::vector<int>& params, const std::string& prefix, int step);
  /// The prefetch (§5.3 step 3): pops the queue while the numel taken stays below `cap`, stopping before an entry
  /// for which `stop(param)` holds (NVMe partitions have a prefetch path of their own); returns the params to
  /// gather, each once.
  std::vector<int> prefetch(const Builder& b, const std::vector<int>& entry_param, const std::vector<int>& entry_pos,
                            std::int64_t cap, const std::function<bool(std::size_t)>& stop);
};

} // namespace zerosim::schedule::detail
