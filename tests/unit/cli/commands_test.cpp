// The command line end to end, in-process: exit statuses, the JSON contract of `zerosim memory`,
// the default scenario's fit verdict and the ladder's answer without optimizer offload.
#include "cli/commands.hpp"
#include "core/json.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <set>
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

std::string read_file(const std::string& path)
{
  std::ifstream in(path);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

/// Writes `text` to a file of its own in the system's temporary folder (named after the test, so parallel
/// test processes do not collide) and returns its path.
std::string write_temp(const std::string& name, const std::string& text)
{
  const std::filesystem::path p = std::filesystem::temp_directory_path() / ("zerosim-cli-test-" + name);
  std::ofstream(p) << text;
  return p.string();
}

} // namespace

TEST_SUITE("cli")
{
  TEST_CASE("cli: the default scenario's memory JSON has every key of docs/scenario-format.md and fits")
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
    // 16 bytes per parameter of model states (docs/deepspeed-schedule.md §10.1, stage 3 without offload):
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
    // partition fits one swap buffer (docs/deepspeed-schedule.md §8): the tied embedding, 250880 x 14336 =
    // 3,596,615,680 elements, is ⌈3,596,615,680 / 4⌉ = 899,153,920 per rank, above the default 1e8, so the rung sets
    // 899,153,921.
    Result r = run_zerosim({"memory", DEFAULT_SCENARIO, "--set", "model=bloom-176b", "--set", "cluster.nodes=1"});
    INFO(r.err);
    REQUIRE(r.status == 0);
    CHECK(has(r.out, "offload_param.buffer_size: 899153921 (the largest partition must fit one swap buffer)"));
  }

  TEST_CASE("cli: on the priors alone, run prints the priors' error band of its group as report.md has it")
  {
    // The default scenario (A100, DeepSpeed) with --calibration none: the band is the "GPU / framework A100 /
    // deepspeed" row of the committed report's "Priors only" table (results/validation/report.md), which validate --run
    // also writes into priors-accuracy.yaml.
    const std::string report = read_file(std::string(ZEROSIM_SOURCE_DIR) + "/results/validation/report.md");
    const std::size_t section = report.find("## Priors only");
    REQUIRE(section != std::string::npos);
    const std::string prefix = "| GPU / framework A100 / deepspeed | ";
    const std::size_t at = report.find(prefix, section);
    REQUIRE(at != std::string::npos);
    std::istringstream cells(report.substr(at + prefix.size(), report.find('\n', at) - at - prefix.size()));
    int rows = 0;
    double median = 0, p90 = 0, signed_median = 0;
    std::string bar, pct;
    cells >> rows >> bar >> median >> pct >> bar >> p90 >> pct >> bar >> signed_median;
    REQUIRE(rows > 0);

    const std::string dir = (std::filesystem::temp_directory_path() / "zerosim-cli-test-priors-band").string();
    std::filesystem::remove_all(dir);
    Result r = run_zerosim({"run", DEFAULT_SCENARIO, "--out", dir, "--calibration", "none"});
    INFO(r.err);
    REQUIRE(r.status == 0);
    char expected[256];
    std::snprintf(expected, sizeof expected,
                  "accuracy               priors only (no calibration profile): runs like this (A100 / deepspeed) "
                  "were predicted within %.0f %% (median) / %.0f %% (p90) of measured, median signed %+.0f %% (%d "
                  "published runs; results/validation/priors-accuracy.yaml)",
                  median, p90, signed_median, rows);
    INFO(r.out);
    CHECK(has(r.out, expected));
    const zerosim::core::Json j = zerosim::core::Json::parse(read_file(dir + "/summary.json"));
    const zerosim::core::Json& a = j.at("accuracy");
    CHECK(a.at("kind") == "priors");
    CHECK(a.at("group") == "A100 / deepspeed");
    CHECK(a.at("band_group") == "A100 / deepspeed");
    CHECK(a.at("rows") == rows);
    // The report prints one decimal: the band agrees to its rounding.
    CHECK(a.at("median_abs_error").get<double>() * 100 == doctest::Approx(median).epsilon(0.051 / median));
    CHECK(a.at("p90_abs_error").get<double>() * 100 == doctest::Approx(p90).epsilon(0.051 / p90));
    CHECK(a.at("from") == "results/validation/priors-accuracy.yaml");
    std::filesystem::remove_all(dir);
  }

  TEST_CASE(
      "cli: with the shipped profile, run prints its leave-one-source-out band, and a profile without folds has none")
  {
    // calibration/default.yaml (docs/calibration.md §8) is what run uses without --calibration. Its accuracy block
    // holds the fit's leave-one-source-out median and p90 |error| per group; the default scenario is A100 / deepspeed.
    const std::string profile = read_file(std::string(ZEROSIM_SOURCE_DIR) + "/calibration/default.yaml");
    const std::string key = "\"A100 / deepspeed\": {";
    const std::size_t at = profile.find(key);
    REQUIRE(at != std::string::npos);
    double median = 0, p90 = 0;
    int rows = 0;
    REQUIRE(std::sscanf(profile.c_str() + at + key.size(),
                        "loso_median_abs_error: %lf, loso_p90_abs_error: %lf, rows: %d", &median, &p90, &rows) == 3);
    Result r = run_zerosim({"run", DEFAULT_SCENARIO});
    INFO(r.err);
    REQUIRE(r.status == 0);
    char expected[256];
    std::snprintf(expected, sizeof expected,
                  "accuracy               runs like this (A100 / deepspeed) were predicted within %.0f %% (median) / "
                  "%.0f %% (p90) of measured, each source left out of the fit (%d runs)",
                  median, p90, rows);
    INFO(r.out);
    CHECK(has(r.out, expected));
    // results/calibration/without-s12.yaml was fitted with --no-loso: it has no bands, and says so.
    Result held_out = run_zerosim({"run", DEFAULT_SCENARIO, "--calibration",
                                   std::string(ZEROSIM_SOURCE_DIR) + "/results/calibration/without-s12.yaml"});
    REQUIRE(held_out.status == 0);
    CHECK(has(held_out.out, "has no leave-one-source-out bands (fitted with --no-loso): no error band"));
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
    CHECK(option.err == "zerosim: unknown option '--jsn' (see 'zerosim memory --help')\n");

    Result params = run_zerosim({"memory", "--estimator", "--params", "-5", "--gpus-per-node", "8", "--nodes", "1"});
    CHECK(params.status == 2);
    CHECK(
        params.err ==
        "zerosim: --params: expected a positive whole number (e.g. 7e9), found \"-5\" (see 'zerosim memory --help')\n");

    Result stage = run_zerosim(
        {"memory", "--estimator", "--params", "7e9", "--gpus-per-node", "8", "--nodes", "1", "--stage", "1"});
    CHECK(stage.status == 2);
    CHECK(has(stage.err, "--stage: expected 2 or 3"));

    // Pipeline stages on the default scenario's ZeRO-3: refused with DeepSpeed's assert (docs/config.md "Pipeline
    // parallelism").
    Result pipeline = run_zerosim({"memory", DEFAULT_SCENARIO, "--set", "training.pipeline_parallel=2"});
    CHECK(pipeline.status == 2);
    CHECK(has(pipeline.err, "deepspeed.zero_optimization.stage: expected 0 or 1 with 2 pipeline stages (DeepSpeed's "
                            "PipelineEngine asserts \"ZeRO-2 and ZeRO-3 are incompatible with pipeline parallelism\""));

    Result missing = run_zerosim({"memory", "no/such/scenario.yaml"});
    CHECK(missing.status == 2);
    CHECK(has(missing.err, "no/such/scenario.yaml"));

    Result sweep = run_zerosim({"sweep", DEFAULT_SCENARIO});
    CHECK(sweep.status == 2);
    CHECK(has(sweep.err, "nothing to sweep"));
    Result sweep_key = run_zerosim({"sweep", DEFAULT_SCENARIO, "--sweep", "training.micro_batc=1,2"});
    CHECK(sweep_key.status == 2);
    CHECK(has(sweep_key.err, "--sweep training.micro_batc: training.micro_batc: unknown key"));
    Result sweep_range = run_zerosim({"sweep", DEFAULT_SCENARIO, "--sweep", "training.micro_batch=8..1"});
    CHECK(sweep_range.status == 2);
    CHECK(has(sweep_range.err, "empty range \"8..1\""));
    Result shard = run_zerosim({"sweep", DEFAULT_SCENARIO, "--sweep", "training.micro_batch=1", "--shard", "3/2"});
    CHECK(shard.status == 2);
    CHECK(has(shard.err, "--shard: expected I/N with 1 <= I <= N"));
    Result merge = run_zerosim({"sweep", "--merge", "no/such/dir", "--out", "x"});
    CHECK(merge.status == 2);
    CHECK(has(merge.err, "no/such/dir has no sweep-plan.json"));

    // An option of another command does nothing here: refused, with this command's options.
    Result foreign = run_zerosim({"run", DEFAULT_SCENARIO, "--gpus", "8"});
    CHECK(foreign.status == 2);
    CHECK(has(foreign.err, "run: --gpus is not an option of run (its options: --set, --json, --out, --trace,"));
    Result takes_none = run_zerosim({"describe", "model", "--json"});
    CHECK(takes_none.status == 2);
    CHECK(has(takes_none.err, "describe: --json is not an option of describe (it takes none)"));

    // CLI11's own parse errors, in zerosim's words: a missing value, an option or an argument given twice.
    Result no_value = run_zerosim({"run", DEFAULT_SCENARIO, "--out"});
    CHECK(no_value.status == 2);
    CHECK(no_value.err == "zerosim: --out: a value is expected after it (see 'zerosim run --help')\n");
    Result twice = run_zerosim({"sweep", DEFAULT_SCENARIO, "-j", "1", "--jobs", "2"});
    CHECK(twice.status == 2);
    CHECK(twice.err == "zerosim: --jobs: given more than once; give it once (see 'zerosim sweep --help')\n");
    Result flag_twice = run_zerosim({"memory", DEFAULT_SCENARIO, "--json", "--json"}); // a flag, as an option
    CHECK(flag_twice.status == 2);
    CHECK(flag_twice.err == "zerosim: --json: given more than once; give it once (see 'zerosim memory --help')\n");
    Result two = run_zerosim({"run", DEFAULT_SCENARIO, DEFAULT_SCENARIO});
    CHECK(two.status == 2);
    CHECK(two.err == "zerosim: run: expected one SCENARIO, found more than one (see 'zerosim run --help')\n");
    Result help_unknown = run_zerosim({"help", "memroy"});
    CHECK(help_unknown.status == 2);
    CHECK(help_unknown.err == "zerosim: unknown command 'memroy' (see 'zerosim --help')\n");

    Result recommend = run_zerosim({"recommend", DEFAULT_SCENARIO, "--gpus", "6"});
    CHECK(recommend.status == 2);
    CHECK(has(recommend.err, "--gpus: 6 is not a whole number of 4-GPU nodes"));
    Result compare_alone = run_zerosim({"compare", DEFAULT_SCENARIO});
    CHECK(compare_alone.status == 2);
    CHECK(has(compare_alone.err, "compare: expected SCENARIO LOG..."));
    Result compare_missing = run_zerosim({"compare", DEFAULT_SCENARIO, "no/such/log.txt"});
    CHECK(compare_missing.status == 2);
    CHECK(has(compare_missing.err, "no/such/log.txt: cannot read the log"));

    const std::string no_steps = write_temp("no-steps.log", "elapsed time per iteration (ms) appears in a sentence\n");
    Result compare_empty = run_zerosim({"compare", DEFAULT_SCENARIO, no_steps});
    CHECK(compare_empty.status == 2);
    CHECK(compare_empty.err == no_steps + ": a Megatron iteration lines log with no step lines\n");

    Result trace = run_zerosim({"run", DEFAULT_SCENARIO, "--trace"});
    CHECK(trace.status == 2);
    CHECK(has(trace.err, "--trace writes trace.json into the --out DIR"));

    Result replay = run_zerosim({"run", DEFAULT_SCENARIO, "--replay", "fast"});
    CHECK(replay.status == 2);
    CHECK(has(replay.err, "--replay: expected full or symmetric, found \"fast\""));

    // calibrate: nothing to fit from, an nccl-tests table without the node it ran on, an unknown grouping.
    Result nothing = run_zerosim({"calibrate"});
    CHECK(nothing.status == 2);
    CHECK(has(nothing.err, "give measured runs (--runs CSV)"));
    Result no_node = run_zerosim({"calibrate", "--nccl", "x.txt"});
    CHECK(no_node.status == 2);
    CHECK(has(no_node.err, "--nccl and --gemm need --node NAME|PATH"));
    Result fold = run_zerosim({"calibrate", "--runs", "x.csv", "--fold-by", "gpu"});
    CHECK(fold.status == 2);
    CHECK(has(fold.err, "--fold-by: expected source"));
    // calibrate --synthetic: a missing true profile, noise outside [0, 1), a bad seed, --noise alone, only --nccl.
    const std::string truth = std::string(ZEROSIM_SOURCE_DIR) + "/calibration/synthetic-truth.yaml";
    const std::string runs = std::string(ZEROSIM_SOURCE_DIR) + "/results/validation/published.csv";
    Result no_truth = run_zerosim({"calibrate", "--runs", runs, "--synthetic", "no/such/truth.yaml"});
    CHECK(no_truth.status == 2);
    CHECK(has(no_truth.err, "--synthetic: expected a calibration profile file with the true multipliers"));
    CHECK(has(no_truth.err, "found no file at 'no/such/truth.yaml'"));
    for (const char* bad : {"1", "-0.01", "1.5", "3%", "x"}) {
      Result noise = run_zerosim({"calibrate", "--runs", runs, "--synthetic", truth, "--noise", bad});
      CHECK(noise.status == 2);
      CHECK(has(noise.err,
                std::string("--noise: expected a standard deviation in ln in [0, 1) (0.03 for 3 %), found \"") + bad +
                    "\""));
    }
    Result seed = run_zerosim({"calibrate", "--runs", runs, "--synthetic", truth, "--seed", "-1"});
    CHECK(seed.status == 2);
    CHECK(has(seed.err, "--seed: expected a whole number from 0 to 2^63 - 1, found \"-1\""));
    Result alone = run_zerosim({"calibrate", "--runs", runs, "--noise", "0.03"});
    CHECK(alone.status == 2);
    CHECK(has(alone.err, "--noise: expected together with --synthetic TRUE_PROFILE"));
    Result nccl_only = run_zerosim({"calibrate", "--nccl", "x.txt", "--synthetic", truth});
    CHECK(nccl_only.status == 2);
    CHECK(has(nccl_only.err, "expected runs whose measured values it replaces (--runs CSV or --scenario FILE), found "
                             "only --nccl"));
    Result no_profile = run_zerosim({"run", DEFAULT_SCENARIO, "--calibration", "no/such/profile.yaml"});
    CHECK(no_profile.status == 2);
    CHECK(has(no_profile.err, "--calibration: calibration profile no/such/profile.yaml does not exist"));
    // A mechanism's name mistyped: the list, and the likely one.
    Result typo = run_zerosim({"run", DEFAULT_SCENARIO, "--without", "interferance"});
    CHECK(typo.status == 2);
    CHECK(has(typo.err, "--without: expected one of "));
    CHECK(has(typo.err, "found \"interferance\" (did you mean 'interference'?)"));
    Result val = run_zerosim({"validate", "--run", "--calibration", "none"});
    CHECK(val.status == 2);
    CHECK(has(val.err, "validate: --calibration is not taken"));
    // validate's --no-loso and --priors-only shape the --run report only, and one excludes the other.
    Result mem_loso = run_zerosim({"validate", "--memory", "--no-loso"});
    CHECK(mem_loso.status == 2);
    CHECK(has(mem_loso.err, "validate: --no-loso and --priors-only shape the --run report; give them with --run"));
    Result both_flags = run_zerosim({"validate", "--run", "--no-loso", "--priors-only"});
    CHECK(both_flags.status == 2);
    CHECK(has(both_flags.err, "validate: --priors-only skips the fit that --no-loso shortens; give one of them"));
    Result abl = run_zerosim({"validate", "--ablation", "--priors-only"});
    CHECK(abl.status == 2);
    CHECK(has(abl.err, "validate --ablation: switches every mechanism off in turn by itself"));
  }

  // `validate --scenarios DIR` writes the scenario of every row `validate --run` compares (report.csv lists them,
  // kind "compared", one line per figure) and nothing else; each loads as a scenario of its own.
  TEST_CASE("cli: validate --scenarios writes one loadable scenario per compared row")
  {
    const std::filesystem::path dir = std::filesystem::temp_directory_path() / "zerosim-cli-test-row-scenarios";
    std::filesystem::remove_all(dir);
    const std::string csv = std::string(ZEROSIM_SOURCE_DIR) + "/results/validation/published.csv";
    Result r = run_zerosim({"validate", "--scenarios", dir.string(), csv});
    INFO(r.err);
    REQUIRE(r.status == 0);
    std::set<std::string> compared;
    std::istringstream report(read_file(std::string(ZEROSIM_SOURCE_DIR) + "/results/validation/report.csv"));
    for (std::string line; std::getline(report, line);)
      if (line.find(",compared,") != std::string::npos)
        compared.insert(line.substr(0, line.find(',')));
    std::set<std::string> written;
    for (const auto& e : std::filesystem::directory_iterator(dir))
      written.insert(e.path().stem().string().substr(4)); // "row-51" -> "51"
    CHECK(written == compared);
    CHECK(has(r.out, "wrote " + std::to_string(compared.size()) + " row scenarios"));
    const std::string row51 = (dir / "row-51.yaml").string();
    CHECK(read_file(row51).rfind("# Validation row 51 (S03: ", 0) == 0);
    Result mem = run_zerosim({"memory", row51});
    INFO(mem.err);
    CHECK(mem.status == 0);
    Result mixed = run_zerosim({"validate", "--scenarios", dir.string(), "--run"});
    CHECK(mixed.status == 2);
    CHECK(has(mixed.err, "validate --scenarios DIR: writes the rows' scenarios and simulates nothing"));
    std::filesystem::remove_all(dir);
  }

  // Malformed copies of the default scenario, as a user's typo makes them: exit 2 with FILE:LINE:COL, never the
  // internal error (exit 3) that a mutation test of the shipped scenarios found for the first.
  // Each command's help is CLI11's, under the command's entry of `zerosim --help`. Every option that entry names
  // is one the command takes (the entry and the parser are written apart; this ties them).
  TEST_CASE("cli: every command's help lists the options its usage entry names")
  {
    const std::string overview = run_zerosim({"--help"}).out;
    for (const char* cmd :
         {"run", "memory", "describe", "validate", "calibrate", "sweep", "plot", "recommend", "compare"}) {
      CAPTURE(cmd);
      const Result help = run_zerosim({cmd, "--help"});
      CHECK(help.status == 0);
      CHECK(help.err.empty());
      CHECK(run_zerosim({"help", cmd}).out == help.out);
      const std::size_t usage_at = help.out.find(std::string("Usage: zerosim ") + cmd + " [OPTIONS]");
      REQUIRE(usage_at != std::string::npos);
      const std::string entry = help.out.substr(0, usage_at);
      CHECK(has(overview, entry.substr(0, entry.find('\n'))));
      const std::string options = help.out.substr(usage_at);
      for (std::size_t at = entry.find("--"); at != std::string::npos; at = entry.find("--", at + 2)) {
        std::size_t end = at + 2;
        while (end < entry.size() && (std::isalnum(static_cast<unsigned char>(entry[end])) || entry[end] == '-'))
          ++end;
        const std::string option = entry.substr(at, end - at);
        CAPTURE(option);
        CHECK(has(options, "  " + option + " ") + has(options, "," + option + " ") == 1);
      }
    }
  }

  // Absurd sizes get a clear error (exit 2) naming the key and the bound, or finish: never an out-of-memory kill, a
  // wrapped int or an internal error. Before the bounds, 10^9 layers and 10^9 micro-steps of `zerosim memory` ended
  // in std::bad_alloc (exit 3), 10^9 nodes in "no GPU (nodes x gpus_per_node = -294967296)", and 10^8 generated tokens
  // ran past a minute and 8 GiB.
  TEST_CASE("cli: resource bounds: absurd sizes are refused by name or finish")
  {
    const auto refused = [](std::vector<std::string> args, const std::string& message) {
      CAPTURE(args.back());
      const Result r = run_zerosim(std::move(args));
      CHECK(r.status == 2);
      CHECK(has(r.err, message));
    };
    refused({"memory", DEFAULT_SCENARIO, "--set", "model.layers=1000000000"},
            "model.layers: expected at most 4096 layers");
    refused({"memory", DEFAULT_SCENARIO, "--set", "model.hidden=10000000000"},
            "model.hidden: expected a positive integer of at most 2147483647, found \"10000000000\"");
    refused({"memory", DEFAULT_SCENARIO, "--set", "model.hidden=2000000000"},
            "model.hidden: expected a model of at most 1e15 parameters");
    refused({"memory", DEFAULT_SCENARIO, "--set", "cluster.nodes=1000000000"},
            "cluster.nodes: expected at most 67108864 GPUs in all");
    refused({"run", DEFAULT_SCENARIO, "--replay", "full", "--set", "cluster.nodes=2500000"},
            "--replay full: expected at most 1024 ranks");
    refused({"memory", DEFAULT_SCENARIO, "--set", "training.micro_batch=2000000000", "--set",
             "training.grad_accum=2000000000"},
            "training.grad_accum: expected a global batch (micro_batch x data-parallel ranks x grad_accum) of at most "
            "2^40");
    refused({"run", std::string(ZEROSIM_SOURCE_DIR) + "/scenarios/bloom-176b-inference-1xa100-nvme.yaml", "--set",
             "inference.generate_tokens=100000000"},
            "inference.generate_tokens: expected at most 1048576 tokens per request");

    // 10^7 GPUs (the symmetric replay simulates one node) and a sequence of 10^8 tokens finish.
    CHECK(run_zerosim({"run", DEFAULT_SCENARIO, "--set", "cluster.nodes=2500000"}).status == 0);
    CHECK(run_zerosim({"run", DEFAULT_SCENARIO, "--set", "training.seq_len=100000000"}).status == 0);
    // 10^9 micro-steps: `memory` replays the first micro-steps and the last, as the engine does, and the middle ones
    // allocate alike, so the peak is the 16-micro-step scenario's.
    const Result long_accumulation =
        run_zerosim({"memory", DEFAULT_SCENARIO, "--json", "--set", "training.grad_accum=1000000000"});
    REQUIRE(long_accumulation.status == 0);
    const Result sixteen = run_zerosim({"memory", DEFAULT_SCENARIO, "--json"});
    const auto gpu_peak = [](const std::string& json) {
      const std::size_t at = json.find("\"gpu\": ");
      return at == std::string::npos ? std::string() : json.substr(at, json.find(',', at) - at);
    };
    CHECK(!gpu_peak(sixteen.out).empty());
    CHECK(gpu_peak(long_accumulation.out) == gpu_peak(sixteen.out));
  }

  TEST_CASE("cli: malformed YAML structure exits with status 2 naming file and line")
  {
    const std::string text = read_file(DEFAULT_SCENARIO);
    const std::size_t name_at = text.find("\nname:");
    REQUIRE(name_at != std::string::npos);
    const int name_line = 2 + static_cast<int>(std::count(text.begin(), text.begin() + name_at, '\n'));

    // 1. The top-level name: indented by two spaces (the mutation that gave "internal error: invalid node").
    const std::string indented = write_temp("indented.yaml", std::string(text).insert(name_at + 1, "  "));
    for (const char* cmd : {"memory", "run"}) {
      Result r = run_zerosim({cmd, indented});
      CHECK(r.status == 2);
      CHECK(has(r.err, indented + ":" + std::to_string(name_line + 1) + ":1: not valid YAML: a second document"));
    }

    // 2. A list as a key.
    const std::string list_key = write_temp("list-key.yaml", text + "[training, seq_len]: 4096\n");
    const int last_line = 1 + static_cast<int>(std::count(text.begin(), text.end(), '\n'));
    Result r2 = run_zerosim({"memory", list_key});
    CHECK(r2.status == 2);
    CHECK(r2.err ==
          list_key + ":" + std::to_string(last_line) + ":1: (top level): expected a key name, found a list\n");

    // 3. cluster.overrides as a scalar (silently ignored before: a value the user meant was dropped).
    const std::size_t cluster_at = text.find("\ncluster:\n");
    REQUIRE(cluster_at != std::string::npos);
    const int cluster_line = 2 + static_cast<int>(std::count(text.begin(), text.begin() + cluster_at, '\n'));
    const std::string overrides =
        write_temp("overrides.yaml", std::string(text).insert(cluster_at + 10, "  overrides: gpu.memory\n"));
    Result r3 = run_zerosim({"memory", overrides});
    CHECK(r3.status == 2);
    CHECK(
        has(r3.err, overrides + ":" + std::to_string(cluster_line + 1) + ":14: cluster.overrides: expected a mapping"));

    for (const std::string& f : {indented, list_key, overrides})
      std::filesystem::remove(f);
  }

  TEST_CASE("cli: the estimator mode prints DeepSpeed's figures")
  {
    // docs/deepspeed-schedule.md §10.2: ZeRO-2, 2851M params, 1 node x 8 GPUs, offload_optimizer=cpu:
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
