// `zerosim run`'s outputs: the JSON of docs/scenario-format.md "Results" (a contract), the human summary,
// and the Chrome trace-event JSON (Perfetto): one track per GPU stream, PCIe direction, NIC, the CPU
// and NVMe device. docs/outputs.md.
#pragma once

#include "core/json.hpp"
#include "engine/timeline.hpp"
#include "run/run_scenario.hpp"
#include "spec/scenario_spec.hpp"
#include "workload/transformer.hpp"

#include <ostream>
#include <string>
#include <vector>

namespace zerosim::report {

/// The result object, keys in the contract's order (schema_version 1), then zerosim's own keys:
/// rank, peak_task, peak_time_s, peak_memory_issue_order_bytes, peak_task_issue_order, capacity_bytes,
/// memory_model_bytes, peak_flops_per_gpu, to_fit (when it does not fit), simulation. `meta` carries
/// "replay" after the contract's keys.
core::Json run_json(const spec::Scenario& s, const run::RunResult& result);

/// `zerosim run --json`'s object on one line, of the scenario file at `path` loaded with `sets` and `calibration`
/// (config::load_scenario) and run with the engine's defaults (run::run_scenario): what a sweep point and `zerosim
/// compare` simulate.
std::string run_json_line(const std::string& path, const std::vector<std::string>& sets,
                          const std::string& calibration);

/// The summary for people: the verdict and the ladder first when it does not fit, then step time, tokens/s,
/// TFLOPs (model and hardware), MFU, HFU, peak memory and capacities, the time breakdown, the replay, time to
/// train and cost, warnings.
void write_run_summary(std::ostream& out, const spec::Scenario& s, const run::RunResult& result);

/// The trace's name of a stream: "compute stream", "reduction_stream", "allgather stream",
/// "reduce_and_partition_stream", "host (Python thread)", "aio (NVMe)".
const char* stream_name(spec::Stream st);

/// The trace's category of a task kind: "compute", "collective", "copy", "nvme_read", "nvme_write", "cpu_compute",
/// "sync".
const char* kind_name(spec::TaskKind k);

/// Chrome trace-event JSON object {"traceEvents": [...], "displayTimeUnit": "ms", "otherData": {...}},
/// deterministic: a process per simulated rank (a thread per stream it uses) and per Track::process (a
/// thread per track); complete ("X") events in microseconds for every task and every interval. Intervals
/// that overlap on one track are spread over extra threads ("name #2", ...) so that every thread's events
/// nest, as Perfetto requires.
void write_trace(std::ostream& out, const spec::Scenario& s, const engine::Timeline& t);

} // namespace zerosim::report
