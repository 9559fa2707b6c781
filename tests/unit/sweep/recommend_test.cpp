// `zerosim recommend` (sweep/recommend.hpp, docs/recommend.md): the candidates of the search and their ranking.
#include "core/error.hpp"
#include "sweep/recommend.hpp"

#include <doctest/doctest.h>

#include <algorithm>
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
