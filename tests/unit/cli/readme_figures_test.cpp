// The README's quoted figures (issue 26): every figure the README quotes sits in a ```console block beside the
// command that gives it, and this test re-runs each command and finds the quoted lines in what it prints, in order.
// The convention (docs/testing.md "README figures"):
//
//   ```console
//   $ zerosim run scenarios/llama2-70b-8xa100-200gbps.yaml
//     step time              360.597 s  (16 micro-steps)
//   ...
//   ```
//
// The first line is the command ("$ ", continued over lines ending in " \"); every other line but "..." is a line
// of its output, the quoted lines in the output's order. A command too long for the suite (the validation, the
// calibration fit, the benchmarks, a GPU measurement) is followed by "# in FILE": its lines are then looked up in
// FILE, the committed file that command writes, instead of re-running it. `--out DIR` is redirected to a
// temporary folder, so the test never writes into the source tree.
#include <doctest/doctest.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <sys/wait.h>
#include <vector>

namespace {

const std::string SRC = ZEROSIM_SOURCE_DIR;
const std::string ZEROSIM = std::string(ZEROSIM_BINARY_DIR) + "/sim/zerosim";

struct Block {
  int line = 0;        ///< README line of the command
  std::string command; ///< without "$ "
  std::string in_file; ///< "# in FILE", relative to the repository; "" to re-run the command
  std::vector<std::string> expected;
};

std::string rstrip(std::string s)
{
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r'))
    s.pop_back();
  return s;
}

std::vector<std::string> lines_of(const std::string& text)
{
  std::vector<std::string> out;
  std::istringstream in(text);
  std::string l;
  while (std::getline(in, l))
    out.push_back(rstrip(l));
  return out;
}

std::string read_file(const std::string& path)
{
  std::ifstream in(path, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::vector<Block> console_blocks(const std::string& readme)
{
  const std::vector<std::string> lines = lines_of(readme);
  std::vector<Block> out;
  for (std::size_t i = 0; i < lines.size(); ++i) {
    if (lines[i] != "```console")
      continue;
    Block b;
    b.line = static_cast<int>(i) + 2;
    std::size_t j = i + 1;
    REQUIRE_MESSAGE(j < lines.size(), "README.md:" << i + 1 << ": a console block with no command");
    REQUIRE_MESSAGE(lines[j].rfind("$ ", 0) == 0, "README.md:" << j + 1 << ": a console block starts with '$ '");
    b.command = lines[j].substr(2);
    while (b.command.size() >= 2 && b.command.substr(b.command.size() - 2) == " \\" && j + 1 < lines.size()) {
      ++j;
      const std::size_t indent = lines[j].find_first_not_of(' ');
      b.command = b.command.substr(0, b.command.size() - 1) + lines[j].substr(indent == std::string::npos ? 0 : indent);
    }
    ++j;
    if (j < lines.size() && lines[j].rfind("# in ", 0) == 0)
      b.in_file = lines[j++].substr(5);
    for (; j < lines.size() && lines[j] != "```"; ++j)
      if (lines[j] != "..." && !lines[j].empty())
        b.expected.push_back(lines[j]);
    out.push_back(b);
    i = j;
  }
  return out;
}

/// The command with `zerosim` as the built binary and `--out DIR` as a temporary folder.
std::string runnable(const Block& b, const std::string& tmp)
{
  std::istringstream words(b.command);
  std::string w, out;
  bool out_next = false;
  for (bool first = true; words >> w; first = false) {
    if (first && w == "zerosim")
      w = ZEROSIM;
    else if (out_next)
      w = tmp;
    out_next = w == "--out";
    out += (out.empty() ? "" : " ") + w;
  }
  return out;
}

std::string run_shell(const std::string& command, int& status)
{
  std::string out;
  FILE* p = popen(command.c_str(), "r");
  REQUIRE(p != nullptr);
  std::array<char, 4096> buf{};
  std::size_t n = 0;
  while ((n = std::fread(buf.data(), 1, buf.size(), p)) > 0)
    out.append(buf.data(), n);
  const int st = pclose(p);
  status = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  return out;
}

} // namespace

TEST_CASE("README: every quoted figure is what the command shown beside it gives")
{
  const std::vector<Block> blocks = console_blocks(read_file(SRC + "/README.md"));
  REQUIRE(blocks.size() >= 5); // the default scenario, the validation, recommend, compare, the benchmarks at least
  const std::filesystem::path tmp = std::filesystem::temp_directory_path() / "zerosim-readme-figures";
  for (const Block& b : blocks) {
    INFO("README.md:" << b.line << ": $ " << b.command);
    std::string text;
    if (!b.in_file.empty()) {
      REQUIRE_MESSAGE(std::filesystem::is_regular_file(SRC + "/" + b.in_file), b.in_file << " does not exist");
      text = read_file(SRC + "/" + b.in_file);
    } else {
      REQUIRE_MESSAGE(b.command.rfind("zerosim ", 0) == 0,
                      "only zerosim commands are re-run; name the file another command wrote with '# in FILE'");
      std::filesystem::remove_all(tmp);
      int status = 0;
      text = run_shell("cd '" + SRC + "' && " + runnable(b, tmp.string()) + " 2>/dev/null", status);
      CHECK(status == 0);
    }
    const std::vector<std::string> got = lines_of(text);
    std::size_t at = 0;
    for (const std::string& want : b.expected) {
      std::size_t k = at;
      while (k < got.size() && got[k] != want)
        ++k;
      INFO("quoted line: " << want);
      CHECK_MESSAGE(k < got.size(), "not found in order in the output" << (b.in_file.empty() ? "" : " file"));
      if (k < got.size())
        at = k + 1;
    }
  }
  std::filesystem::remove_all(tmp);
}

TEST_CASE("README: the console-block reader takes a command, its continuation, '# in FILE' and quoted lines")
{
  const std::vector<Block> b =
      console_blocks("text\n```console\n$ zerosim run a.yaml \\\n    --out D\n  x 1\n...\n"
                     "  y 2\n```\n```console\n$ tools/dev.sh bench\n# in r/b.txt\nBM 3\n```\n");
  REQUIRE(b.size() == 2);
  CHECK(b[0].command == "zerosim run a.yaml --out D");
  CHECK(b[0].in_file.empty());
  CHECK(b[0].expected == std::vector<std::string>{"  x 1", "  y 2"});
  CHECK(runnable(b[0], "/t") == ZEROSIM + " run a.yaml --out /t");
  CHECK(b[1].in_file == "r/b.txt");
  CHECK(b[1].expected == std::vector<std::string>{"BM 3"});
}

namespace {

/// The command lines of the README's "## Quick start" ```sh block, comments cut.
std::vector<std::string> quick_start(const std::string& readme)
{
  const std::vector<std::string> lines = lines_of(readme);
  std::vector<std::string> out;
  std::size_t i = 0;
  while (i < lines.size() && lines[i] != "## Quick start")
    ++i;
  while (i < lines.size() && lines[i] != "```sh")
    ++i;
  for (++i; i < lines.size() && lines[i] != "```"; ++i) {
    const std::string command = rstrip(lines[i].substr(0, lines[i].find(" #")));
    if (!command.empty())
      out.push_back(command);
  }
  return out;
}

} // namespace

// A newcomer's path (issue 29): the quick start's commands, as the README writes them, run from the repository and
// exit 0. `tools/dev.sh build` is the step that made the binary this suite runs on, so it is not run again here; the
// binary the README names, build/sim/zerosim, is this build's (the same path when the build folder is build/).
TEST_CASE("README: the quick start's commands, run as written from the repository, exit 0")
{
  const std::vector<std::string> commands = quick_start(read_file(SRC + "/README.md"));
  REQUIRE(commands.size() >= 5);
  CHECK(commands.front() == "tools/dev.sh build");
  int run = 0;
  for (const std::string& c : commands) {
    INFO("$ " << c);
    if (c.rfind("tools/dev.sh ", 0) == 0)
      continue;
    REQUIRE(c.rfind("build/sim/zerosim ", 0) == 0);
    int status = -1;
    run_shell("cd '" + SRC + "' && " + ZEROSIM + c.substr(std::string("build/sim/zerosim").size()) + " >/dev/null 2>&1",
              status);
    CHECK(status == 0);
    ++run;
  }
  CHECK(run == static_cast<int>(commands.size()) - 1);
}
