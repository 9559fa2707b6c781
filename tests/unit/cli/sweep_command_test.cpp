// `zerosim sweep` as a user runs it: the real binary killed halfway loses no finished point, and --resume completes
// the sweep to the bytes of an uninterrupted run (apart from wall_s).
#include <doctest/doctest.h>

#include <cstdlib>

#include "core/json.hpp"
#include "memory/memory_model.hpp"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

extern char** environ;

namespace fs = std::filesystem;

namespace {

const std::string BINARY = std::string(ZEROSIM_BINARY_DIR) + "/sim/zerosim";
const std::string SCENARIO = std::string(ZEROSIM_SOURCE_DIR) + "/scenarios/llama2-70b-8xa100-200gbps.yaml";
/// 12 small points, one of which does not fit (the file says why).
const std::string SMALL = std::string(ZEROSIM_SOURCE_DIR) + "/tests/data/scenarios/sweep-fit.yaml";

pid_t spawn(const std::vector<std::string>& args, const std::string& err_file = "/dev/null",
            const std::string& out_file = "/dev/null", const std::string& cwd = "")
{
  std::vector<char*> argv;
  for (const std::string& a : args)
    argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, out_file.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_addopen(&actions, STDERR_FILENO, err_file.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (!cwd.empty())
    posix_spawn_file_actions_addchdir_np(&actions, cwd.c_str()); // after the opens: their paths are the caller's
  pid_t pid = -1;
  REQUIRE(posix_spawn(&pid, argv[0], &actions, nullptr, argv.data(), environ) == 0);
  posix_spawn_file_actions_destroy(&actions);
  return pid;
}

int wait_for(pid_t pid)
{
  int status = 0;
  ::waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

std::string slurp(const fs::path& p)
{
  std::ifstream in(p, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::size_t lines(const fs::path& p)
{
  const std::string t = slurp(p);
  return static_cast<std::size_t>(std::count(t.begin(), t.end(), '\n'));
}

/// Each line of a CSV without its last cell (wall_s).
std::string csv_without_wall(const std::string& text)
{
  std::string out, line;
  std::istringstream is(text);
  while (std::getline(is, line))
    out += line.substr(0, line.rfind(',')) + "\n";
  return out;
}

std::vector<std::string> sweep_args(const fs::path& dir)
{
  return {BINARY,
          "sweep",
          SCENARIO,
          "--sweep",
          "training.micro_batch=1..8:x2",
          "--sweep",
          "deepspeed.zero_optimization.stage=1..3",
          "-j",
          "2",
          "--out",
          dir.string()};
}

/// A PNG's signature and its IHDR width and height (big-endian, bytes 16-23).
bool png_of_size(const fs::path& p, unsigned width, unsigned height)
{
  const std::string b = slurp(p);
  if (b.size() < 24 || b.compare(0, 8, "\x89PNG\r\n\x1a\n") != 0 || b.compare(12, 4, "IHDR") != 0)
    return false;
  auto be32 = [&](std::size_t at) {
    unsigned v = 0;
    for (std::size_t i = 0; i < 4; ++i)
      v = (v << 8) | static_cast<unsigned char>(b[at + i]);
    return v;
  };
  return be32(16) == width && be32(20) == height;
}

/// An SVG document: an <svg> element that is closed, with no gnuplot error text.
bool svg_document(const fs::path& p)
{
  const std::string t = slurp(p);
  return t.find("<svg") != std::string::npos && t.find("</svg>") != std::string::npos;
}

bool has(const std::string& text, const std::string& part)
{
  return text.find(part) != std::string::npos;
}

std::string printed(const char* format, double v)
{
  char buf[64];
  std::snprintf(buf, sizeof buf, format, v);
  return buf;
}

/// The lines of a text.
std::vector<std::string> lines_of(const std::string& text)
{
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string l; std::getline(in, l);)
    out.push_back(l);
  return out;
}

/// An empty folder build/tests-tmp/NAME for a test's files.
fs::path fresh_dir(const std::string& name)
{
  const fs::path dir = fs::path(ZEROSIM_BINARY_DIR) / "tests-tmp" / name;
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

/// One point of a sweep.jsonl, as the tests read it.
struct Point {
  std::uint64_t point = 0;
  std::string mb, stage;
  double tokens_per_s = 0, step_time_s = 0, tflops = 0, memory_gib = 0, capacity_gib = 0, shortfall_gib = 0;
  bool fits = true;
  bool tight = false; ///< the run JSON's tight.gpu: fits within memory::DEFAULT_HEADROOM
};

std::vector<Point> points_of(const fs::path& jsonl)
{
  constexpr double GIB = 1024.0 * 1024.0 * 1024.0;
  std::vector<Point> out;
  for (const std::string& line : lines_of(slurp(jsonl))) {
    const zerosim::core::Json j = zerosim::core::Json::parse(line);
    const zerosim::core::Json& r = j.at("result");
    Point p;
    p.point = j.at("point").get<std::uint64_t>();
    p.mb = j.at("values").at("training.micro_batch").get<std::string>();
    p.stage = j.at("values").at("deepspeed.zero_optimization.stage").get<std::string>();
    p.tokens_per_s = r.at("tokens_per_s").get<double>();
    p.step_time_s = r.at("step_time_s").get<double>();
    p.tflops = r.at("tflops_per_gpu").at("model").get<double>();
    p.memory_gib = r.at("peak_memory_bytes").at("gpu_device").get<double>() / GIB;
    p.capacity_gib = r.at("capacity_bytes").at("gpu").get<double>() / GIB;
    p.shortfall_gib = r.at("shortfall_bytes").get<double>() / GIB;
    p.fits = r.at("fits").get<bool>();
    p.tight = r.at("tight").at("gpu").get<bool>();
    out.push_back(p);
  }
  return out;
}

/// A summary row as docs/sweep.md "Summary" lays it out: rank (4), point (5), mb (2), stage (5), then the figures.
std::string summary_row(const std::string& rank, const Point& p)
{
  auto left = [](const std::string& s, std::size_t w) { return std::string(w - std::min(w, s.size()), ' ') + s; };
  std::string row = "  " + left(rank, 4) + "  " + left(std::to_string(p.point), 5) + "  " + left(p.mb, 2) + "  " +
                    left(p.stage, 5) + left(printed("%.1f", p.tokens_per_s), 14) +
                    left(printed("%.3f s", p.step_time_s), 14) + left(printed("%.1f", p.tflops), 12) + "  " +
                    printed("%.1f", p.memory_gib) + " of " + printed("%.1f GiB", p.capacity_gib);
  if (!p.fits)
    row += "  does not fit: short by " + printed("%.1f GiB", p.shortfall_gib);
  if (p.tight)
    row += "  tight: within the memory headroom (docs/recommend.md)";
  return row;
}

/// The cells of a candidates.csv line split at every comma (no quoting: a quoted status with commas splits into more
/// cells, which the callers skip or do not read).
std::vector<std::string> comma_cells(const std::string& line)
{
  std::vector<std::string> cells;
  std::stringstream ls(line);
  std::string cell;
  while (std::getline(ls, cell, ','))
    cells.push_back(cell);
  return cells;
}

/// Issue 29's margin, on recommend's candidates.csv and printed text: every ranked candidate leaves at least
/// memory::DEFAULT_HEADROOM of its GPU free; the tight ones (fit, less free) have no rank, the text names each one
/// "tight", and some candidate is tight (so the check is not vacuous). Cells: rank 0, fits 9, tight 10,
/// gpu_device_bytes 14, capacity_bytes 15.
void check_headroom(const fs::path& csv_path, const std::string& printed)
{
  std::istringstream csv(slurp(csv_path));
  std::string line;
  std::getline(csv, line);
  REQUIRE(line.rfind("rank,gpus,stage,sharding,offload,activation_checkpointing,micro_batch,grad_accum,status,fits,"
                     "tight,step_time_s,tokens_per_s,tflops_per_gpu_model,gpu_device_bytes,capacity_bytes,",
                     0) == 0);
  int ranked = 0, tight = 0;
  while (std::getline(csv, line)) {
    const std::vector<std::string> cells = comma_cells(line);
    if (cells.size() < 16 || cells[8] != "done")
      continue; // a status with commas is not a done candidate
    const double free_share = 1 - std::stod(cells[14]) / std::stod(cells[15]);
    if (!cells[0].empty()) {
      ++ranked;
      CHECK(cells[10] == "false");
      CHECK(free_share >= zerosim::memory::DEFAULT_HEADROOM);
    }
    if (cells[10] == "true") {
      ++tight;
      CHECK(cells[0].empty());
      CHECK(cells[9] == "true");
      CHECK(free_share < zerosim::memory::DEFAULT_HEADROOM);
    }
  }
  CHECK(ranked > 0);
  CHECK(tight > 0);
  const std::string listed = "Tight (fit, but with less than 17.7 % of the GPU free: never ranked; fastest first):";
  CHECK(printed.find(listed) != std::string::npos);
  std::size_t shown = 0;
  for (std::size_t at = printed.find("\n  tight  "); at != std::string::npos; at = printed.find("\n  tight  ", at + 1))
    ++shown;
  CHECK(shown == std::min<std::size_t>(static_cast<std::size_t>(tight), 5));
}

} // namespace

TEST_SUITE("cli")
{
  TEST_CASE("compare: a published torchtitan log beside the Llama 3 8B FSDP scenario, each figure in its definition")
  {
    const fs::path base = fresh_dir("cli-compare");
    const std::string logs = std::string(ZEROSIM_SOURCE_DIR) + "/tests/data/logs/";
    // The log ran batch 1 per GPU on 8 H100s (tests/data/logs/README.md): the scenario set to match.
    CHECK(wait_for(spawn({BINARY, "compare", std::string(ZEROSIM_SOURCE_DIR) + "/scenarios/llama3-8b-fsdp-8xh100.yaml",
                          logs + "torchtitan-llama3-8b-bf16-h100x8-torchao-docs.log", "--set", "training.micro_batch=1",
                          "--set", "training.global_batch=8", "--out", (base / "plot").string()},
                         (base / "stderr").string(), (base / "stdout").string())) == 0);
    const std::string printed = slurp(base / "stdout");
    INFO(printed);
    // The log's medians of steps 20-40 (4 significant figures): tps 6,300, tflops 364.9, mfu 36.89 %, and the
    // largest memory, 30.89 GiB, which torchtitan reports as torch's max reserved.
    CHECK(std::regex_search(printed, std::regex("tokens/s per GPU +6300 ")));
    CHECK(std::regex_search(printed, std::regex("TFLOPs per GPU \\(model\\) +364.9 ")));
    CHECK(std::regex_search(printed, std::regex("MFU +36.89 % ")));
    CHECK(std::regex_search(printed, std::regex("peak GPU memory, reserved +30.89 GiB ")));
    CHECK(has(printed, "(median of 3 steps after 2 skipped)"));
    // The table and the signed errors as bars, in --out.
    CHECK(fs::exists(base / "plot" / "compare.csv"));
    CHECK(png_of_size(base / "plot" / "errors.png", 900, 600));
    CHECK(svg_document(base / "plot" / "errors.svg"));
    CHECK(has(printed, "compare: table " + (base / "plot" / "compare.csv").string() + "\n"));
    // The prediction fits the H100s' 80 GB: no warning, every row "yes".
    CHECK_FALSE(has(printed, "does not fit as predicted"));
    CHECK(std::regex_search(
        printed, std::regex("reserved +30.89 GiB +[0-9.]+ GiB +[-+][0-9.]+ % +yes +llama3-8b-fsdp-8xh100.yaml +")));
    CHECK(has(slurp(base / "stderr"), "tps: tokens per second per GPU"));
    // A log of another batch is named in a warning.
    CHECK(
        wait_for(spawn({BINARY, "compare", SCENARIO, logs + "megatron-deepspeed-ds-timer-alcf-keyed-polaris-a100x8.log",
                        "--out", (base / "plot2").string()},
                       (base / "stderr2").string())) == 0);
    CHECK(has(slurp(base / "stderr2"), "global batch size 256 in the log, 128 in the scenario"));
    // A measured-runs CSV (tests/data/calibration/runs.csv, the format calibrate reads): each row in its definition,
    // and the signed error of a time as (measured - predicted) / measured, from the printed prediction (4 figures).
    CHECK(wait_for(
              spawn({BINARY, "compare", "--runs", std::string(ZEROSIM_SOURCE_DIR) + "/tests/data/calibration/runs.csv",
                     "--out", (base / "plot3").string()},
                    "/dev/null", (base / "runs.txt").string())) == 0);
    const std::string runs = slurp(base / "runs.txt");
    INFO(runs);
    std::smatch st;
    REQUIRE(std::regex_search(runs, st, std::regex("step time \\(s\\) +12.50 s +([0-9.]+) s +([-+0-9.]+) %")));
    CHECK(std::stod(st[2]) == doctest::Approx((12.5 - std::stod(st[1])) / 12.5 * 100).epsilon(0.005).scale(0));
    // Numbers in one format, 4 significant figures with trailing zeros: 145 TFLOPs is 145.0.
    CHECK(std::regex_search(runs, std::regex("TFLOPs per GPU \\(model\\) +145.0 ")));
    // 6.4e10 bytes reserved = 59.60 GiB. Each --runs row names its scenario (runs.csv: ../scenarios/by-name.yaml).
    CHECK(std::regex_search(runs, std::regex("peak GPU memory, reserved +59.60 GiB +[0-9.]+ GiB +[-+][0-9.]+ %  "
                                             "(yes|NO) +by-name.yaml +[^ ]*runs.csv:")));
    // No step lines left after the warm-up: said so.
    CHECK(wait_for(spawn({BINARY, "compare", SCENARIO, logs + "megatron-deepspeed-ds-timer-alcf-polaris.log"},
                         (base / "stderr3").string())) == 0);
    CHECK(has(slurp(base / "stderr3"), "no figure left to compare"));
  }

  // Issue 29's margin on a Llama-2-13B ZeRO-2 scenario: the shipped 13B ds_config scenario (8 x A100-40GB) set to
  // stage 2 with the optimizer on the CPU (recommend then searches every stage and offload from it).
  TEST_CASE("recommend: the ranked candidates leave the default headroom free, tight ones are printed as tight")
  {
    const fs::path base = fresh_dir("cli-recommend-13b");
    CHECK(wait_for(spawn({BINARY, "recommend", ZEROSIM_SOURCE_DIR "/scenarios/llama2-13b-hf-ds-config.yaml", "-j", "2",
                          "--set", "deepspeed.zero_optimization.stage=2", "--set",
                          "deepspeed.zero_optimization.offload_param.device=none", "--out", (base / "out").string()},
                         "/dev/null", (base / "stdout").string())) == 0);
    const std::string printed = slurp(base / "stdout");
    INFO(printed);
    check_headroom(base / "out" / "candidates.csv", printed);
  }

  TEST_CASE("recommend: the default scenario's winner fits, its scenario.yaml gives the printed figures, and the "
            "ranking agrees with zerosim run")
  {
    const fs::path base = fresh_dir("cli-recommend");
    const fs::path dir = base / "out";
    CHECK(wait_for(spawn({BINARY, "recommend", SCENARIO, "-j", "2", "--out", dir.string()}, "/dev/null",
                         (base / "stdout").string())) == 0);
    const std::string printed = slurp(base / "stdout");
    INFO(printed);
    std::smatch m;
    REQUIRE(std::regex_search(printed, m, std::regex("Recommended: (.*): ([0-9.]+) s per step")));
    const std::string step = m[2];
    // The written scenario goes through zerosim's strict reader (it names ds_config.json) and gives that step time.
    CHECK(wait_for(spawn({BINARY, "run", (dir / "scenario.yaml").string()}, "/dev/null", (base / "run").string())) ==
          0);
    const std::string run = slurp(base / "run");
    CHECK(has(run, "step time              " + step + " s"));
    CHECK(wait_for(spawn({BINARY, "run", (dir / "scenario.yaml").string(), "--json"}, "/dev/null",
                         (base / "run.json").string())) == 0);
    CHECK(std::regex_search(slurp(base / "run.json"), std::regex("\"fits\": *true")));
    // Every ranked candidate of candidates.csv (12 on the default scenario), each run through zerosim run with its
    // settings: the same step times, in the same order.
    std::istringstream csv(slurp(dir / "candidates.csv"));
    std::string line;
    std::getline(csv, line);
    std::vector<std::pair<int, std::vector<std::string>>> top; // rank -> cells
    while (std::getline(csv, line)) {
      const std::vector<std::string> cells = comma_cells(line);
      if (!cells[0].empty())
        top.emplace_back(std::stoi(cells[0]), cells);
    }
    REQUIRE(top.size() >= 2);
    std::sort(top.begin(), top.end());
    std::vector<double> direct;
    for (const auto& [rank, c] : top) {
      // gpus,stage,sharding,offload,activation_checkpointing,micro_batch,grad_accum at cells 1-7; step_time_s at 10.
      const std::string offload = c[4];
      const std::string opt = offload == "none" ? "none" : offload == "optimizer + params nvme" ? "nvme" : "cpu";
      const std::string par = offload == "optimizer + params cpu"    ? "cpu"
                              : offload == "optimizer + params nvme" ? "nvme"
                                                                     : "none";
      const fs::path json = base / ("rank" + std::to_string(rank) + ".json");
      CHECK(wait_for(spawn({BINARY, "run", SCENARIO, "--json", "--set", "deepspeed.zero_optimization.stage=" + c[2],
                            "--set", "deepspeed.zero_optimization.offload_optimizer.device=" + opt, "--set",
                            "deepspeed.zero_optimization.offload_param.device=" + par, "--set",
                            "training.activation_checkpointing=" + c[5], "--set", "training.micro_batch=" + c[6],
                            "--set", "training.grad_accum=" + c[7]},
                           "/dev/null", json.string())) == 0);
      std::smatch t;
      const std::string text = slurp(json);
      REQUIRE(std::regex_search(text, t, std::regex("\"step_time_s\": *([0-9.eE+-]+)")));
      direct.push_back(std::stod(t[1]));
      CHECK(direct.back() == doctest::Approx(std::stod(c[11])).epsilon(1e-12));
    }
    CHECK(std::is_sorted(direct.begin(), direct.end()));
    check_headroom(dir / "candidates.csv", printed);

    // Priced: ranked by cost per million tokens, the winner's from its step time: 8 GPUs x $2 per GPU-hour x the step's
    // seconds / 3600, over the step's 128 x 4096 = 524,288 tokens.
    CHECK(wait_for(spawn({BINARY, "recommend", SCENARIO, "-j", "2", "--set", "price_per_gpu_hour=2", "--out",
                          (base / "priced").string()},
                         "/dev/null", (base / "priced.txt").string())) == 0);
    const std::string priced = slurp(base / "priced.txt");
    CHECK(has(priced, "Ranked (cheapest per million tokens first):"));
    std::smatch p;
    REQUIRE(std::regex_search(priced, p, std::regex("\\n +1 +([0-9.]+) s .*GiB\\) +([0-9.]+) ")));
    CHECK(std::stod(p[2]) == doctest::Approx(8 * 2.0 * std::stod(p[1]) / 3600 / 524288 * 1e6).epsilon(0.002).scale(0));
  }

  // Issue 32: recommend on a small DeepSpeed pipeline (tests/data/scenarios/pipeline-recommend.yaml: 4 GPUs, 8 blocks,
  // global batch 8). The search: t 1, 2, 4 x p 2, 4 (11 splits of the batch) x checkpointing off or full x ZeRO 0, 1,
  // 1 with the optimizer on the CPU = 66 candidates, each simulated (ZeRO-1 under the pipeline engine is modelled,
  // docs/pipeline-parallel.md §5; every candidate fits this small model). The winner is written as DeepSpeed's config with the
  // pipeline block, the scenario naming it (zerosim run gives the printed step time) and Megatron-DeepSpeed's
  // arguments (no Hugging Face snippet: the Trainer has no DeepSpeed pipeline).
  TEST_CASE("recommend: a small DeepSpeed pipeline, its degrees searched, the winner's config and launch arguments")
  {
    const fs::path base = fresh_dir("cli-recommend-pipeline");
    const fs::path dir = base / "out";
    const std::string pipeline = ZEROSIM_SOURCE_DIR "/tests/data/scenarios/pipeline-recommend.yaml";
    CHECK(wait_for(spawn({BINARY, "recommend", pipeline, "-j", "2", "--out", dir.string()}, (base / "stderr").string(),
                         (base / "stdout").string())) == 0);
    const std::string printed = slurp(base / "stdout");
    INFO(printed);
    CHECK(has(printed, "recommend: searched 66 candidates of " + pipeline +
                           " (tensor-parallel x pipeline degree x ZeRO stage 0 or 1 x optimizer offload x activation "
                           "checkpointing x micro-batch, global batch fixed): "));
    CHECK(has(printed, ", 0 not simulated\n"));
    CHECK(has(slurp(base / "stderr"), "recommend: 66 candidates, their memory analysed first, 2 at once\n"));
    std::smatch m;
    REQUIRE(std::regex_search(printed, m,
                              std::regex("Recommended: stage ([01]), [^,]+, [^,]+, tp ([0-9]+) x pp ([0-9]+) x dp "
                                         "([0-9]+), mb ([0-9]+) x ([0-9]+) micro-batches, 4 GPUs: [0-9.]+ s per step")));
    const int stage = std::stoi(m[1]), t = std::stoi(m[2]), p = std::stoi(m[3]), dp = std::stoi(m[4]),
              mb = std::stoi(m[5]), micro = std::stoi(m[6]);
    CHECK(t * p * dp == 4);
    CHECK(mb * micro * dp == 8); // the global batch kept
    // candidates.csv: the degrees after the GPUs; every row simulated (none skipped as not modelled).
    std::istringstream csv(slurp(dir / "candidates.csv"));
    std::string line;
    std::getline(csv, line);
    CHECK(line.rfind("rank,gpus,tensor_parallel,pipeline_parallel,stage,sharding,offload,", 0) == 0);
    int rows = 0, skipped = 0;
    std::string winner_step; // step_time_s of rank 1 (cell 13 with the two degree columns)
    while (std::getline(csv, line)) {
      const std::vector<std::string> cells = comma_cells(line);
      ++rows;
      if (has(line, "not modelled: "))
        ++skipped;
      if (cells[0] == "1")
        winner_step = cells[13];
    }
    REQUIRE_FALSE(winner_step.empty());
    CHECK(rows == 66);
    CHECK(skipped == 0);
    // ds_config.json: DeepSpeed's pipeline block and batch keys; the scenario naming it gives the printed figures.
    const zerosim::core::Json ds = zerosim::core::Json::parse(slurp(dir / "ds_config.json"));
    CHECK(ds["pipeline"]["stages"] == p);
    CHECK(ds["train_batch_size"] == 8);
    CHECK(ds["train_micro_batch_size_per_gpu"] == mb);
    CHECK(ds["gradient_accumulation_steps"] == micro);
    CHECK(ds["zero_optimization"]["stage"] == stage);
    CHECK(wait_for(spawn({BINARY, "run", (dir / "scenario.yaml").string(), "--json"}, "/dev/null",
                         (base / "run.json").string())) == 0);
    const zerosim::core::Json run = zerosim::core::Json::parse(slurp(base / "run.json"));
    CHECK(run["step_time_s"].get<double>() == doctest::Approx(std::stod(winner_step)).epsilon(1e-12));
    CHECK(run["parallelism"]["tp"] == t);
    CHECK(run["parallelism"]["pp"] == p);
    // Megatron-DeepSpeed's arguments: valid bash, the degrees, batch, stage and config of the winner.
    CHECK_FALSE(fs::exists(dir / "hf_trainer.py"));
    const std::string args = slurp(dir / "megatron_deepspeed_args.sh");
    CHECK(wait_for(spawn({"/bin/bash", "-n", (dir / "megatron_deepspeed_args.sh").string()})) == 0);
    for (const std::string& a : std::vector<std::string>{
             "--tensor-model-parallel-size " + std::to_string(t), "--pipeline-model-parallel-size " + std::to_string(p),
             "--pp-partition-method 'type:transformer'", "--micro-batch-size " + std::to_string(mb),
             "--global-batch-size 8", "--num-layers 8", "--hidden-size 1024", "--num-attention-heads 16",
             "--seq-length 1024", "--max-position-embeddings 1024", "--bf16", "--deepspeed_config ds_config.json",
             "--zero-stage " + std::to_string(stage)})
      CHECK_MESSAGE(has(args, "    " + a + "\n"), a);
  }

  TEST_CASE("sweep: under mpirun -np 2 (each rank forking 2 workers) and as two merged shards, the local run's files")
  {
    const fs::path base = fresh_dir("cli-sweep-mpi");
    const std::vector<std::string> grid = {"--sweep", "training.micro_batch=1..8:x2", "--sweep",
                                           "deepspeed.zero_optimization.stage=2,3"};
    auto sweep = [&](std::vector<std::string> front, std::vector<std::string> back) {
      std::vector<std::string> args = std::move(front);
      for (const std::string& a : std::vector<std::string>{BINARY, "sweep", SCENARIO})
        args.push_back(a);
      args.insert(args.end(), grid.begin(), grid.end());
      args.insert(args.end(), back.begin(), back.end());
      return args;
    };
    CHECK(wait_for(spawn(sweep({}, {"-j", "2", "--out", (base / "local").string()}))) == 0);
    const std::string mpirun = "/usr/bin/mpirun"; // Debian's openmpi-bin, installed by tools/dev.sh
    REQUIRE(fs::exists(mpirun));
#ifdef __SANITIZE_ADDRESS__
    // Under tools/dev.sh sanitize: OpenMPI keeps what MPI_Init allocated until the process exits, suppressed by
    // library in tools/sanitize/lsan.supp. LeakSanitizer names the library only from whole stacks (the slow
    // unwinder) and from plugins still loaded at exit (OpenMPI's dlclose disabled); for the ranks this test starts.
    const char* asan = std::getenv("ASAN_OPTIONS");
    ::setenv("ASAN_OPTIONS", (std::string(asan != nullptr ? asan : "") + ":fast_unwind_on_malloc=0").c_str(), 1);
    ::setenv("OMPI_MCA_mca_base_component_disable_dlclose", "1", 1);
#endif
    const fs::path log = base / "mpi.log";
    // Shared memory between the ranks without CMA single copies, which containers' ptrace rules often forbid.
    CHECK(wait_for(spawn(sweep({mpirun, "--allow-run-as-root", "--oversubscribe", "--mca", "btl", "self,vader", "--mca",
                                "btl_vader_single_copy_mechanism", "none", "-np", "2"},
                               {"-j", "2", "--mpi", "--out", (base / "mpi").string()}),
                         log.string())) == 0);
    const std::string mpi_log = slurp(log);
    INFO(mpi_log);
    // Every rank ran at least one point, and says how many.
    CHECK(has(mpi_log, "sweep --mpi: 2 ranks, 2 workers each"));
    CHECK(mpi_log.find("sweep --mpi: rank 0 ran ") != std::string::npos);
    CHECK(mpi_log.find("sweep --mpi: rank 1 ran ") != std::string::npos);
    CHECK_FALSE(has(mpi_log, "fewer points to run than ranks"));
    CHECK(csv_without_wall(slurp(base / "mpi" / "sweep.csv")) == csv_without_wall(slurp(base / "local" / "sweep.csv")));
    CHECK(slurp(base / "mpi" / "sweep-plan.json") == slurp(base / "local" / "sweep-plan.json"));

    CHECK(wait_for(spawn(sweep({}, {"--shard", "1/2", "--out", (base / "s1").string()}))) == 0);
    CHECK(wait_for(spawn(sweep({}, {"--shard", "2/2", "--out", (base / "s2").string()}))) == 0);
    CHECK(wait_for(spawn({BINARY, "sweep", "--merge", (base / "s2").string(), (base / "s1").string(), "--out",
                          (base / "merged").string()})) == 0);
    CHECK(csv_without_wall(slurp(base / "merged" / "sweep.csv")) ==
          csv_without_wall(slurp(base / "local" / "sweep.csv")));
    CHECK(slurp(base / "merged" / "sweep-plan.json") == slurp(base / "local" / "sweep-plan.json"));
  }

  TEST_CASE("sweep: 16 points of the default scenario with -j 2 write the CSV, the JSON lines, the plots and scripts")
  {
    const fs::path dir = fs::path(ZEROSIM_BINARY_DIR) / "tests-tmp" / "cli-sweep16";
    fs::remove_all(dir);
    fs::create_directories(dir.parent_path());
    CHECK(wait_for(
              spawn({BINARY, "sweep", SCENARIO, "--sweep", "training.micro_batch=1..8:x2", "--sweep",
                     "deepspeed.zero_optimization.stage=2,3", "--sweep",
                     "deepspeed.zero_optimization.offload_optimizer.device=cpu,none", "-j", "2", "--out", dir.string()},
                    "/dev/null", (dir.parent_path() / "cli-sweep16.stdout").string())) == 0);
    CHECK(lines(dir / "sweep.csv") == 17); // header and 16 points
    CHECK(lines(dir / "sweep.jsonl") == 16);
    for (const char* plot : {"throughput", "memory", "breakdown"}) {
      INFO(plot);
      CHECK(png_of_size(dir / (std::string(plot) + ".png"), 900, 600));
      CHECK(svg_document(dir / (std::string(plot) + ".svg")));
      const std::string gp = slurp(dir / (std::string(plot) + ".gp"));
      CHECK(has(gp, "set title "));
      CHECK(has(gp, "set xlabel "));
      CHECK(has(gp, "set ylabel "));
      CHECK(has(gp, "set key "));
    }
    // Units on the axes.
    CHECK(has(slurp(dir / "throughput.gp"), "set ylabel 'throughput (tokens/s, all GPUs)'"));
    CHECK(has(slurp(dir / "throughput.gp"), "set ylabel 'TFLOPs per GPU (model, TFLOP/s)'"));
    CHECK(has(slurp(dir / "throughput.gp"), "set xlabel \"micro-batch per GPU (sequences), log scale\""));
    CHECK(has(slurp(dir / "breakdown.gp"), "set ylabel 'step time (s)'"));
    // The memory plot draws the GPU's capacity (the A100-80GB's 80 GiB) and marks the points that do not fit.
    const std::string mem = slurp(dir / "memory.gp");
    CHECK(has(mem, "set ylabel 'peak GPU memory, device total (GiB; y from 0)'"));
    CHECK(has(mem, "capacity = 80\n"));
    CHECK(has(mem, "title 'GPU capacity'"));
    CHECK(has(mem, "title 'does not fit in GPU memory'"));
    // One series per stage and offload: four blocks in the data.
    CHECK(has(slurp(dir / "memory.dat"), "# stage 3, offload_optimizer.device none\n"));

    // `zerosim plot DIR` redraws them, and prints the ranked summary the sweep printed: the lines before its own
    // "plot: ..." lines are the first lines of the sweep's output.
    fs::remove(dir / "memory.png");
    const fs::path replot = dir.parent_path() / "cli-sweep16-plot.stdout";
    CHECK(wait_for(spawn({BINARY, "plot", dir.string()}, "/dev/null", replot.string())) == 0);
    CHECK(png_of_size(dir / "memory.png", 900, 600));
    const std::vector<std::string> swept = lines_of(slurp(dir.parent_path() / "cli-sweep16.stdout"));
    const std::vector<std::string> plotted = lines_of(slurp(replot));
    const auto first_plot =
        std::find_if(plotted.begin(), plotted.end(), [](const std::string& l) { return l.rfind("plot: ", 0) == 0; });
    const std::vector<std::string> summary(plotted.begin(), first_plot);
    // The head, the column names, 4 points that fit, the 10 nearest of the 12 that do not and a "... 2 more" line.
    REQUIRE(summary.size() == 17);
    REQUIRE(swept.size() >= summary.size());
    CHECK(std::vector<std::string>(swept.begin(), swept.begin() + static_cast<long>(summary.size())) == summary);
    CHECK(summary[0].rfind("sweep: 16 points ranked by tokens/s", 0) == 0);
  }

  TEST_CASE("sweep: killed halfway, a sweep keeps every finished point, and --resume completes it")
  {
    const fs::path base = fresh_dir("cli-sweep");
    const fs::path whole = base / "whole", killed = base / "killed";
    CHECK(wait_for(spawn(sweep_args(whole))) == 0);
    REQUIRE(lines(whole / "sweep.jsonl") == 12);

    const pid_t pid = spawn(sweep_args(killed));
    // Kill it (SIGKILL: no chance to tidy up) once four points have finished, before all twelve have.
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    while (lines(killed / "sweep.jsonl") < 4 && std::chrono::steady_clock::now() < deadline)
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    ::kill(pid, SIGKILL);
    wait_for(pid);
    const std::size_t kept = lines(killed / "sweep.jsonl");
    INFO("points finished before the kill: " << kept);
    CHECK(kept >= 4);
    std::vector<std::string> resume = sweep_args(killed);
    resume.push_back("--resume");
    CHECK(wait_for(spawn(resume)) == 0);
    CHECK(csv_without_wall(slurp(killed / "sweep.csv")) == csv_without_wall(slurp(whole / "sweep.csv")));
    CHECK(lines(killed / "sweep.jsonl") == 12);
  }

  TEST_CASE("sweep: 12 points (micro-batch x ZeRO stage) with one that does not fit: marked in every plot, never the "
            "best, and a ranked summary printed")
  {
    const fs::path base = fresh_dir("cli-sweep-fit");
    const fs::path dir = base / "out";
    // The grid is the scenario's sweep: block (micro-batch 1, 2, 4 x stage 0, 1, 2, 3).
    CHECK(wait_for(spawn({BINARY, "sweep", SMALL, "-j", "2", "--out", dir.string()}, (base / "stderr").string(),
                         (base / "stdout").string())) == 0);
    const std::vector<Point> points = points_of(dir / "sweep.jsonl");
    REQUIRE(points.size() == 12);
    // The one point that does not fit is micro-batch 4 under stage 0 (tests/data/scenarios/sweep-fit.yaml says why):
    // point 8 in the nested-loop order, the last axis fastest (micro-batch index 2 x 4 stages + stage index 0).
    std::vector<Point> unfit;
    for (const Point& p : points)
      if (!p.fits)
        unfit.push_back(p);
    REQUIRE(unfit.size() == 1);
    const Point bad = unfit.front();
    CHECK(bad.point == 8);
    CHECK(bad.mb == "4");
    CHECK(bad.stage == "0");
    CHECK(bad.shortfall_gib > 0);

    // throughput: its row says fits 0; the lines join only the points that fit; the point that does not fit is a
    // red cross drawn at 0 with its legend entry; the y axes start at 0 and the x axis says it is logarithmic.
    const std::string tdat = slurp(dir / "throughput.dat");
    CHECK(std::regex_search(tdat, std::regex("\n4 [0-9.e+]+ [0-9.e+]+ 0 8\n")));
    CHECK(std::count(tdat.begin(), tdat.end(), '\n') > 12);
    const std::string tgp = slurp(dir / "throughput.gp");
    CHECK(has(tgp, "'throughput.dat' index 0 using 1:($4 == 1 ? $2 : 1/0) with linespoints title \"stage 0\""));
    CHECK(has(tgp, "'throughput.dat' index 0 using 1:($4 == 1 ? $3 : 1/0) with linespoints title \"stage 0\""));
    CHECK(has(tgp, "'throughput.dat' index 0 using 1:($4 == 0 ? 0 : 1/0) with points pt 2 ps 2 lw 2 lc rgb 'red' "
                   "title 'does not fit in GPU memory (drawn at 0)'"));
    CHECK(has(tgp, "set yrange [0:*]\n"));
    CHECK(has(tgp, "set xlabel \"micro-batch per GPU (sequences), log scale\""));
    CHECK(has(tgp, "(y from 0)"));
    // memory: the same cross on the point, the axis from 0.
    const std::string mdat = slurp(dir / "memory.dat");
    CHECK(std::regex_search(mdat, std::regex("\n4 [0-9.e+]+ 0 [0-9.e+]+ 8\n")));
    const std::string mgp = slurp(dir / "memory.gp");
    CHECK(has(mgp, "using 1:($3 == 0 ? $2 : 1/0) with points pt 2 ps 2 lw 2 lc rgb 'red' title 'does not fit in GPU "
                   "memory'"));
    CHECK(has(mgp, "set yrange [0:*]\n"));
    // breakdown: bars labelled with the swept values, the one that does not fit says so and gets the cross (column
    // 9 is fits, 10 the step time: the label, then the seven time_breakdown_s keys).
    const std::string bdat = slurp(dir / "breakdown.dat");
    CHECK(has(bdat, "\n\"mb 1, stage 1\" "));
    CHECK(has(bdat, "\n\"mb 4, stage 3\" "));
    CHECK(has(bdat, "\n\"mb 4, stage 0 (does not fit)\" "));
    CHECK_FALSE(has(bdat, "\"0:"));
    const std::string bgp = slurp(dir / "breakdown.gp");
    CHECK(has(bgp, "'breakdown.dat' using 0:($9 == 0 ? $10 : 1/0) with points pt 2 ps 2 lw 2 lc rgb 'red' title "
                   "'does not fit in GPU memory'"));
    CHECK(has(bgp, "set xlabel \"swept values: mb, stage\""));
    CHECK(has(bgp, "set yrange [0:*]\n"));
    for (const char* plot : {"throughput", "memory", "breakdown"}) {
      INFO(plot);
      CHECK(png_of_size(dir / (std::string(plot) + ".png"), 900, 600));
      CHECK(svg_document(dir / (std::string(plot) + ".svg")));
    }

    // The summary on standard output: the 11 points that fit ranked by tokens/s, best first (ties by point), then
    // the one that does not fit, unranked, each row as docs/sweep.md "Summary" lays it out from sweep.jsonl's values.
    std::vector<Point> ranked;
    for (const Point& p : points)
      if (p.fits)
        ranked.push_back(p);
    std::stable_sort(ranked.begin(), ranked.end(),
                     [](const Point& a, const Point& b) { return a.tokens_per_s > b.tokens_per_s; });
    std::vector<std::string> want = {
        "sweep: 12 points ranked by tokens/s (all GPUs), best first: 11 fit, 1 do not fit in memory (after them, "
        "never ranked), 0 did not run",
        "  rank  point  mb  stage      tokens/s     step time  TFLOPs/GPU  GPU memory (device)"};
    for (std::size_t k = 0; k < ranked.size(); ++k)
      want.push_back(summary_row(std::to_string(k + 1), ranked[k]));
    want.push_back(summary_row("-", bad));
    const std::string out = slurp(base / "stdout");
    INFO(out);
    const std::vector<std::string> got = lines_of(out);
    REQUIRE(got.size() >= want.size());
    for (std::size_t k = 0; k < want.size(); ++k)
      CHECK(got[k] == want[k]);
    // Then the plots and the files, by name.
    CHECK(has(out, "sweep: plot breakdown: " + (dir / "breakdown.svg").string()));
    CHECK(has(out, (dir / "sweep.csv").string()));
  }

  TEST_CASE("sweep, compare, recommend: without --out, each writes into a new folder named after its input, never "
            "over one that exists, and says where")
  {
    const fs::path cwd = fresh_dir("cli-default-out");
    const std::string two = "training.micro_batch=1,2";
    for (const char* name : {"sweep-fit.sweep", "sweep-fit.sweep-2"}) {
      INFO(name);
      const fs::path out = cwd / (std::string(name) + ".stdout"), err = cwd / (std::string(name) + ".stderr");
      CHECK(wait_for(spawn({BINARY, "sweep", SMALL, "--sweep", two, "--sweep", "deepspeed.zero_optimization.stage=3"},
                           err.string(), out.string(), cwd.string())) == 0);
      CHECK(lines(cwd / name / "sweep.jsonl") == 2);
      CHECK(has(slurp(err), std::string("sweep: 2 points into ") + name + ", 1 at once\n"));
      CHECK(has(slurp(out), std::string(name) + "/sweep.csv, " + name + "/sweep.jsonl\n"));
    }
    // The first sweep's files are as it left them: the second did not write there.
    CHECK(lines(cwd / "sweep-fit.sweep" / "sweep.jsonl") == 2);
    // --resume without --out: which folder is meant cannot be guessed.
    CHECK(wait_for(spawn({BINARY, "sweep", SMALL, "--resume"}, (cwd / "resume.stderr").string(), "/dev/null",
                         cwd.string())) == 2);
    CHECK(slurp(cwd / "resume.stderr") == "sweep --resume: give --out DIR, the folder of the sweep to finish (without "
                                          "--out, each sweep writes into a new folder)\n");

    // compare --runs: the folder is named after the CSV (runs.csv -> runs.compare); a file of that name is kept.
    {
      std::ofstream(cwd / "runs.compare") << "a file the user keeps\n";
    }
    const std::string runs = std::string(ZEROSIM_SOURCE_DIR) + "/tests/data/calibration/runs.csv";
    CHECK(wait_for(spawn({BINARY, "compare", "--runs", runs}, "/dev/null", (cwd / "compare.stdout").string(),
                         cwd.string())) == 0);
    CHECK(slurp(cwd / "runs.compare") == "a file the user keeps\n");
    CHECK(fs::exists(cwd / "runs.compare-2" / "compare.csv"));
    CHECK(has(slurp(cwd / "compare.stdout"), "compare: table runs.compare-2/compare.csv\n"));

    // recommend: <scenario stem>.recommend, named before the table.
    CHECK(wait_for(spawn({BINARY, "recommend", SMALL, "-j", "2"}, "/dev/null", (cwd / "recommend.stdout").string(),
                         cwd.string())) == 0);
    CHECK(fs::exists(cwd / "sweep-fit.recommend" / "candidates.csv"));
    CHECK(has(slurp(cwd / "recommend.stdout"), "recommend: writing into sweep-fit.recommend\n"));
  }

  TEST_CASE("compare: a prediction that does not fit is named before the table and marked in its rows and bars")
  {
    const fs::path base = fresh_dir("cli-compare-unfit");
    // A measured-runs CSV of the small sweep's scenario; --set makes every prediction micro-batch 8 under ZeRO-1,
    // the sweep's one point that does not fit (the sweep test above). The measured figures are made up for the test:
    // only the marking is checked, not the errors.
    {
      std::ofstream(base / "runs.csv") << "scenario,figure,measured,definition,source\n"
                                       << SMALL << ",step_time_s,1.5,,made up for the test\n"
                                       << SMALL << ",peak_memory_bytes,1.2e10,allocated,made up for the test\n";
    }
    const fs::path dir = base / "out";
    CHECK(wait_for(spawn({BINARY, "compare", "--runs", (base / "runs.csv").string(), "--set", "training.micro_batch=8",
                          "--set", "deepspeed.zero_optimization.stage=1", "--out", dir.string()},
                         "/dev/null", (base / "stdout").string())) == 0);
    const std::string out = slurp(base / "stdout");
    INFO(out);
    std::smatch m;
    REQUIRE(
        std::regex_search(out, m,
                          std::regex("compare: sweep-fit.yaml does not fit as predicted \\(short by ([0-9.]+) GiB\\): "
                                     "a real run of it would stop out of memory, so its rows \\(fits NO\\) compare a "
                                     "run that could not have happened\n")));
    CHECK(std::stod(m[1]) > 0);
    // Both rows say NO and name their scenario; the step time is 4 significant figures: 1.5 -> 1.500 s.
    CHECK(std::regex_search(out,
                            std::regex("step time \\(s\\) +1.500 s +[0-9.]+ s +[-+][0-9.]+ % +NO +sweep-fit.yaml +")));
    CHECK(std::regex_search(out, std::regex("peak GPU memory, allocated +11.18 GiB +[0-9.]+ GiB +[-+][0-9.]+ % +NO "
                                            "+sweep-fit.yaml +")));
    // 1.2e10 bytes = 11.18 GiB (1.2e10 / 2^30 = 11.176). compare.csv says false; the bars get the red cross.
    CHECK(std::regex_search(slurp(dir / "compare.csv"),
                            std::regex("\nstep time \\(s\\),1.5,[0-9.e+-]+,[-0-9.e+]+,false,")));
    const std::string gp = slurp(dir / "errors.gp");
    CHECK(has(gp, "using 1:2:xtic(4) with boxes title 'step time (s)'"));
    CHECK(has(gp, "using 1:($3 == 0 ? $2 : 1/0) with points pt 2 ps 2 lw 2 lc rgb 'red' title 'prediction does not "
                  "fit in GPU memory'"));
    CHECK(has(slurp(dir / "errors.dat"), " 0 \"sweep-fit.yaml\"\n"));
    CHECK(png_of_size(dir / "errors.png", 900, 600));
  }
}
