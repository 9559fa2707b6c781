// A pipeline stage's activation memory (issue 32, docs/pipeline-parallel.md §7): the first stage holds the kept
// activations of p micro-batches under 1F1B (min(p - s, m) on stage s) and of all m under GPipe. Measured on the
// stage-0 graph of a small GPT, p = 4 stages of one GPU, m = 8 micro-batches, by walking its tasks in issue order.
#include "config/scenario_loader.hpp"
#include "schedule/pipeline_partition.hpp"
#include "schedule/step_graph.hpp"
#include "workload/transformer.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <string>
#include <vector>

using namespace zerosim;

namespace {

spec::Scenario small_pipeline(const std::string& schedule)
{
  return config::load_scenario_text("name: pipeline memory\n"
                                    "model: {name: tiny, layers: 8, hidden: 1024, heads: 16, vocab: 32000, "
                                    "tied_embeddings: true, norm: layernorm, position: learned, max_position: 1024}\n"
                                    "cluster: {node: dgx-a100-80gb, nodes: 1, gpus_per_node: 4}\n"
                                    "training: {seq_len: 1024, micro_batch: 1, grad_accum: 8, precision: bf16, "
                                    "activation_checkpointing: full, pipeline_parallel: 4, pipeline: {schedule: " +
                                        schedule +
                                        "}}\n"
                                        "deepspeed_version: \"0.16\"\n"
                                        "deepspeed: {zero_optimization: {stage: 0}}\n",
                                    "pipeline-memory.yaml");
}

/// The most bytes of ACTIVATIONS buffers alive at once over the graph's tasks in issue order.
std::int64_t activation_peak(const spec::TaskGraph& g)
{
  std::int64_t live = 0, peak = 0;
  for (const spec::Task& t : g.tasks) {
    for (spec::BufferId b : t.allocs)
      if (g.buffers[static_cast<std::size_t>(b)].category == spec::MemCategory::ACTIVATIONS)
        live += g.buffers[static_cast<std::size_t>(b)].bytes;
    peak = std::max(peak, live);
    for (spec::BufferId b : t.frees)
      if (g.buffers[static_cast<std::size_t>(b)].category == spec::MemCategory::ACTIVATIONS)
        live -= g.buffers[static_cast<std::size_t>(b)].bytes;
  }
  return peak;
}

} // namespace

TEST_CASE("pipeline memory: stage 0 holds p micro-batches' activations under 1F1B and m under GPipe")
{
  const int p = 4, m = 8;
  const spec::Scenario one = small_pipeline("1f1b");
  const spec::Scenario gpipe = small_pipeline("gpipe");
  const workload::Workload w = workload::build_workload(one.model, workload::workload_options(one));
  // Per micro-batch, what stage 0's layers keep for their backward (K), and the largest transient of one of its
  // layers (the recompute-and-backward or forward working set), which comes on top of the kept ones at the peak.
  const schedule::StageLayers sl = schedule::stage_layers(one, w).front();
  std::int64_t K = 0, working = 0;
  for (int l = sl.first; l < sl.end; ++l) {
    const workload::Layer& layer = w.layers[static_cast<std::size_t>(l)];
    K += layer.activation_bytes_kept;
    working = std::max({working, layer.activation_bytes_backward_working, layer.activation_bytes_forward_working});
  }
  REQUIRE(K > 0);
  const std::int64_t a = activation_peak(schedule::build_step_graph(one, w, 0));
  const std::int64_t b = activation_peak(schedule::build_step_graph(gpipe, w, 0));
  CHECK(a >= p * K);
  CHECK(a <= p * K + working);
  CHECK(b >= m * K);
  CHECK(b <= m * K + working);
  // The last stage holds one micro-batch under 1F1B (min(p - s, m) = 1).
  const schedule::StageLayers last = schedule::stage_layers(one, w).back();
  std::int64_t K3 = 0, working3 = 0;
  for (int l = last.first; l < last.end; ++l) {
    const workload::Layer& layer = w.layers[static_cast<std::size_t>(l)];
    K3 += layer.activation_bytes_kept;
    working3 = std::max({working3, layer.activation_bytes_backward_working, layer.activation_bytes_forward_working});
  }
  const std::int64_t c = activation_peak(schedule::build_step_graph(one, w, 3));
  CHECK(c >= K3);
  CHECK(c <= K3 + working3);
}

TEST_CASE("pipeline memory: every micro-batch's kept activations are freed by its own backward")
{
  // Under 1F1B stage 0 runs the forwards of p micro-batches before the first of their backwards
  // (docs/pipeline-parallel.md §7): each backward must free its own micro-batch's kept activations, so that after the
  // last backward (at the step's reductions) no activation is alive on any stage, under 1F1B and GPipe alike. (One kept
  // slot per layer, overwritten by the next forward, left micro-batch 0's allocated to the end of the step.)
  for (const std::string schedule : {"1f1b", "gpipe"}) {
    CAPTURE(schedule);
    const spec::Scenario s = small_pipeline(schedule);
    const workload::Workload w = workload::build_workload(s.model, workload::workload_options(s));
    for (int rank = 0; rank < s.pp(); ++rank) {
      CAPTURE(rank);
      const spec::TaskGraph g = schedule::build_step_graph(s, w, rank);
      std::int64_t live = 0;
      for (const spec::Task& t : g.tasks) {
        for (spec::BufferId b : t.allocs)
          if (g.buffers[static_cast<std::size_t>(b)].category == spec::MemCategory::ACTIVATIONS)
            live += g.buffers[static_cast<std::size_t>(b)].bytes;
        for (spec::BufferId b : t.frees)
          if (g.buffers[static_cast<std::size_t>(b)].category == spec::MemCategory::ACTIVATIONS)
            live -= g.buffers[static_cast<std::size_t>(b)].bytes;
      }
      CHECK(live == 0);
    }
  }
}
