// Properties over randomly drawn valid scenarios: relations that must hold whatever the configuration, each stated
// with the generator's ranges. The draws are from a fixed seed, so a failure names a scenario that reproduces.
//
// The generator starts from the default scenario (scenarios/llama2-70b-8xa100-200gbps.yaml) and draws, uniformly:
//   model                       llama2-7b, llama2-13b
//   cluster.nodes               1, 2 (4 A100-80GB per node, one 200 Gb/s NIC)
//   training.micro_batch        1, 2, 4
//   training.grad_accum         1, 2, 4
//   training.activation_checkpointing  none, full
//   deepspeed ZeRO stage        0, 1, 2, 3
//   optimizer offload           none, cpu (cpu only with stages 1-3, as DeepSpeed allows)
#include "config/scenario_loader.hpp"
#include "report/run_report.hpp"
#include "run/run_scenario.hpp"
#include "schedule/step_graph.hpp"
#include "spec/task_graph.hpp"
#include "sweep/sweep.hpp"
#include "workload/transformer.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

namespace {

using namespace zerosim;

const std::string SCENARIO = std::string(ZEROSIM_SOURCE_DIR) + "/scenarios/llama2-70b-8xa100-200gbps.yaml";
constexpr int DRAWS = 8;

/// The --set lines of one draw.
std::vector<std::string> draw(std::mt19937& rng)
{
  const auto pick = [&](std::vector<std::string> options) {
    return options[std::uniform_int_distribution<std::size_t>(0, options.size() - 1)(rng)];
  };
  const std::string stage = pick({"0", "1", "2", "3"});
  const std::string offload = stage == "0" ? "none" : pick({"none", "cpu"});
  return {"model=" + pick({"llama2-7b", "llama2-13b"}),
          "cluster.nodes=" + pick({"1", "2"}),
          "training.micro_batch=" + pick({"1", "2", "4"}),
          "training.grad_accum=" + pick({"1", "2", "4"}),
          "training.activation_checkpointing=" + pick({"none", "full"}),
          "deepspeed.zero_optimization.stage=" + stage,
          "deepspeed.zero_optimization.offload_optimizer.device=" + offload,
          "deepspeed.zero_optimization.offload_param.device=none"};
}

spec::Scenario load(std::vector<std::string> sets)
{
  config::LoadOptions o;
  o.sets = std::move(sets);
  return config::load_scenario(SCENARIO, o);
}

std::string joined(const std::vector<std::string>& sets)
{
  std::string out;
  for (const std::string& s : sets)
    out += (out.empty() ? "" : " ") + s;
  return out;
}

/// The largest live sum of rank 0's model states on its GPU (parameters, gradients, optimizer states), replayed in
/// issue order from the schedule's graph (each task's allocations, then its frees): apart from memory::.
std::int64_t peak_model_states(const spec::Scenario& s)
{
  const workload::Workload w = workload::build_workload(s.model, workload::workload_options(s));
  const spec::TaskGraph g = schedule::build_step_graph(s, w, 0);
  const auto counted = [&](spec::BufferId id) {
    const spec::Buffer& b = g.buffers[static_cast<std::size_t>(id)];
    const bool state = b.category == spec::MemCategory::PARAMS || b.category == spec::MemCategory::GRADS ||
                       b.category == spec::MemCategory::OPTIMIZER;
    return b.device == spec::Device::GPU && state ? b.bytes : 0;
  };
  std::int64_t live = 0;
  for (spec::BufferId id : g.resident)
    live += counted(id);
  std::int64_t peak = live;
  for (const spec::Task& t : g.tasks) {
    for (spec::BufferId id : t.allocs)
      live += counted(id);
    peak = std::max(peak, live);
    for (spec::BufferId id : t.frees)
      live -= counted(id);
  }
  return peak;
}

std::string without_wall(const std::string& csv)
{
  // wall_s is the last column (docs/sweep.md): each line up to its last comma.
  std::istringstream in(csv);
  std::string line, out;
  while (std::getline(in, line))
    out += line.substr(0, line.rfind(',')) + "\n";
  return out;
}

std::string slurp(const std::filesystem::path& p)
{
  std::ifstream in(p, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

} // namespace

TEST_SUITE("properties")
{
  // Twice the NIC, NVLink and PCIe bandwidth gives every flow at least the share it had (max-min sharing on the same
  // routes), so the step can only shorten; 1 % allows for the replay's accumulation-reuse period, measured anew.
  TEST_CASE("properties: more link bandwidth never slows a step by more than 1 %")
  {
    std::mt19937 rng(2026);
    for (int i = 0; i < DRAWS; ++i) {
      std::vector<std::string> sets = draw(rng);
      CAPTURE(joined(sets));
      const spec::Scenario base = load(sets);
      const double slow = run::run_scenario(base).metrics.step_time_s;
      sets.push_back("cluster.network.nic_bandwidth=" + std::to_string(2 * base.cluster.network.nic_bandwidth_Bps) +
                     " B/s");
      sets.push_back(
          "cluster.overrides.nvlink.bandwidth=" + std::to_string(2 * base.cluster.node.nvlink.bandwidth_Bps) + " B/s");
      sets.push_back("cluster.overrides.pcie.bandwidth=" + std::to_string(2 * base.cluster.node.pcie.bandwidth_Bps) +
                     " B/s");
      const spec::Scenario faster_links = load(sets);
      REQUIRE(faster_links.cluster.network.nic_bandwidth_Bps ==
              doctest::Approx(2 * base.cluster.network.nic_bandwidth_Bps));
      const double fast = run::run_scenario(faster_links).metrics.step_time_s;
      CHECK(fast <= slow * 1.01);
    }
  }

  // ZeRO's stages partition more of the model states at each step up (1: optimizer states, 2: + gradients, 3: +
  // parameters, gathered a layer at a time), so the peak of what rank 0's GPU holds of them never grows with the stage.
  TEST_CASE("properties: a higher ZeRO stage never raises peak GPU model-state memory")
  {
    std::mt19937 rng(7);
    for (int i = 0; i < DRAWS; ++i) {
      std::vector<std::string> sets = draw(rng);
      sets[6] = "deepspeed.zero_optimization.offload_optimizer.device=none"; // the same placement at every stage
      std::int64_t previous = -1;
      for (const char* stage : {"0", "1", "2", "3"}) {
        sets[5] = std::string("deepspeed.zero_optimization.stage=") + stage;
        CAPTURE(joined(sets));
        const std::int64_t peak = peak_model_states(load(sets));
        CHECK(peak > 0);
        if (previous >= 0)
          CHECK(peak <= previous);
        previous = peak;
      }
    }
  }

  // The sweep's files are the same bytes (wall_s apart) whatever the number of worker processes.
  TEST_CASE("properties: the same input gives byte-identical results whatever the worker count")
  {
    namespace fs = std::filesystem;
    const fs::path base = fs::path(ZEROSIM_BINARY_DIR) / "tests-tmp" / "properties-workers";
    fs::remove_all(base);
    std::mt19937 rng(11);
    const std::vector<std::string> sets = draw(rng);
    const std::vector<std::string> grid = {"training.micro_batch=1,2", "deepspeed.zero_optimization.stage=2,3"};
    std::string first_csv;
    for (int jobs : {1, 2, 3}) {
      CAPTURE(jobs);
      const sweep::Plan plan = sweep::make_plan(SCENARIO, sets, "", grid, sweep::Shard{});
      sweep::SweepOptions o;
      o.sweeps = grid;
      o.jobs = jobs;
      o.out_dir = (base / std::to_string(jobs)).string();
      std::ostringstream out, err;
      REQUIRE(sweep::run_sweep(plan, o, out, err) == 0);
      const std::string csv = without_wall(slurp(base / std::to_string(jobs) / "sweep.csv"));
      CHECK(csv.find("done") != std::string::npos);
      if (jobs == 1)
        first_csv = csv;
      else
        CHECK(csv == first_csv);
    }
  }
}
