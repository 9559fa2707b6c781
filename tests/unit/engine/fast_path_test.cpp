// The fast paths of the replay (docs/design.md "Speed and scale") give the answer of the slow ones:
// accumulation reuse (four micro-steps simulated, the others one measured period each) against every
// micro-step simulated, and the symmetric replay (node 0 simulated, the rest behind its NICs) against the
// full per-rank replay. Expected values are the slow path's own figures.
#include "config/scenario_loader.hpp"
#include "engine/engine.hpp"
#include "metrics/run_metrics.hpp"
#include "run/run_scenario.hpp"
#include "workload/transformer.hpp"

#include <doctest/doctest.h>

#include <string>
#include <vector>

using namespace zerosim;

namespace {

/// `gpus_per_node` GPUs of a DGX A100 80GB per node, one 200 Gb/s NIC per 4 GPUs.
spec::Scenario job(const std::string& model, int nodes, int gpus_per_node, int grad_accum, const std::string& framework,
                   const std::string& precision = "bf16")
{
  const std::string text =
      "name: fast-path\nmodel: " + model + "\ncluster:\n  node: dgx-a100-80gb\n  nodes: " + std::to_string(nodes) +
      "\n  gpus_per_node: " + std::to_string(gpus_per_node) +
      "\n  network: {nic_bandwidth: 200 Gbps, nics_per_node: " + std::to_string(std::max(1, gpus_per_node / 4)) +
      "}\ntraining: {seq_len: 1024, micro_batch: 1, grad_accum: " + std::to_string(grad_accum) +
      ", precision: " + precision + ", activation_checkpointing: full}\n" + framework;
  return config::load_scenario_text(text, std::string(ZEROSIM_SOURCE_DIR) + "/scenarios/fast-path-test.yaml");
}

struct Run {
  engine::Timeline t;
  metrics::RunMetrics m;
};

Run replay_step(const spec::Scenario& s, const run::RunOptions& o)
{
  const workload::Workload w = workload::build_workload(s.model, workload::workload_options(s));
  Run r;
  r.t = run::simulate_step(s, w, o);
  r.m = metrics::compute_metrics(s, w, r.t);
  return r;
}

run::RunOptions options(engine::Replay replay, bool reuse)
{
  run::RunOptions o;
  o.engine.replay = replay;
  o.reuse_accumulation = reuse;
  return o;
}

const std::vector<std::pair<std::string, std::string>> FRAMEWORKS = {
    {"ZeRO-0", "deepspeed: {zero_optimization: {stage: 0}}\n"},
    {"ZeRO-1 overlap_comm", "deepspeed: {zero_optimization: {stage: 1, overlap_comm: true}}\n"},
    {"ZeRO-2", "deepspeed: {zero_optimization: {stage: 2}}\n"},
    {"ZeRO-3", "deepspeed: {zero_optimization: {stage: 3}}\n"},
    {"ZeRO-3 + CPU optimizer", "deepspeed: {zero_optimization: {stage: 3, offload_optimizer: {device: cpu}}}\n"},
    {"DDP", "ddp: {}\n"},
    {"FSDP FULL_SHARD", "fsdp: {sharding_strategy: FULL_SHARD}\n"},
    {"FSDP HYBRID_SHARD", "fsdp: {sharding_strategy: HYBRID_SHARD}\n"},
    {"FSDP2", "fsdp: {reshard_after_forward: true}\n"},
};

} // namespace

