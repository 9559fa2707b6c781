// `zerosim recommend` (sweep/recommend.hpp, docs/recommend.md): the candidates of the search and their ranking.
#include "config/scenario_loader.hpp"
#include "core/bytes.hpp"
#include "core/error.hpp"
#include "run/memory_analysis.hpp"
#include "sweep/recommend.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <sstream>
#include <string>
#include <vector>

using namespace zerosim;
using namespace zerosim::sweep;

namespace {
const std::string SCENARIO = std::string(ZEROSIM_SOURCE_DIR) + "/scenarios/llama2-70b-8xa100-200gbps.yaml";
}

TEST_SUITE("sweep")
{
  TEST_CASE("recommend: the default scenario's search space, stage by offload by checkpointing by batch split")
  {
    RecommendOptions o;
    o.scenario = SCENARIO;
    const std::vector<Candidate> c = candidates(o);
    // Global batch 128 over 8 data-parallel ranks: 16 sequences per GPU per step, micro-batch 1, 2, 4, 8 or 16 (the
    // accumulation 16 / mb). Offloads per stage: 0 none; 1 and 2 none or optimizer on the CPU; 3 also optimizer and
    // parameters on the CPU, and both on NVMe (the node has NVMe): 1 + 2 + 2 + 4 = 9. Checkpointing on or off.
    CHECK(c.size() == 9 * 2 * 5);
    for (const Candidate& k : c) {
      CHECK(k.micro_batch * k.grad_accum == 16);
      CHECK(k.gpus == 8);
    }
    // The scenario gives grad_accum, so each candidate keeps the global batch by setting the accumulation.
    CHECK(std::find(c.front().sets.begin(), c.front().sets.end(), "training.grad_accum=16") != c.front().sets.end());
    // Other cluster sizes: 16 GPUs halves the per-GPU batch (mb 1..8: 4 splits).
    o.gpus = {16};
    CHECK(candidates(o).size() == 9 * 2 * 4);
    o.gpus = {6};
    CHECK_THROWS_WITH_AS(candidates(o), doctest::Contains("not a whole number of 4-GPU nodes"), core::InputError);
    o.gpus = {};
    o.scenario = std::string(ZEROSIM_SOURCE_DIR) + "/scenarios/gpt2-xl-ddp-dgx-a100-80gb.yaml";
    CHECK_THROWS_WITH_AS(candidates(o), doctest::Contains("runs DDP, which has no sharding or offload to choose"),
                         core::InputError);
  }

  TEST_CASE("recommend: an FSDP2 scenario's search space, reshard after forward or not by CPUOffload or not")
  {
    RecommendOptions o;
    o.scenario = std::string(ZEROSIM_SOURCE_DIR) + "/scenarios/llama3-8b-fsdp-8xh100.yaml";
    const std::vector<Candidate> c = candidates(o);
    // Global batch 16 over 8 GPUs: 2 per GPU, micro-batch 1 or 2. FSDP2 (reshard_after_forward given): reshard or not
    // x CPUOffload or not x checkpointing off, full or the scenario's own per_op: 2 x 2 x 3 x 2 = 24.
    CHECK(c.size() == 24);
    CHECK(std::count_if(c.begin(), c.end(), [](const Candidate& k) { return k.checkpointing == "per_op"; }) == 8);
    CHECK(c.front().sharding == "FSDP2 reshard_after_forward");
    CHECK(std::find(c.front().sets.begin(), c.front().sets.end(), "fsdp.reshard_after_forward=true") !=
          c.front().sets.end());
    // The scenario gives global_batch: candidates keep it by setting it.
    CHECK(std::find(c.front().sets.begin(), c.front().sets.end(), "training.global_batch=16") != c.front().sets.end());
  }

  TEST_CASE("recommend: the ranking keeps only what fits, fastest first, less memory on a tie, cost first when priced")
  {
    std::vector<Candidate> c(4);
    for (Candidate& k : c)
      k.status = "done";
    c[0].fits = true, c[0].step_time_s = 2.0, c[0].gpu_device_bytes = 10;
    c[1].fits = false, c[1].step_time_s = 1.0; // faster, but does not fit
    c[2].fits = true, c[2].step_time_s = 1.5, c[2].gpu_device_bytes = 30;
    c[3].fits = true, c[3].step_time_s = 1.5, c[3].gpu_device_bytes = 20;
    std::vector<const Candidate*> r = ranked(c);
    REQUIRE(r.size() == 3);
    CHECK(r[0] == &c[3]);
    CHECK(r[1] == &c[2]);
    CHECK(r[2] == &c[0]);
    // Priced: the cheapest per million tokens first, whatever its speed.
    c[0].cost_per_million_tokens = 1.0;
    c[2].cost_per_million_tokens = 3.0;
    c[3].cost_per_million_tokens = 2.0;
    r = ranked(c);
    CHECK(r[0] == &c[0]);
    CHECK(r[1] == &c[3]);
  }

  // Issue 29: advice with a margin. A candidate that fits with less than the headroom free is tight: never ranked,
  // listed apart (fastest first), whatever its speed.
  TEST_CASE("recommend: a tight candidate is never ranked first, and is listed as tight")
  {
    std::vector<Candidate> c(3);
    for (Candidate& k : c)
      k.status = "done", k.fits = true, k.capacity_bytes = 80;
    c[0].step_time_s = 1.0, c[0].gpu_device_bytes = 79.9; // 0.1 % free: the fastest, tight
    c[1].step_time_s = 2.0, c[1].gpu_device_bytes = 40;   // 50 % free
    c[2].step_time_s = 1.5, c[2].gpu_device_bytes = 70;   // 12.5 % free: tight at the default 17.7 %
    for (Candidate& k : c)
      k.tight = zerosim::memory::is_tight(k.gpu_device_bytes, k.capacity_bytes, zerosim::memory::DEFAULT_HEADROOM);
    CHECK(c[0].tight);
    CHECK_FALSE(c[1].tight);
    CHECK(c[2].tight);
    const std::vector<const Candidate*> r = ranked(c);
    REQUIRE(r.size() == 1);
    CHECK(r[0] == &c[1]);
    const std::vector<const Candidate*> t = tight_ones(c);
    REQUIRE(t.size() == 2);
    CHECK(t[0] == &c[0]);
    CHECK(t[1] == &c[2]);
    // The margin is the caller's: at 10 %, 12.5 % free is enough.
    CHECK_FALSE(zerosim::memory::is_tight(70, 80, 0.10));
    // Over capacity is not tight: it does not fit.
    CHECK_FALSE(zerosim::memory::is_tight(81, 80, 0.10));
  }
}

