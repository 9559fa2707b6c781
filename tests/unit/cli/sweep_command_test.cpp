// `zerosim sweep` as a user runs it: the real binary killed halfway loses no finished point, and --resume completes
// the sweep to the bytes of an uninterrupted run (apart from wall_s).
#include <doctest/doctest.h>

#include <cstdlib>

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

pid_t spawn(const std::vector<std::string>& args, const std::string& err_file = "/dev/null",
            const std::string& out_file = "/dev/null")
{
  std::vector<char*> argv;
  for (const std::string& a : args)
    argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, out_file.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_addopen(&actions, STDERR_FILENO, err_file.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
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

} // namespace

TEST_SUITE("cli")
{
  TEST_CASE("compare: a published torchtitan log beside the Llama 3 8B FSDP scenario, each figure in its definition")
  {
    const fs::path base = fs::path(ZEROSIM_BINARY_DIR) / "tests-tmp" / "cli-compare";
    fs::remove_all(base);
    fs::create_directories(base);
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
    CHECK(fs::exists(base / "plot" / "compare.png"));
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
    REQUIRE(std::regex_search(runs, st, std::regex("step time \\(s\\) +12.5 s +([0-9.]+) s +([-+0-9.]+) %")));
    CHECK(std::stod(st[2]) == doctest::Approx((12.5 - std::stod(st[1])) / 12.5 * 100).epsilon(0.005).scale(0));
    CHECK(std::regex_search(runs, std::regex("TFLOPs per GPU \\(model\\) +145 ")));
    // 6.4e10 bytes reserved = 59.6 GiB.
    CHECK(std::regex_search(runs, std::regex("peak GPU memory, reserved +59.6 GiB ")));
    // No step lines left after the warm-up: said so.
    CHECK(wait_for(spawn({BINARY, "compare", SCENARIO, logs + "megatron-deepspeed-ds-timer-alcf-polaris.log"},
                         (base / "stderr3").string())) == 0);
    CHECK(has(slurp(base / "stderr3"), "no figure left to compare"));
  }

  TEST_CASE("recommend: the default scenario's winner fits, its scenario.yaml gives the printed figures, and the "
            "ranking agrees with zerosim run")
  {
    const fs::path base = fs::path(ZEROSIM_BINARY_DIR) / "tests-tmp" / "cli-recommend";
    fs::remove_all(base);
    fs::create_directories(base);
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
      std::vector<std::string> cells;
      std::stringstream ls(line);
      std::string cell;
      while (std::getline(ls, cell, ','))
        cells.push_back(cell);
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
      CHECK(direct.back() == doctest::Approx(std::stod(c[10])).epsilon(1e-12));
    }
    CHECK(std::is_sorted(direct.begin(), direct.end()));

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

  TEST_CASE("sweep: under mpirun -np 2 (each rank forking 2 workers) and as two merged shards, the local run's files")
  {
    const fs::path base = fs::path(ZEROSIM_BINARY_DIR) / "tests-tmp" / "cli-sweep-mpi";
    fs::remove_all(base);
    fs::create_directories(base);
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
    CHECK(wait_for(spawn({BINARY, "sweep", SCENARIO, "--sweep", "training.micro_batch=1..8:x2", "--sweep",
                          "deepspeed.zero_optimization.stage=2,3", "--sweep",
                          "deepspeed.zero_optimization.offload_optimizer.device=cpu,none", "-j", "2", "--out",
                          dir.string()})) == 0);
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
    CHECK(has(slurp(dir / "throughput.gp"), "set xlabel \"micro-batch per GPU (sequences)\""));
    CHECK(has(slurp(dir / "breakdown.gp"), "set ylabel 'step time (s)'"));
    // The memory plot draws the GPU's capacity (the A100-80GB's 80 GiB) and marks the points that do not fit.
    const std::string mem = slurp(dir / "memory.gp");
    CHECK(has(mem, "set ylabel 'peak GPU memory, device total (GiB)'"));
    CHECK(has(mem, "capacity = 80\n"));
    CHECK(has(mem, "title 'GPU capacity'"));
    CHECK(has(mem, "title 'does not fit'"));
    // One series per stage and offload: four blocks in the data.
    CHECK(has(slurp(dir / "memory.dat"), "# stage 3, offload_optimizer.device none\n"));

    // `zerosim plot DIR` redraws them.
    fs::remove(dir / "memory.png");
    CHECK(wait_for(spawn({BINARY, "plot", dir.string()})) == 0);
    CHECK(png_of_size(dir / "memory.png", 900, 600));
  }

  TEST_CASE("sweep: killed halfway, a sweep keeps every finished point, and --resume completes it")
  {
    const fs::path base = fs::path(ZEROSIM_BINARY_DIR) / "tests-tmp" / "cli-sweep";
    fs::remove_all(base);
    fs::create_directories(base);
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
}
