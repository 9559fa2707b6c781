// `zerosim run --out DIR --plots` (docs/outputs.md "Plots"): two pictures of the step (three under a pipeline), drawn
// with gnuplot as SVG and PNG, each with its data (.dat) and script (.gp) beside it so that a user can restyle and
// redraw it:
//  - memory_over_step: torch's allocated and the caching allocator's reserved GPU memory over the step, allocated
//    stacked by what it holds, the peaks and the breakdown at the allocated peak marked, the micro-steps (decode
//    passes) not simulated shaded;
//  - micro_step_timeline: one micro-step (decode pass) of one rank, a row per stream it uses (compute, each
//    collective stream, host, NVMe aio) and per resource of its node (its PCIe directions, the NICs, its CPU work,
//    NVMe), a box per task or busy interval, at the times the trace gives them;
//  - pipeline_schedule (pipeline_parallel > 1): a row per stage, a box per micro-batch's forward and backward (the
//    recomputed forward in it) on the stage's first simulated rank, numbered by micro-batch: the 1F1B or GPipe
//    schedule and its bubble as the replay ran them.
#pragma once

#include "run/run_scenario.hpp"
#include "spec/scenario_spec.hpp"

#include <string>
#include <vector>

namespace zerosim::report {

/// One picture: its name, the files written (data, script, images) and whether gnuplot drew it.
struct StepPlot {
  std::string name;
  std::vector<std::string> files;
  bool drawn = false;
};

/// The micro-step (decode pass) the timeline draws: 1 when the step has at least three (a middle one, which every
/// micro-step left to accumulation reuse repeats: neither the first nor the last, which reduces the gradients before
/// the optimizer), else 0; 0 too when the graph holds no task of micro-step 1.
int drawn_micro_step(const engine::Timeline& t);

/// Writes both pictures' data and scripts into `dir` and runs gnuplot (found on PATH) on them; without it, or when it
/// fails, the data and scripts are still written and `notice` says so. The timeline's resource rows need the
/// timeline's tracks (engine::EngineOptions::record_tracks).
std::vector<StepPlot> write_step_plots(const std::string& dir, const spec::Scenario& s, const run::RunResult& result,
                                       std::string& notice);

} // namespace zerosim::report
