// `zerosim sweep` as a user runs it: the real binary killed halfway loses no finished point, and --resume completes
// the sweep to the bytes of an uninterrupted run (apart from wall_s).
#include <doctest/doctest.h>

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

extern char** environ;

namespace fs = std::filesystem;

namespace {

const std::string BINARY = std::string(ZEROSIM_BINARY_DIR) + "/sim/zerosim";
const std::string SCENARIO = std::string(ZEROSIM_SOURCE_DIR) + "/scenarios/llama2-70b-8xa100-200gbps.yaml";

pid_t spawn(const std::vector<std::string>& args)
{
  std::vector<char*> argv;
  for (const std::string& a : args)
    argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, "/dev/null", O_WRONLY, 0);
  posix_spawn_file_actions_addopen(&actions, STDERR_FILENO, "/dev/null", O_WRONLY, 0);
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

} // namespace

TEST_SUITE("cli")
{
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
