// From a replayed step to the figures of docs/scenario-format.md "Results": step time, tokens/s, TFLOPs
// per GPU (model and hardware), MFU and HFU, the time breakdown by its priority rule, peak memory from
// the allocation events at their simulated times, time to train and cost. No SimGrid. docs/outputs.md.
#pragma once

#include "engine/timeline.hpp"
#include "memory/memory_model.hpp"
#include "spec/scenario_spec.hpp"
#include "workload/transformer.hpp"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace zerosim::metrics {

/// The keys of time_breakdown_s, highest priority first (docs/scenario-format.md "Results").
enum class BreakdownKey { COMPUTE, OPTIMIZER, EXPOSED_COMM, EXPOSED_PCIE, EXPOSED_NVME, PIPELINE_BUBBLE, IDLE };
inline constexpr int BREAKDOWN_KEY_COUNT = 7;

/// "compute", "optimizer", "exposed_comm", "exposed_pcie", "exposed_nvme", "pipeline_bubble", "idle".
const char* to_string(BreakdownKey k);

/// The key a task's busy time counts under: COMPUTE -> compute (forward, backward, recompute and any other
/// GPU kernel but the optimizer's), COMPUTE with phase OPTIMIZER and every CPU_COMPUTE -> optimizer,
/// COLLECTIVE -> exposed_comm, COPY -> exposed_pcie, NVME_READ / NVME_WRITE -> exposed_nvme, SEND and RECV (a pipeline
/// stage's blocking transfers with its neighbours, the wait for the neighbour included) and the tied embedding's
/// all-reduce (CommGroup::EMBEDDING: the last stage waits there for the first stage's drain) -> pipeline_bubble; SYNC
/// (a host wait, no work) -> none.
std::optional<BreakdownKey> breakdown_key(const spec::Task& t);

/// time_breakdown_s: every instant of the step attributed to exactly one key, by priority
/// compute > optimizer > exposed_comm > exposed_pcie > exposed_nvme > pipeline_bubble > idle. Sums to the step time.
struct TimeBreakdown {
  double compute = 0;
  double optimizer = 0;
  double exposed_comm = 0;
  double exposed_pcie = 0;
  double exposed_nvme = 0;
  double pipeline_bubble = 0;
  double idle = 0;
  double sum() const
  {
    return compute + optimizer + exposed_comm + exposed_pcie + exposed_nvme + pipeline_bubble + idle;
  }
  double& at(BreakdownKey k);
  double at(BreakdownKey k) const;
};

/// The breakdown of one rank's step: a sweep over its tasks' [start, end) intervals (clipped to [0, step]),
/// each elementary segment going to the highest-priority key busy in it, idle when none is. `idle` is the
/// complement of the others (0 when the sweep found no idle segment), and the largest key that can takes the
/// last units in the last place, so that sum() == step_time_s exactly in floating point; the sweep's own idle
/// is checked against the complement. Throws core::InternalError for a
/// timeline that does not match its graph or a step time that is not positive.
TimeBreakdown time_breakdown(const engine::RankTimeline& r, double step_time_s);

/// The breakdown of a step replayed with accumulation reuse: the simulated timeline's, plus
/// reuse.repeated() times that of the repeated micro-step's window; sums to `step_time_s` exactly.
TimeBreakdown time_breakdown(const engine::RankTimeline& r, const engine::AccumulationReuse& reuse, double step_time_s);

/// The memory events of `r` at their simulated times: the resident set first; then every allocation at its
/// task's start and every release at its task's end; at equal times releases come before allocations, then
/// issue order (a task's allocations, a sample of the live sums, as in issue order). A buffer released at the
/// very instant it is allocated (a zero-length task) is live only for its own task's sample. Throws
/// core::InternalError when a release precedes its allocation in time.
std::vector<memory::ReplayEvent> timed_events(const engine::RankTimeline& r);

/// Peak memory with every allocation at its task's simulated start and every release at its task's end
/// (ties: releases first). Same terms and verdicts as memory::replay_memory (issue order).
memory::MemoryReport replay_memory_timed(const spec::Scenario& s, const engine::RankTimeline& r);

/// The figures of an inference request (training.mode inference; docs/inference.md). The graph holds the prompt's
/// pass and some or all decode passes (schedule::StepOptions::sampled_decode_passes); each pass in it lasts from its
/// first task's start to the next pass's (the last: to the end of the replay), and a decode pass left out lasts the
/// linear interpolation, in its index, of the two passes in the graph around it.
struct InferenceMetrics {
  int passes = 0;                  ///< forward passes of the request: max(1, generate_tokens)
  int simulated_passes = 0;        ///< those the graph held
  std::vector<double> pass_time_s; ///< per pass, 0 .. passes - 1: simulated or interpolated
  double request_time_s = 0;       ///< Σ pass_time_s
  double prefill_time_s = 0;       ///< pass 0: the prompt's pass, which yields the first token
  double decode_time_s = 0;        ///< the decode passes together
  /// decode_time_s / (generate_tokens - 1); none with fewer than 2 generated tokens.
  std::optional<double> time_per_output_token_s;
  double tokens_per_s = 0;         ///< generated tokens of every GPU over the request time
  double prompt_tokens_per_s = 0;  ///< prompt tokens of every GPU over the prefill time
  std::int64_t kv_cache_bytes = 0; ///< per GPU (workload::Workload::kv_cache_bytes)
  /// The weights' traffic of one pass of the breakdown rank (the graph's last pass): bytes read from NVMe, copied
  /// host to GPU, and the gathered output of the parameter all-gathers.
  std::int64_t nvme_read_bytes_per_pass = 0;
  std::int64_t h2d_bytes_per_pass = 0;
  std::int64_t gather_bytes_per_pass = 0;
};

