// The schedule's entry point for every framework: the task graph of one optimizer step (or inference request) of a
// rank, from DeepSpeed ZeRO 0-3 with its offloads (docs/deepspeed-schedule.md §1-§10, §12), DDP, FSDP1/2 or
// ZeRO-Inference, dispatched to their builders (stage*.cpp, ddp.cpp, fsdp*.cpp, inference.cpp). Every rule that is not
// obvious cites its section.
#pragma once

#include "spec/scenario_spec.hpp"
#include "spec/task_graph.hpp"
#include "workload/transformer.hpp"

#include <vector>

namespace zerosim::schedule {

/// Decode passes an inference graph holds when the request has more (StepOptions::sampled_decode_passes;
/// docs/inference.md "Sampled decode passes": the interpolation it implies stays within 1e-3 of simulating every
/// pass on the tested cases).
inline constexpr int INFERENCE_SAMPLED_DECODE_PASSES = 16;
/// Micro-steps built under accumulation reuse (the engine times them, run::simulate_step; the memory replay takes its
/// peak over them, run::analyze_memory, as the middle micro-steps allocate and free alike): the first (it differs:
/// first gradient allocations, the stage-3 trace), one repeated micro-step (its start-to-start span is the period), and
/// the last (the reduction and the step follow it). A step of at most this many micro-steps is simulated whole. The
/// repeated micro-step still carries the first one's tail (ZeRO-2 with its reductions on the compute stream: its span
/// is 1.2e-4 shorter than the settled one two micro-steps later); the cost of simulating that settling (2 more
/// micro-steps) is 5/3 of this replay's, and the error it removes is below 1e-3 of the step (tested).
inline constexpr int REUSE_SIMULATED_MICRO_STEPS = 3;
/// Under a 1F1B pipeline of p stages the micro-batches repeat only in the steady state, once the first backward has
/// come back to stage 0 (its forward of micro-batch p waits for it) and before stage 0's last forward (the drain follows
/// it): the graph holds the first p + PIPELINE_REUSE_SETTLE micro-batches, the last labelled as the step's last, and
/// the engine's period is the span between stage 0's forwards of the last two (docs/engine.md "Accumulation reuse
/// under a pipeline"). Tested against every micro-batch simulated (tests/unit/engine/pipeline_reuse_test.cpp).
inline constexpr int PIPELINE_REUSE_SETTLE = 4;

/// The micro-steps a training step of `s` is built with under accumulation reuse (StepOptions::simulated_micro_steps):
/// REUSE_SIMULATED_MICRO_STEPS without a pipeline, p + PIPELINE_REUSE_SETTLE under 1F1B, 0 (every one) when the step
/// has no more than that, under GPipe (every forward precedes every backward: nothing repeats alike, and its memory
/// grows with the micro-batches) and in inference.
int reused_micro_steps_to_build(const spec::Scenario& s);

/// Which optimizer step of the run the graph describes.
struct StepOptions {
  /// false (default): a steady-state step, what a measurement at iteration k > 1 sees. The stage-3
  /// trace is COMPLETE in every micro-step, micro-step 0 included: it is frozen at the 2nd
  /// `reset_step` of the run and neither `step()` (`_pre_step`, `_partition_all_parameters` ->
  /// `release_and_reset_all`) nor the next forward invalidates it (docs/deepspeed-schedule.md §5.2).
  /// true: the run's first step; stage-3 micro-step 0 RECORDs the trace (no prefetch, no reuse).
  bool first_step = false;
  /// Accumulation reuse (run::simulate_step): when > 0 and below training.grad_accum, the graph holds only
  /// this many micro-steps (at least 3): the first ones keep their indices, the last is labelled as the
  /// step's last (spec::shift_micro_steps). 0: every micro-step.
  int simulated_micro_steps = 0;
  /// Inference (training.mode inference, docs/inference.md): when the request has more decode passes than this,
  /// the graph holds the prompt's pass and this many decode passes, evenly spaced from the first to the last
  /// (inference_graph_passes); metrics interpolate the others linearly. 0: every pass. Otherwise at least 2.
  int sampled_decode_passes = INFERENCE_SAMPLED_DECODE_PASSES;
};

/// The ranks among which the largest peak memory lies. ZeRO-1/2: each rank's partition boundary cuts the flat
/// buffer at a different tensor, so its gradient buffer and buckets differ; the ranks no other rank dominates
/// (detail::stage12_memory_dp_ranks, docs/schedule.md "Ranks that can differ"), a handful whatever N. Otherwise 0
/// and dp-1 (ZeRO-3, FSDP shard every tensor or unit evenly with padding; DDP and ZeRO-0 replicate: only the last
/// rank could differ). Metrics take the peak over these and the simulated ranks.
std::vector<int> memory_ranks(const spec::Scenario& s, const workload::Workload& w);

/// Whether the step graphs of two ranks can differ beyond TaskGraph::rank: true only for DeepSpeed ZeRO-1/2 training,
/// whose ranks each own another cut of the flat buffer. Otherwise every rank runs the same program (ZeRO-0/3, FSDP and
/// DDP pad every shard to one size; tensor-parallel shards are equal), and the engine builds one graph and copies it.
bool graph_depends_on_rank(const spec::Scenario& s);

/// Whether every node of `s` issues the same communications as the other nodes of its pipeline stage, which the
/// symmetric replay assumes (spec::same_communications, docs/engine.md "Nodes alike"): empty when they do, else why
/// not. Decided from what shapes a node's program, without building a graph (constant cost at any scale): its ranks'
/// positions in every communicator that reads one (the tensor-parallel rank, local % t, the same on every node when t
/// divides gpus_per_node; the data-parallel position reads only ZeRO-1/2's partition cut, which moves local work, not
/// communications), their pipeline stage (the nodes of one stage alike when a stage fills whole nodes or a slice of
/// one; different stages differ, and the symmetric replay simulates the first node of each: docs/engine.md "Pipelines:
/// the node-set replay") and the node's place in the fabric (one switch with one uplink per NIC: every node alike).
/// tests/unit/schedule/nodes_alike_test.cpp builds every node's graph at up to 64 GPUs and checks the answer.
std::string nodes_differ(const spec::Scenario& s);

/// The ordering policy (schedule/step_units.hpp) a training step of `s` is composed with: "sequential" without a
/// pipeline; with one, training.pipeline.schedule's ("1f1b", DeepSpeed's TrainSchedule, for auto; "gpipe"). Throws
/// core::InputError for interleaved and zero-bubble schedules (not DeepSpeed's).
std::string ordering_policy_of(const spec::Scenario& s);

/// The graph of one optimizer step (all `grad_accum` micro-steps and the step) of `rank`; for
/// `training.mode: inference` the forward passes of one generate() request (docs/inference.md): Task::micro_step
/// is the pass (0 the prompt's, t >= 1 the t-th decode pass) and TaskGraph::micro_steps the request's passes.
/// Throws core::UnsupportedError for configurations not modelled yet (DeepSpeed options listed in its checks).
spec::TaskGraph build_step_graph(const spec::Scenario& s, const workload::Workload& w, int rank = 0,
                                 const StepOptions& opt = {});

/// The forward passes of an inference request of `s`: the prompt's (prefill), which yields the first token, and
/// generate_tokens - 1 decode passes (Hugging Face generate); max(1, generate_tokens) in all.
int inference_passes(const spec::Scenario& s);

/// The passes an inference graph of `s` holds (0: the prompt's; 1 .. generate_tokens - 1: decode), ascending, under
/// StepOptions::sampled_decode_passes = `sampled`: every pass when `sampled` is 0 or the decode passes are at most
/// `sampled`; else pass 0 and the decode passes 1 + round(i·(D - 1)/(sampled - 1)), i = 0 .. sampled - 1, of the D.
/// Throws core::InternalError for `sampled` 1 or negative.
std::vector<int> inference_graph_passes(const spec::Scenario& s, int sampled);

} // namespace zerosim::schedule