TEST_CASE("accumulation reuse gives the step of every micro-step simulated")
{
  // The middle micro-steps are the same program from the same state, so simulating 0, 1, g-1 and adding (g - 3)
  // periods reproduces the whole replay, up to the first micro-step's tail still felt by micro-step 1
  // (schedule::REUSE_SIMULATED_MICRO_STEPS): step time and each breakdown key within 3e-3 of the step; memory
  // exactly, and the peak at the same task. (1e-3 before interference, docs/engine.md "Interference": micro-step
  // 1's kernels now also lose SMs to micro-step 0's trailing reduce-scatters, which the later micro-steps do not
  // see the same way; ZeRO-2 moved 2.1e-3.)
  for (const auto& [label, fw] : FRAMEWORKS) {
    CAPTURE(label);
    const spec::Scenario s = job("gpt2-xl", 2, 4, 9, fw);
    const Run all = replay_step(s, options(engine::Replay::AUTO, false));
    const Run reused = replay_step(s, options(engine::Replay::AUTO, true));
    CHECK(all.t.reuse.repeated() == 0);
    CHECK(reused.t.reuse.simulated_micro_steps == schedule::REUSE_SIMULATED_MICRO_STEPS);
    CHECK(reused.t.reuse.repeated() == 9 - schedule::REUSE_SIMULATED_MICRO_STEPS);
    CHECK(reused.m.step_time_s == doctest::Approx(all.m.step_time_s).epsilon(3e-3));
    for (int k = 0; k < metrics::BREAKDOWN_KEY_COUNT; ++k) {
      const auto key = static_cast<metrics::BreakdownKey>(k);
      CAPTURE(metrics::to_string(key));
      CHECK(reused.m.breakdown.at(key) ==
            doctest::Approx(all.m.breakdown.at(key)).epsilon(3e-3).scale(all.m.step_time_s));
    }
    CHECK(reused.m.breakdown.sum() == reused.m.step_time_s);
    CHECK(reused.m.memory.gpu == all.m.memory.gpu);
    CHECK(reused.m.memory.cpu_per_node == all.m.memory.cpu_per_node);
    CHECK(reused.m.memory.peak_task == all.m.memory.peak_task);
    CHECK(reused.m.peak_time_s == doctest::Approx(all.m.peak_time_s).epsilon(3e-3));
  }
}

TEST_CASE("accumulation reuse: the replay's size does not grow with grad_accum")
{
  // The cost of a step is independent of grad_accum beyond a constant (docs/design.md "Speed and scale"): 8 and 512
  // micro-steps create the same SimGrid activities, and the step grows by exactly 504 periods.
  const spec::Scenario s8 = job("gpt2-xl", 1, 4, 8, FRAMEWORKS[3].second);
  const spec::Scenario s512 = job("gpt2-xl", 1, 4, 512, FRAMEWORKS[3].second);
  const Run a = replay_step(s8, {});
  const Run b = replay_step(s512, {});
  CHECK(a.t.activities == b.t.activities);
  CHECK(a.t.flows == b.t.flows);
  // The bound is SimGrid's numerical precision, not a model tolerance. Interference off, the two replays' periods
  // are identical (checked below at 1e-12). With it (docs/engine.md "Interference") the pooled SM-share executions,
  // bounded and never finishing, share every GPU with the compute under SimGrid's max-min solver, which resolves
  // shares to maxmin/precision = 1e-5 (SimGrid 3.32's default; engine.cpp replay_step() sets only network/model and
  // network/optim): the same activities then give periods 1.7e-5 apart (measured), of the order of that precision.
  // 1e-4 is 10 x maxmin/precision.
  CHECK(b.t.reuse.period_s == doctest::Approx(a.t.reuse.period_s).epsilon(1e-4));
  CHECK(b.m.step_time_s == doctest::Approx(a.m.step_time_s + 504 * a.t.reuse.period_s).epsilon(1e-4));
  spec::Scenario off8 = s8, off512 = s512;
  off8.mechanisms.interference = false;
  off512.mechanisms.interference = false;
  const Run c = replay_step(off8, {});
  const Run d = replay_step(off512, {});
  CHECK(c.t.activities == d.t.activities);
  CHECK(d.t.reuse.period_s == doctest::Approx(c.t.reuse.period_s).epsilon(1e-12));
  CHECK(d.m.step_time_s == doctest::Approx(c.m.step_time_s + 504 * c.t.reuse.period_s).epsilon(1e-12));
}