/// Pass times and throughput of an inference timeline `t` of scenario `s` (its graphs built by the schedule for
/// training.mode inference). Throws core::InternalError for a timeline without pass 0 or the last pass.
InferenceMetrics inference_metrics(const spec::Scenario& s, const engine::Timeline& t);

/// A stretch of the step the replay did not simulate, inserted into the simulated timeline (docs/outputs.md "The
/// trace"): training's micro-steps left to accumulation reuse (docs/engine.md), each one period long; inference's
/// decode passes left out of the sample, each the linear interpolation of the passes around it (docs/inference.md).
struct UnsimulatedSpan {
  double at_s = 0;       ///< the simulated time where it belongs: the first start of the next unit simulated
  double duration_s = 0; ///< what the units it stands for add to the step
  int first = 0;         ///< the first micro-step (pass) it stands for
  int last = 0;          ///< the last one (inclusive)
  /// "micro-steps 2-14 not simulated: 13 x 22.326 s period", "decode pass 2 not simulated: interpolated, 14.706 s",
  /// "decode passes A-B not simulated: N interpolated between X s and Y s, T s" (a longer gap: the times of its first
  /// and last pass, and its total)
  std::string label;
};

/// The simulated timeline placed in the real step: the spans not simulated, in time order, and the reported step
/// time (RunMetrics::step_time_s: the step, or the inference request). A task of micro-step (pass) m moves later by
/// the spans of the units before m; a task of no micro-step (the optimizer) and a resource interval by the spans at or
/// before its start. The last end so placed is the step time.
struct StepTimeMap {
  std::vector<UnsimulatedSpan> spans;
  double step_time_s = 0;
  /// How much later than its simulated time `t` a task of micro-step (pass) `micro_step` (-1: none, and resource
  /// intervals) lies in the real step: add it to the task's start and to its end.
  double shift(double t, int micro_step) const;
};

/// The map of timeline `t` (training: Timeline::reuse; inference: the passes the graph holds).
StepTimeMap step_time_map(const engine::Timeline& t);

/// One pipeline stage's figures (docs/scenario-format.md "Results", `pipeline.stages`), from its first rank.
struct StageMetrics {
  int stage = 0;
  int first_block = -1, last_block = -1; ///< the transformer blocks it runs, inclusive (-1: none)
  double busy_s = 0; ///< the step less its pipeline_bubble (its waits on neighbours, its warm-up and drain)
  double pipeline_bubble_s = 0;
  std::int64_t peak_memory_bytes = 0; ///< its GPU peak (allocated, torch's max_memory_allocated)
  std::int64_t p2p_bytes = 0;         ///< bytes its rank sends and receives to and from its neighbours in a step
};

/// With pipeline parallelism: each stage's figures and the bubble fraction, the mean over stages of
/// pipeline_bubble / step time.
struct PipelineMetrics {
  double bubble_fraction = 0;
  std::vector<StageMetrics> stages;
  int peak_stage = 0; ///< the stage whose GPU peak `peak_memory_bytes` reports (the largest; lowest on ties)
};

struct RunMetrics {
  double step_time_s = 0;
  int micro_steps = 0;
  double tokens_per_s = 0;
  double samples_per_s = 0;
  double tflops_model = 0; ///< per GPU (docs/scenario-format.md)
  double tflops_hardware = 0;
  double mfu = 0;
  double hfu = 0;
  double peak_flops = 0; ///< the dense peak MFU is taken against, per GPU (FLOP/s)
  /// The global rank `memory` is of: the largest GPU peak over every rank (on ties the lowest of
  /// Timeline::memory_ranks, as `zerosim memory` reports).
  int rank = 0;
  /// The simulated rank with the largest GPU peak (lowest on ties): `breakdown`, `memory_device_time` and
  /// `peak_time_s` are of it (= `rank` unless that rank was not simulated).
  int timeline_rank = 0;
  TimeBreakdown breakdown; ///< of timeline_rank
  /// The contract's memory: allocation events in host order (torch's max_memory_allocated), the rank with the
  /// largest GPU peak among the simulated ranks and schedule::memory_ranks (in the symmetric replay, the ranks
  /// off node 0 whose allocations can differ are replayed from their own graphs); the same figures
  /// `zerosim memory` gives for that rank.
  memory::MemoryReport memory;
  double peak_time_s = 0; ///< when timeline_rank's host issues the task named memory.peak_task (simulated time)
  /// Device-time view (replay_memory_timed): each buffer from its allocating task's start to its freeing task's
  /// end. What the GPU holds at once when streams overlap; a diagnostic beside `memory`.
  memory::MemoryReport memory_device_time;
  std::optional<double> time_to_train_s;
  std::optional<double> cost_per_step;
  std::optional<double> cost_to_train;
  std::vector<std::string> warnings; ///< the scenario's, then the metrics' own
  /// training.mode inference: the request's figures. step_time_s is then the request (prefill + decode),
  /// micro_steps its forward passes, tokens_per_s the generated tokens per second of every GPU, samples_per_s the
  /// sequences completed per second; TFLOPs, MFU and HFU count the forward FLOPs of every pass (no recompute:
  /// hardware = model); time_to_train_s is none.
  std::optional<InferenceMetrics> inference;
  std::optional<PipelineMetrics> pipeline; ///< with training.pipeline_parallel > 1
};

/// Every figure of the result. Throws core::InternalError for an empty timeline or a step time that is not
/// positive, core::InputError when the GPU has no dense peak for the training precision.
RunMetrics compute_metrics(const spec::Scenario& s, const workload::Workload& w, const engine::Timeline& t);

} // namespace zerosim::metrics