// Issue 32: recommend on a DeepSpeed pipeline scenario (docs/recommend.md "Pipeline scenarios").
namespace {

const std::string PIPELINE = std::string(ZEROSIM_SOURCE_DIR) + "/tests/data/scenarios/pipeline-recommend.yaml";
const std::string BLOOM = std::string(ZEROSIM_SOURCE_DIR) + "/scenarios/bloom-176b-3d-384xa100.yaml";

spec::Scenario load(const std::string& file, const std::vector<std::string>& sets = {})
{
  config::LoadOptions lo;
  lo.sets = sets;
  return config::load_scenario(file, lo);
}

} // namespace

TEST_SUITE("sweep")
{
  TEST_CASE("recommend: a pipeline scenario's search space, tensor-parallel x pipeline degree x ZeRO stage x batch")
  {
    RecommendOptions o;
    o.scenario = PIPELINE;
    const spec::Scenario s = load(PIPELINE);
    // 4 GPUs of a 4-GPU node; 16 heads, FFN 4096: t = 1, 2, 4 divide them all.
    CHECK(pipeline_tensor_degrees(s) == std::vector<int>{1, 2, 4});
    // p >= 2 dividing 4 / t, at most 8 blocks: t 1 -> 2, 4; t 2 -> 2; t 4 -> none (one GPU per tensor group).
    CHECK(pipeline_degrees(s, 4, 1) == std::vector<int>{2, 4});
    CHECK(pipeline_degrees(s, 4, 2) == std::vector<int>{2});
    CHECK(pipeline_degrees(s, 4, 4).empty());
    const std::vector<Candidate> c = candidates(o);
    // Global batch 8 over dp = 4 / (t p) ranks: (t 1, p 2) dp 2, 4 a rank, mb 1, 2, 4; (1, 4) and (2, 2) dp 1, 8 a
    // rank, mb 1, 2, 4, 8: 3 + 4 + 4 = 11 splits, x checkpointing off or full x ZeRO 0, 1, 1 with the optimizer on the
    // CPU.
    CHECK(c.size() == 11 * 2 * 3);
    for (const Candidate& k : c) {
      CHECK(k.gpus == 4);
      CHECK(k.stage <= 1); // DeepSpeed's PipelineEngine asserts ZeRO below 2 (docs/pipeline-parallel.md §5)
      CHECK(k.micro_batch * k.grad_accum * (4 / (k.tensor_parallel * k.pipeline_parallel)) == 8); // global batch kept
      CHECK(std::find(k.sets.begin(), k.sets.end(), "training.global_batch=8") != k.sets.end());
      CHECK(std::find(k.sets.begin(), k.sets.end(),
                      "training.pipeline_parallel=" + std::to_string(k.pipeline_parallel)) != k.sets.end());
    }
    CHECK(std::count_if(c.begin(), c.end(), [](const Candidate& k) { return k.offload == "optimizer cpu"; }) == 22);
    CHECK(c.front().label() ==
          "stage 0, no offload, no checkpointing, tp 1 x pp 2 x dp 2, mb 1 x 4 micro-batches, 4 GPUs");

    // BLOOM as trained (384 GPUs, global batch 2048): at t = 4 the data-parallel degree 384 / (4 p) must divide 2048, a
    // power of two, so p carries the factor 3 of 384 = 3 x 2^7: 3, 6, 12, 24, 48 (48 stages: 8 ranks, one node each).
    const spec::Scenario bloom = load(BLOOM);
    CHECK(pipeline_degrees(bloom, 384, 4) == std::vector<int>{3, 6, 12, 24, 48});
    CHECK(pipeline_tensor_degrees(bloom) == std::vector<int>{1, 2, 4, 8}); // 112 heads, FFN 57344, 8 GPUs a node
    // An explicit split names every stage: its degree only.
    const spec::Scenario split = load(PIPELINE, {"training.pipeline.layers=[3, 5]"});
    CHECK(pipeline_degrees(split, 4, 1) == std::vector<int>{2});
    CHECK(pipeline_degrees(split, 4, 2) == std::vector<int>{2});
    // A global batch of 3 splits over one data-parallel rank only: t p = 4, (1, 4) and (2, 2), micro-batch 1.
    o.sets = {"training.pipeline_parallel=4", "training.global_batch=3"};
    const std::vector<Candidate> three = candidates(o);
    CHECK(three.size() == 2 * 2 * 3);
    for (const Candidate& k : three)
      CHECK(k.tensor_parallel * k.pipeline_parallel == 4);
  }

  TEST_CASE("recommend: a pipeline's memory analysis at min(m, p) micro-batches gives the peak of all m")
  {
    // Under 1F1B stage s holds min(p - s, m) micro-batches (docs/pipeline-parallel.md §7): cutting m to p changes no
    // stage's holdings, so the analysis of the cut step must give the same peak, allocated and device total.
    RecommendOptions o;
    o.scenario = PIPELINE;
    const spec::Scenario s = load(PIPELINE);
    int checked = 0;
    for (const Candidate& c : candidates(o)) {
      if (c.stage != 0 || c.micro_batch != 1 || c.grad_accum <= c.pipeline_parallel)
        continue;
      CAPTURE(c.label());
      const memory::MemoryReport all_m = run::analyze_memory(load(PIPELINE, c.sets));
      const spec::Scenario cut = load(PIPELINE, memory_sets(c, s));
      CHECK(cut.training.grad_accum == c.pipeline_parallel);
      const memory::MemoryReport at_p = run::analyze_memory(cut);
      CHECK(at_p.gpu == all_m.gpu);
      CHECK(at_p.gpu_device == all_m.gpu_device);
      ++checked;
    }
    CHECK(checked == 6); // (t 1, p 2) m 4, (1, 4) m 8, (2, 2) m 8, each with checkpointing off and full
  }

  TEST_CASE("recommend: pipeline candidates are pruned by the memory analysis")
  {
    // The model widened to hidden 8192 (64 heads) and 16 blocks. At t 1, p 2 stage 0 holds 8 blocks of at least
    // 12 h^2 parameters; BF16_Optimizer keeps 2 + 2 + 4 bytes of each (bf16 weight and gradient, fp32 accumulator) and
    // 12 / dp of fp32 master and Adam moments (docs/pipeline-parallel.md §6): at dp 2, 14 x 8 x 12 x 8192^2 =
    // 90.19e9 bytes, above the 80 GiB (85.90e9) of the GPU whatever the micro-batch, so every such candidate is pruned.
    RecommendOptions o;
    o.scenario = PIPELINE;
    o.sets = {"model.hidden=8192", "model.heads=64", "model.layers=16"};
    o.jobs = 2;
    // A 5 % margin (--headroom 0.05): the lightest of these (t 2, p 2 at micro-batch 1, 71.6 of 80 GiB with this build)
    // fit with it free, so that both sides of the rule are exercised; at the default 17.7 % every one is pruned.
    o.headroom = 0.05;
    std::vector<Candidate> c = candidates(o);
    std::ostringstream err;
    prune_by_memory(o, c, err);
    const double floor = 14.0 * 8 * 12 * 8192.0 * 8192.0;
    REQUIRE(floor > 80 * core::GIB);
    const spec::Scenario s = load(PIPELINE, o.sets);
    int pruned = 0, kept = 0;
    for (const Candidate& k : c) {
      CAPTURE(k.label());
      CAPTURE(k.status);
      // ZeRO-1 under the pipeline engine (DeepSpeedZeroOptimizer, docs/pipeline-parallel.md §5) shards the fp32 master
      // and moments without BF16_Optimizer's unsharded accumulator: the floor below is stage 0's; stage 1 candidates
      // follow the general rule.
      if (k.stage == 0 && k.tensor_parallel == 1 && k.pipeline_parallel == 2) {
        CHECK(k.status == PRUNED_BY_MEMORY);
        CHECK_FALSE(k.fits);
        CHECK(k.capacity_bytes == 80 * core::GIB);
        CHECK(k.gpu_device_bytes > floor);
        CHECK(k.shortfall_bytes == doctest::Approx(k.gpu_device_bytes - k.capacity_bytes));
      }
      // The rule: pruned exactly when the analysis (issue-order replay, at min(m, p) micro-batches) does not fit or
      // leaves less than the headroom free; the others are left to simulate.
      const memory::MemoryReport r = run::analyze_memory(load(PIPELINE, [&] {
        std::vector<std::string> sets = o.sets;
        const std::vector<std::string> own = memory_sets(k, s);
        sets.insert(sets.end(), own.begin(), own.end());
        return sets;
      }()));
      const bool out = !r.fits || memory::is_tight(static_cast<double>(r.gpu_device),
                                                   static_cast<double>(r.gpu_capacity), o.headroom);
      CHECK((k.status == PRUNED_BY_MEMORY) == out);
      CHECK((k.status.empty()) == !out);
      (out ? pruned : kept) += 1;
    }
    // Both sides are exercised: some pruned (the 6 of t 1, p 2 at least: mb 1, 2, 4 x checkpointing off or full),
    // some left to simulate.
    CHECK(pruned >= 6);
    CHECK(kept > 0);
  }
}
