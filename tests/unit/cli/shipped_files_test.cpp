// Every YAML file the project ships loads and validates, and every shipped scenario's memory
// can be computed: examples cannot rot (docs/style.md §7.7).
#include "config/scenario_loader.hpp"
#include "engine/engine.hpp"
#include "metrics/run_metrics.hpp"
#include "run/memory_analysis.hpp"
#include "run/run_scenario.hpp"
#include "workload/transformer.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <limits>
#include <utility>
#include <vector>

namespace fs = std::filesystem;

namespace {

std::vector<std::string> yaml_files(const std::string& folder)
{
  std::vector<std::string> files;
  for (const auto& e : fs::directory_iterator(fs::path(ZEROSIM_SOURCE_DIR) / folder))
    if (e.is_regular_file() && e.path().extension() == ".yaml")
      files.push_back(e.path().string());
  std::sort(files.begin(), files.end());
  return files;
}

} // namespace

namespace {

/// The length of the union of [start, end) of a rank's tasks, clipped to [from, to): the time some task runs.
/// Host waits (SYNC tasks) are no work and are left out.
double union_length(const zerosim::engine::RankTimeline& r, double from, double to)
{
  std::vector<std::pair<double, double>> spans;
  for (std::size_t i = 0; i < r.graph.tasks.size(); ++i)
    if (r.graph.tasks[i].kind != zerosim::spec::TaskKind::SYNC) {
      const double a = std::max(from, r.times[i].start), b = std::min(to, r.times[i].end);
      if (b > a)
        spans.emplace_back(a, b);
    }
  std::sort(spans.begin(), spans.end());
  double total = 0, open = -1, close = -1;
  for (const auto& [a, b] : spans) {
    if (a > close) {
      total += close - open;
      open = a;
      close = b;
    } else
      close = std::max(close, b);
  }
  return total + (close - open);
}

} // namespace

TEST_SUITE("cli")
{
  TEST_CASE("shipped files: every model file loads, with a positive derived parameter count")
  {
    auto files = yaml_files("models");
    CHECK(files.size() >=
          13); // the list: GPT-3, MT-NLG, BLOOM, Llama-2 x3, Llama-3 x3, MPT x2, GPT-2 XL, paper shapes
    for (const auto& f : files) {
      CAPTURE(f);
      auto m = zerosim::config::load_model(f);
      CHECK(zerosim::workload::count_params(m) > 0);
    }
  }

  TEST_CASE("shipped files: derived parameter counts are within 1 % of the counts the models' authors publish")
  {
    // Exact published counts (docs/data-sources.md gives each source): Llama 2 and Llama 3 from the Hugging Face
    // checkpoints' parameter totals (meta-llama model cards / safetensors metadata), GPT-2 XL from OpenAI's
    // release (1,557,611,200), BLOOM from bigscience/bloom's model card (176,247,271,424).
    const std::vector<std::pair<std::string, std::int64_t>> published = {
        {"llama2-7b", 6'738'415'616}, {"llama2-13b", 13'015'864'320},  {"llama2-70b", 68'976'648'192},
        {"llama3-8b", 8'030'261'248}, {"llama3-70b", 70'553'706'496},  {"llama3-405b", 405'853'388'800},
        {"gpt2-xl", 1'557'611'200},   {"bloom-176b", 176'247'271'424},
    };
    for (const auto& [name, count] : published) {
      CAPTURE(name);
      auto m = zerosim::config::load_model(std::string(ZEROSIM_SOURCE_DIR) + "/models/" + name + ".yaml");
      const auto derived = static_cast<double>(zerosim::workload::count_params(m));
      CHECK(std::abs(derived - static_cast<double>(count)) <= 0.01 * static_cast<double>(count));
    }
    // and exactly where the format expresses the whole model (BLOOM's embedding layernorm cannot be written)
    CHECK(zerosim::workload::count_params(zerosim::config::load_model(std::string(ZEROSIM_SOURCE_DIR) +
                                                                      "/models/llama2-70b.yaml")) == 68'976'648'192);
  }

  TEST_CASE("shipped files: every node file loads")
  {
    auto files = yaml_files("topologies");
    CHECK(files.size() >= 6); // DGX-A100 40/80, H100, HGX-A100 4-GPU, DGX-2, workstation
    for (const auto& f : files) {
      CAPTURE(f);
      auto n = zerosim::config::load_node(f);
      CHECK(n.gpus > 0);
    }
  }

  TEST_CASE("shipped files: every scenario loads and has a memory report")
  {
    auto files = yaml_files("scenarios");
    CHECK(!files.empty());
    for (const auto& f : files) {
      CAPTURE(f);
      auto s = zerosim::config::load_scenario(f);
      auto r = zerosim::run::analyze_memory(s);
      CHECK(r.gpu > 0);
      CHECK(r.gpu_device >= r.gpu_reserved);
      CHECK(r.gpu_reserved >= r.gpu);
    }
  }

  TEST_CASE("shipped files: on every scenario the time breakdown sums to the step time and run agrees with memory")
  {
    // docs/scenario-format.md "Results": time_breakdown_s attributes every instant of the step to one key, idle being
    // the instants no task of the reported rank runs in. Idle is computed here apart from the metrics' priority sweep:
    // the length of the union of the rank's task intervals (every task but the host's waits), on the simulated timeline
    // plus, with accumulation reuse, one repeated window per micro-step not simulated; idle = step - that union.
    for (const auto& f : yaml_files("scenarios")) {
      CAPTURE(f);
      auto s = zerosim::config::load_scenario(f);
      if (s.training.mode == zerosim::spec::Mode::INFERENCE)
        s.inference.generate_tokens = std::min(s.inference.generate_tokens, 3); // keep the suite fast
      const auto w = zerosim::workload::build_workload(s.model, zerosim::workload::workload_options(s));
      const auto t = zerosim::run::simulate_step(s, w);
      const auto m = zerosim::metrics::compute_metrics(s, w, t);
      CHECK(m.step_time_s > 0);
      CHECK(m.breakdown.sum() == doctest::Approx(m.step_time_s).epsilon(1e-12));
      if (s.training.mode == zerosim::spec::Mode::TRAIN) {
        const auto rt =
            std::find_if(t.ranks.begin(), t.ranks.end(), [&](const auto& r) { return r.rank == m.timeline_rank; });
        REQUIRE(rt != t.ranks.end());
        const double busy =
            union_length(*rt, 0, std::numeric_limits<double>::infinity()) +
            t.reuse.repeated() * union_length(*rt, t.reuse.window_start_s, t.reuse.window_start_s + t.reuse.period_s);
        // With a pipeline a stage's idle instants are its warm-up and drain: pipeline_bubble, idle 0.
        const double idle = m.breakdown.idle + (s.pp() > 1 ? m.step_time_s - busy : 0.0);
        CHECK(idle == doctest::Approx(m.step_time_s - busy).epsilon(1e-9));
        CHECK(m.breakdown.sum() - idle == doctest::Approx(busy).epsilon(1e-9));
        if (s.pp() > 1)
          CHECK(m.breakdown.idle == 0);
      }
      // run and memory agree (docs/outputs.md §3: torch's allocated count follows host order, which the
      // engine's issue times keep): the same rank, the one with the largest peak, and the same figures.
      const auto mem = zerosim::run::analyze_memory(s);
      CHECK(m.rank == mem.rank);
      CHECK(m.memory.gpu == mem.gpu);
      CHECK(m.memory.cpu_per_node == mem.cpu_per_node);
    }
  }
}