TEST_CASE("the symmetric replay agrees with the full replay")
{
  // docs/design.md "Speed and scale": within 1 % on step time and exactly on memory, on scenarios of up to 64 GPUs.
  struct Case {
    std::string label;
    spec::Scenario s;
  };
  const std::vector<Case> cases = {
      {"ZeRO-3, 2 x 4 GPUs", job("llama2-7b", 2, 4, 2, FRAMEWORKS[3].second)},
      {"ZeRO-2, 4 x 8 GPUs", job("gpt2-xl", 4, 8, 1, FRAMEWORKS[2].second)},
      {"ZeRO-1 overlap_comm, 8 x 8 GPUs", job("gpt2-xl", 8, 8, 1, FRAMEWORKS[1].second)},
      {"DDP, 4 x 8 GPUs", job("gpt2-xl", 4, 8, 2, FRAMEWORKS[5].second)},
      {"FSDP FULL_SHARD, 8 x 8 GPUs", job("llama2-7b", 8, 8, 1, FRAMEWORKS[6].second)},
      {"FSDP HYBRID_SHARD, 4 x 8 GPUs", job("gpt2-xl", 4, 8, 1, FRAMEWORKS[7].second)},
  };
  for (const Case& c : cases) {
    CAPTURE(c.label);
    const Run full = replay_step(c.s, options(engine::Replay::FULL, true));
    const Run sym = replay_step(c.s, options(engine::Replay::SYMMETRIC, true));
    CHECK(full.t.replay == "full");
    CHECK(sym.t.replay == "symmetric");
    CHECK(full.t.ranks.size() == static_cast<std::size_t>(c.s.world()));
    CHECK(sym.t.ranks.size() == static_cast<std::size_t>(c.s.cluster.gpus_per_node));
    CHECK(sym.m.step_time_s == doctest::Approx(full.m.step_time_s).epsilon(0.01).scale(0));
    CHECK(sym.m.memory.gpu == full.m.memory.gpu);
    CHECK(sym.m.memory.cpu_per_node == full.m.memory.cpu_per_node);
  }
}

namespace {

/// Llama-2-7B (32 blocks, 32 heads) as a DeepSpeed pipeline of `p` stages at tensor parallel `t` on `nodes` nodes of
/// `gpus_per_node` GPUs (DGX A100 80GB),
/// `m` micro-batches of one sequence through the 1F1B TrainSchedule, ZeRO stage 0 (BF16_Optimizer in bf16,
/// FP16_Optimizer in fp16: docs/pipeline-parallel.md §5).
spec::Scenario pipeline_job(int nodes, int gpus_per_node, int t, int p, int m, const std::string& precision)
{
  const int dp = nodes * gpus_per_node / (t * p);
  const std::string text =
      "name: fast-path pipeline\nmodel: llama2-7b\ncluster:\n  node: dgx-a100-80gb\n  nodes: " + std::to_string(nodes) +
      "\n  gpus_per_node: " + std::to_string(gpus_per_node) +
      "\n  network: {nic_bandwidth: 200 Gbps, nics_per_node: " + std::to_string(std::max(1, gpus_per_node / 4)) +
      "}\ntraining: {seq_len: 1024, micro_batch: 1, global_batch: " + std::to_string(m * dp) +
      ", precision: " + precision + ", activation_checkpointing: full, tensor_parallel: " + std::to_string(t) +
      ", pipeline_parallel: " + std::to_string(p) + ", pipeline: {schedule: 1f1b}}\ndeepspeed_version: \"0.16\"\n" +
      "deepspeed: {zero_optimization: {stage: 0}}\n";
  return config::load_scenario_text(text, std::string(ZEROSIM_SOURCE_DIR) + "/scenarios/fast-path-test.yaml");
}

} // namespace

