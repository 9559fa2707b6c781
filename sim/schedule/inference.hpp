// Internal to the schedule component: the inference request (training.mode: inference) as a task graph.
// docs/inference.md describes the graph; docs/deepspeed-schedule.md is cited as "§n".
#pragma once

#include "schedule/schedule_builder.hpp"
#include "schedule/step_graph.hpp"

#include <vector>

namespace zerosim::schedule::detail {

/// The checks of an inference scenario (framework, stage and offload, batch keys, the workload's decode passes).
/// Throws core::UnsupportedError (DDP, FSDP, amp_* precision, offload_param below stage 3) or core::InputError.
void check_inference(const spec::Scenario& s, const workload::Workload& w, int rank, const StepOptions& opt);

/// The forward passes `passes` (inference_graph_passes) of one generate() request: stage 3 (ZeRO-Inference) fetches
/// every non-persistent parameter in every pass, from the GPU partition, the CPU or NVMe; stages 0-2 keep a replica.
void build_inference(Builder& b, const std::vector<int>& passes);

} // namespace zerosim::schedule::detail
