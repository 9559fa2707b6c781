// The command line end to end, in-process: exit statuses, the JSON contract of `zerosim memory`,
// the default scenario's fit verdict and the ladder's answer without optimizer offload.
#include "cli/commands.hpp"

#include <doctest/doctest.h>

#include <sstream>
#include <string>

using zerosim::cli::run_command;

namespace {

struct Result {
  int status = -1;
  std::string out, err;
};

Result run_zerosim(std::vector<std::string> args)
{
  std::ostringstream out, err;
  Result r;
  r.status = run_command(args, out, err);
  r.out = out.str();
  r.err = err.str();
  return r;
}

const std::string DEFAULT_SCENARIO = std::string(ZEROSIM_SOURCE_DIR) + "/scenarios/llama2-70b-8xa100-200gbps.yaml";

bool has(const std::string& text, const std::string& what)
{
  return text.find(what) != std::string::npos;
}

} // namespace

TEST_SUITE("cli")
{
  TEST_CASE("cli: the default scenario's memory JSON has every key of scenario-format.md and fits")
  {
    Result r = run_zerosim({"memory", DEFAULT_SCENARIO, "--json"});
    INFO(r.err);
    REQUIRE(r.status == 0);
    CHECK(r.err.empty());
    CHECK(r.out.front() == '{'); // one JSON object on stdout and nothing else
    CHECK(r.out.find('{', 1) != std::string::npos);
    for (const char* key : {"\"scenario\"",
                            "\"gpus\": 8",
                            "\"dp\": 8",
                            "\"params\": 68976648192",
                            "\"peak_memory_bytes\"",
                            "\"gpu\"",
                            "\"gpu_reserved\"",
                            "\"gpu_device\"",
                            "\"cpu_per_node\"",
                            "\"cpu_pinned_per_node\"",
                            "\"nvme_per_node\"",
                            "\"memory_breakdown_bytes\"",
                            "\"params\"",
                            "\"grads\"",
                            "\"optimizer\"",
                            "\"activations\"",
                            "\"buffers\"",
                            "\"other\"",
                            "\"fits\": true",
                            "\"fit_by_tier\"",
                            "\"shortfall_bytes\": 0",
                            "\"warnings\"",
                            "\"meta\"",
                            "\"schema_version\": 1",
                            "\"deepspeed_version\": \"0.19\""})
      CHECK_MESSAGE(has(r.out, key), key);
  }

  TEST_CASE("cli: without optimizer offload the default scenario does not fit, and the ladder says what does")
  {
    // 16 bytes per parameter of model states (zero-schedule.md §10.1, stage 3 without offload):
    // 16 x 68.98e9 / 8 GPUs = 138 GB per GPU > 80 GB, so the GPU tier must overflow.
    Result r = run_zerosim(
        {"memory", DEFAULT_SCENARIO, "--json", "--set", "deepspeed.zero_optimization.offload_optimizer.device=none"});
    INFO(r.err);
    REQUIRE(r.status == 0); // not fitting is a result, not a failure
    CHECK(has(r.out, "\"fits\": false"));
    CHECK(has(r.out, "\"to_fit\""));
    CHECK(has(r.out, "\"answer\": \"deepspeed.zero_optimization.offload_optimizer.device: cpu\""));

    Result table =
        run_zerosim({"memory", DEFAULT_SCENARIO, "--set", "deepspeed.zero_optimization.offload_optimizer.device=none"});
    CHECK(table.status == 0);
    CHECK(has(table.out, "DOES NOT FIT (GPU)"));
    CHECK(has(table.out, "Answer: deepspeed.zero_optimization.offload_optimizer.device: cpu"));
  }

  TEST_CASE("cli: the ladder's NVMe rung raises offload_param.buffer_size to the largest partition")
  {
    // BLOOM-176B on one 4-GPU node: only ZeRO-Infinity fits the host. DeepSpeed asserts that every NVMe
    // partition fits one swap buffer (zero-schedule.md §8): the tied embedding, 250880 x 14336 = 3,596,615,680
    // elements, is ⌈3,596,615,680 / 4⌉ = 899,153,920 per rank, above the default 1e8, so the rung sets 899,153,921.
    Result r = run_zerosim({"memory", DEFAULT_SCENARIO, "--set", "model=bloom-176b", "--set", "cluster.nodes=1"});
    INFO(r.err);
    REQUIRE(r.status == 0);
    CHECK(has(r.out, "offload_param.buffer_size: 899153921 (the largest partition must fit one swap buffer)"));
  }

  TEST_CASE("cli: the same input gives the same bytes")
  {
    Result a = run_zerosim({"memory", DEFAULT_SCENARIO, "--json"});
    Result b = run_zerosim({"memory", DEFAULT_SCENARIO, "--json"});
    CHECK(a.out == b.out);
  }

  TEST_CASE("cli: bad command lines exit with status 2 and say why")
  {
    Result none = run_zerosim({});
    CHECK(none.status == 2);
    CHECK(has(none.err, "usage:"));

    Result unknown = run_zerosim({"memroy", DEFAULT_SCENARIO});
    CHECK(unknown.status == 2);
    CHECK(unknown.err == "zerosim: unknown command 'memroy' (see 'zerosim --help')\n");

    Result option = run_zerosim({"memory", DEFAULT_SCENARIO, "--jsn"});
    CHECK(option.status == 2);
    CHECK(option.err == "zerosim: unknown option '--jsn' (see 'zerosim --help')\n");

    Result params = run_zerosim({"memory", "--estimator", "--params", "-5", "--gpus-per-node", "8", "--nodes", "1"});
    CHECK(params.status == 2);
    CHECK(params.err ==
          "zerosim: --params: expected a positive whole number (e.g. 7e9), found \"-5\" (see 'zerosim --help')\n");

    Result stage = run_zerosim(
        {"memory", "--estimator", "--params", "7e9", "--gpus-per-node", "8", "--nodes", "1", "--stage", "1"});
    CHECK(stage.status == 2);
    CHECK(has(stage.err, "--stage: expected 2 or 3"));

    Result missing = run_zerosim({"memory", "no/such/scenario.yaml"});
    CHECK(missing.status == 2);
    CHECK(has(missing.err, "no/such/scenario.yaml"));

    Result sweep = run_zerosim({"sweep", DEFAULT_SCENARIO});
    CHECK(sweep.status == 2);
    CHECK(has(sweep.err, "not available in this version"));

    Result trace = run_zerosim({"run", DEFAULT_SCENARIO, "--trace"});
    CHECK(trace.status == 2);
    CHECK(has(trace.err, "--trace writes trace.json into the --out DIR"));

    Result replay = run_zerosim({"run", DEFAULT_SCENARIO, "--replay", "fast"});
    CHECK(replay.status == 2);
    CHECK(has(replay.err, "--replay: expected full or symmetric, found \"fast\""));
  }

  TEST_CASE("cli: the estimator mode prints DeepSpeed's figures")
  {
    // zero-schedule.md §10.2: ZeRO-2, 2851M params, 1 node x 8 GPUs, offload_optimizer=cpu:
    // gpu = 2 * 2851e6 = 5.702e9 B = 5.31 GiB; cpu = 2851e6 * max(4*8, 16) * 1.5 = 136.848e9 B = 127.45 GiB.
    Result r = run_zerosim({"memory", "--estimator", "--params", "2851e6", "--gpus-per-node", "8", "--nodes", "1",
                            "--stage", "2", "--offload-optimizer", "--json"});
    INFO(r.err);
    REQUIRE(r.status == 0);
    CHECK(has(r.out, "5702000000"));
    CHECK(has(r.out, "136848000000"));
  }

  TEST_CASE("cli: describe prints each schema")
  {
    for (const char* what : {"model", "node", "scenario"}) {
      Result r = run_zerosim({"describe", what});
      CHECK(r.status == 0);
      CHECK(!r.out.empty());
    }
    CHECK(run_zerosim({"describe", "gpu"}).status == 2);
  }
}