TEST_CASE("accumulation reuse under a 1F1B pipeline gives the step of every micro-batch simulated")
{
  // docs/engine.md "Accumulation reuse under a pipeline": the first p + PIPELINE_REUSE_SETTLE micro-batches are
  // simulated, the last labelled as the step's last; every other adds one period, stage 0's forward-to-forward span
  // in the steady state. Expected values are the replay of every micro-batch: step time, each breakdown key, each
  // stage's busy time and bubble within 1e-6 of the step (SimGrid's precision: the steady state repeats exactly;
  // BLOOM-176B agrees to 1e-13, docs/engine.md), memory exactly, and each stage's p2p bytes exactly (every
  // micro-batch moves the same activations and gradients).
  struct Case {
    std::string label;
    spec::Scenario s;
  };
  const std::vector<Case> cases = {
      {"p 4, 1 node of 4, bf16", pipeline_job(1, 4, 1, 4, 16, "bf16")},
      {"p 2 x t 2 x d 2, 2 nodes of 4, fp16", pipeline_job(2, 4, 2, 2, 12, "fp16")},
      {"p 4 x d 2, 4 nodes of 2, bf16", pipeline_job(4, 2, 1, 4, 20, "bf16")},
  };
  for (const Case& c : cases) {
    CAPTURE(c.label);
    const int m = c.s.training.grad_accum;
    const Run all = replay_step(c.s, options(engine::Replay::AUTO, false));
    const Run reused = replay_step(c.s, options(engine::Replay::AUTO, true));
    REQUIRE(all.t.reuse.repeated() == 0);
    REQUIRE(reused.t.reuse.simulated_micro_steps == c.s.pp() + schedule::PIPELINE_REUSE_SETTLE);
    CHECK(reused.t.reuse.repeated() == m - c.s.pp() - schedule::PIPELINE_REUSE_SETTLE);
    const double step = all.m.step_time_s;
    CHECK(reused.m.step_time_s == doctest::Approx(step).epsilon(1e-6));
    for (int k = 0; k < metrics::BREAKDOWN_KEY_COUNT; ++k) {
      const auto key = static_cast<metrics::BreakdownKey>(k);
      CAPTURE(metrics::to_string(key));
      CHECK(reused.m.breakdown.at(key) == doctest::Approx(all.m.breakdown.at(key)).epsilon(1e-6).scale(step));
    }
    CHECK(reused.m.memory.gpu == all.m.memory.gpu);
    REQUIRE(reused.m.pipeline.has_value());
    REQUIRE(all.m.pipeline.has_value());
    CHECK(reused.m.pipeline->bubble_fraction == doctest::Approx(all.m.pipeline->bubble_fraction).epsilon(1e-6));
    for (std::size_t st = 0; st < all.m.pipeline->stages.size(); ++st) {
      CAPTURE(st);
      const metrics::StageMetrics& a = all.m.pipeline->stages[st];
      const metrics::StageMetrics& b = reused.m.pipeline->stages[st];
      CHECK(b.busy_s == doctest::Approx(a.busy_s).epsilon(1e-6).scale(step));
      CHECK(b.pipeline_bubble_s == doctest::Approx(a.pipeline_bubble_s).epsilon(1e-6).scale(step));
      CHECK(b.peak_memory_bytes == a.peak_memory_bytes);
      CHECK(b.p2p_bytes == a.p2p_bytes);
    }
  }
}

TEST_CASE("accumulation reuse under a pipeline: the replay's size does not grow with the micro-batches")
{
  // 16 and 256 micro-batches through 4 stages build the same p + PIPELINE_REUSE_SETTLE micro-batches: the same SimGrid
  // activities and flows, and the step grows by exactly 240 periods (SimGrid's precision, as above).
  const spec::Scenario s16 = pipeline_job(1, 4, 1, 4, 16, "bf16");
  const spec::Scenario s256 = pipeline_job(1, 4, 1, 4, 256, "bf16");
  const Run a = replay_step(s16, {});
  const Run b = replay_step(s256, {});
  CHECK(a.t.activities == b.t.activities);
  CHECK(a.t.flows == b.t.flows);
  CHECK(b.t.reuse.period_s == doctest::Approx(a.t.reuse.period_s).epsilon(1e-4));
  CHECK(b.m.step_time_s == doctest::Approx(a.m.step_time_s + 240 * a.t.reuse.period_s).epsilon(1e-4));
}
